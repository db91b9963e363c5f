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

__all__ = [
    "ArrayKind",
    "all_finite",
    "as_input",
    "as_tensor",
    "check_finite",
    "compute_dtype",
    "kind_of",
    "to_caller",
]


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


def _pandas_array(x: Any) -> np.ndarray | None:
    """A pandas object with nullable (extension) numeric columns as NumPy, missing as NaN.

    pandas' nullable dtypes (``Float64``, ``Int64``, ``boolean``, ...) have no
    NumPy dtype of their own, and NumPy turns a missing value (``pd.NA``) or a
    table of such columns into an object array. Here they become the NumPy
    dtype of their values, and float64 with NaN where values are missing (so
    that :func:`check_finite` names those rows). None for anything else: NumPy's
    own conversion serves it (plain columns, categoricals, strings).
    """
    if not type(x).__module__.startswith("pandas") or not hasattr(x, "to_numpy"):
        return None
    dtypes = list(x.dtypes) if getattr(x, "ndim", 1) == 2 else [x.dtype]
    if all(isinstance(d, np.dtype) for d in dtypes):
        return None
    numeric = [d if isinstance(d, np.dtype) else getattr(d, "numpy_dtype", None) for d in dtypes]
    if not numeric or any(d is None or d.kind not in "biuf" for d in numeric):
        return None
    target = np.result_type(*numeric)
    if bool(np.asarray(x.isna()).any()):
        return x.to_numpy(dtype=target if target.kind == "f" else np.float64, na_value=np.nan)
    return x.to_numpy(dtype=target)


def _check_tensor(t: torch.Tensor, name: str) -> torch.Tensor:
    """``t`` if it holds real numbers the engines can read; a quantized tensor dequantized."""
    if t.is_complex():
        raise NadarayaError(
            f"{name} must be real; got a complex tensor. Pass its real part or its modulus."
        )
    if t.is_nested:
        raise NadarayaError(
            f"{name} must be one dense tensor; got a nested tensor. Pad it into one, e.g. "
            f"{name}.to_padded_tensor(0.0), or smooth each of its tensors apart."
        )
    if t.layout != torch.strided:
        raise NadarayaError(
            f"{name} must be a dense tensor; got layout {str(t.layout).replace('torch.', '')}. "
            f"Pass {name}.to_dense()."
        )
    return t.dequantize() if t.is_quantized else t


def as_input(x: Any, name: str) -> torch.Tensor | np.ndarray:
    """Check that ``x`` holds real numbers; a tensor, or ``x`` as a NumPy array.

    Tensors are returned as they are (dequantized if quantized); anything else
    becomes a NumPy array in native byte order, without a copy where NumPy
    makes none. pandas' nullable dtypes become their NumPy dtype, with NaN for
    missing values (float64 for nullable integers and booleans that have
    some); so do the masked entries of a ``numpy.ma.MaskedArray``. Shapes,
    NaN and infinity are not checked here.

    Parameters
    ----------
    x : array-like, pandas object or torch.Tensor
        The input.
    name : str
        The parameter name used in error messages.

    Returns
    -------
    torch.Tensor or numpy.ndarray
    """
    if isinstance(x, torch.Tensor):
        return _check_tensor(x, name)
    if (isinstance(x, np.ma.MaskedArray) and x.dtype.kind in "biuf"
            and np.ma.getmaskarray(x).any()):
        x = (x if x.dtype.kind == "f" else x.astype(np.float64)).filled(np.nan)
    arr = _pandas_array(x)
    if arr is None:
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
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


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
    x : array-like, pandas object or torch.Tensor
        The input (see :func:`as_input` for what is accepted).
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
        :func:`check_finite`). A read-only array is copied (torch tensors are
        writable), so the caller's data is never exposed to a write.
    """
    x = as_input(x, name)
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise NadarayaError(
                f"{name} is on the 'meta' device, which holds no numbers; pass a tensor on the "
                "CPU or an accelerator."
            )
        t = x
    else:
        arr = x
        if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
            arr = arr.astype(np.float64)  # long double: torch has no such dtype
        elif not arr.flags.writeable:
            arr = arr.copy()
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


def all_finite(t: torch.Tensor) -> bool:
    """Whether every entry of ``t`` is finite: one pass, no temporary as large as ``t``.

    The least and largest entries are finite exactly when every entry is (NaN
    propagates through both).
    """
    return not t.numel() or bool(torch.isfinite(torch.stack(torch.aminmax(t.detach()))).all())


def check_finite(t: torch.Tensor, name: str) -> None:
    """Raise if ``t`` holds NaN or infinity, saying where (the rows found only then)."""
    if all_finite(t):
        return
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
    """Remember what kind of array the caller passed (after :func:`as_input`, or as given)."""
    if isinstance(x, torch.Tensor):
        return ArrayKind(True, x.dtype, x.device)
    arr = x if isinstance(x, np.ndarray) else _pandas_array(x)
    dtype = (arr if arr is not None else np.asarray(x)).dtype
    dtype = dtype.newbyteorder("=") if dtype.kind == "f" else np.dtype(np.float64)
    return ArrayKind(False, dtype, torch.device("cpu"))


def to_caller(t: torch.Tensor, kind: ArrayKind) -> Any:
    """Give ``t`` back as the caller's kind: a tensor on its device or a NumPy array."""
    if kind.is_torch:
        dtype = kind.dtype if kind.dtype.is_floating_point else t.dtype
        return t.to(device=kind.device, dtype=dtype)
    return t.detach().cpu().numpy().astype(kind.dtype, copy=False)
