"""Test images for the dask filters: a clean pattern, tinted per channel, with noise."""

from __future__ import annotations

from typing import Any

import numpy as np


def noisy_image(rng: np.random.Generator, clean: np.ndarray, shape: tuple[int, ...], dtype: Any,
                *, sd: float, tint: tuple[float, float]) -> np.ndarray:
    """``clean (height, width)`` in [0, 1], scaled per channel from ``tint[0]`` to ``tint[1]``,
    plus Gaussian noise of s.d. ``sd``, clipped to [0, 1] and put in ``dtype``'s range
    (integers) or kept in [0, 1] (floats)."""
    if len(shape) == 3:
        clean = clean[..., None] * np.linspace(*tint, shape[2])
    x = np.clip(clean + sd * rng.standard_normal(shape), 0.0, 1.0)
    if np.dtype(dtype).kind == "u":
        return np.rint(x * np.iinfo(dtype).max).astype(dtype)
    return x.astype(dtype)
