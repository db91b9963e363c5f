"""Shared checks of the device tests: placement, finiteness, dtype-derived tolerances."""

from __future__ import annotations

import numpy as np
import torch


def on(x: np.ndarray, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``x`` as a tensor of ``dtype`` on ``device``."""
    return torch.as_tensor(x, dtype=dtype).to(device)


def rounded(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """``x`` rounded to ``dtype`` and back to float64: the inputs the device really sees.

    Oracles are computed on these, so a test measures the computation's error,
    not the rounding of its inputs.
    """
    return torch.as_tensor(x).to(dtype).double().numpy()


def host(t: torch.Tensor, device: torch.device) -> np.ndarray:
    """Check that ``t`` stayed on ``device`` and holds no NaN; return it as float64 NumPy."""
    assert isinstance(t, torch.Tensor), type(t)
    assert t.device.type == device.type, (t.device, device)
    assert not bool(torch.isnan(t).any()), "NaN in the output"
    return t.detach().cpu().double().numpy()


def eps(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)
