"""Image quality: peak signal-to-noise ratio."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import NadarayaError

__all__ = ["psnr"]


def psnr(reference: Any, image: Any, *, data_range: float | None = None) -> float:
    """Peak signal-to-noise ratio ``10 log10(data_range^2 / MSE)`` in dB.

    Parameters
    ----------
    reference, image : array-like of the same shape
        The clean image and the one to score (torch tensors are moved to CPU).
    data_range : float, optional
        The full scale; default from ``reference``'s dtype: 255 for uint8,
        the dtype's maximum for other integers, 1.0 for floats within [0, 1]
        and 255 for other floats.

    Returns
    -------
    float
        ``inf`` when the images are equal.
    """
    ref = _array(reference, "reference")
    img = _array(image, "image")
    if ref.shape != img.shape:
        raise NadarayaError(
            f"reference and image must have the same shape; got {ref.shape} and {img.shape}."
        )
    if data_range is None:
        kind = np.asarray(reference).dtype if not hasattr(reference, "detach") else None
        if kind is not None and kind.kind in "ui":
            data_range = float(np.iinfo(kind).max)
        else:
            data_range = 1.0 if ref.min() >= 0 and ref.max() <= 1 else 255.0
    mse = float(np.mean((ref - img) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(data_range**2 / mse)


def _array(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise NadarayaError(f"{name} contains NaN or infinity.")
    return arr
