"""Input checking and conversion shared by every layer.

The engine computes in torch. NumPy arrays (and array-likes) are converted
without copying where possible, and results go back to the caller's kind,
dtype and device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._errors import NadarayaError

__all__ = ["ArrayKind", "as_tensor", "check_finite", "compute_dtype", "kind_of", "to_caller"]


@dataclass(frozen=True)
class ArrayKind:
    """What the caller passed: how to give results back."""

    is_torch: bool
    dtype: Any
    device: torch.device


def _kind_name(x: Any) -> str:
    return type(x).__module__.split(".")[0] + "." + type(x).__name__


def compute_dtype(dtype: Any) -> torch.dtype:
    """Floating dtype the engines compute in for an input dtype.

    float64 stays float64, float32 stays float32, half precisions compute in
    float32, integers and booleans compute in float64.
    """
    if isinstance(dtype, torch.dtype):
        if dtype in (torch.float64, torch.float32):
            return dtype
        if dtype in (torch.float16, torch.bfloat16):
            return torch.float32
        return torch.float64
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return torch.float32
    if dtype == np.float16:
        return torch.float32
    return torch.float64


def as_tensor(
    x: Any,
    name: str,
    *,
    ndim: tuple[int, ...] = (1, 2),
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Convert ``x`` to a floating torch tensor and check its kind.

    Parameters
    ----------
    x : array-like or torch.Tensor
        The input.
    name : str
        The parameter name used in error messages.
    ndim : tuple of int
        Accepted numbers of dimensions.
    dtype, device : optional
        Target dtype and device; by default the compute dtype of ``x`` and its
        own device (CPU for NumPy input).

    Returns
    -------
    torch.Tensor
        Floating tensor; NaN and inf are *not* checked here (see
        :func:`check_finite`).
    """
    if isinstance(x, torch.Tensor):
        t = x
        if t.is_complex():
            raise NadarayaError(
                f"{name} must be real; got a complex tensor. Pass its real part or its modulus."
            )
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged lists and other unconvertible input
            raise NadarayaError(
                f"{name} must be an array of numbers; could not convert {_kind_name(x)}: {exc}"
            ) from None
        if np.iscomplexobj(arr):
            raise NadarayaError(
                f"{name} must be real; got complex dtype {arr.dtype}. "
                "Pass its real part or its modulus."
            )
        if arr.dtype.kind not in "biuf":
            raise NadarayaError(
                f"{name} must hold numbers; got dtype {arr.dtype}. "
                "Convert it, e.g. with np.asarray(x, dtype=float)."
            )
        # ascontiguousarray makes a 0-D array 1-D; keep the shape for the check below.
        t = torch.from_numpy(np.ascontiguousarray(arr).reshape(arr.shape))
    if t.ndim not in ndim:
        expected = " or ".join(f"{d}-D" for d in ndim)
        raise NadarayaError(
            f"{name} must be {expected}; got shape {tuple(t.shape)}. "
            "Reshape it, e.g. x.reshape(-1, 1) for one feature."
        )
    target = dtype if dtype is not None else compute_dtype(t.dtype)
    return t.to(device=device if device is not None else t.device, dtype=target)


def check_finite(t: torch.Tensor, name: str) -> None:
    """Raise if ``t`` holds NaN or infinity, saying where."""
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        rows = torch.nonzero(bad.reshape(t.shape[0], -1).any(dim=1)).flatten()
        shown = ", ".join(str(int(i)) for i in rows[:5])
        more = "" if rows.numel() <= 5 else f" and {rows.numel() - 5} more"
        raise NadarayaError(
            f"{name} contains NaN or infinity in {rows.numel()} row(s) (rows {shown}{more}). "
            "Remove or impute those rows first."
        )


def kind_of(x: Any) -> ArrayKind:
    """Remember what kind of array the caller passed."""
    if isinstance(x, torch.Tensor):
        return ArrayKind(True, x.dtype, x.device)
    arr = np.asarray(x)
    dtype = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
    return ArrayKind(False, dtype, torch.device("cpu"))


def to_caller(t: torch.Tensor, kind: ArrayKind) -> Any:
    """Give ``t`` back as the caller's kind: a tensor on its device or a NumPy array."""
    if kind.is_torch:
        dtype = kind.dtype if kind.dtype.is_floating_point else t.dtype
        return t.to(device=kind.device, dtype=dtype)
    return t.detach().cpu().numpy().astype(kind.dtype, copy=False)
