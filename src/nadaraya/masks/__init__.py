"""Masks: the visible set M(q) of each query.

Combine with ``&`` and ``|``. :func:`get_mask` also accepts a boolean matrix
(dense or scipy sparse), a predicate ``fn(i, j)``, FlexAttention's
``mask_mod(b, h, q_idx, kv_idx)`` (a mask per batch element and head), or the
names ``"causal"`` and ``"leave-one-out"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._base import And, BoundMask, Candidates, Mask, Or, Predicate, Problem, Visibility
from .geometric import KNearest, Radius
from .mask_mod import MaskMod, is_mask_mod
from .matrix import MatrixMask
from .structured import Causal, LeaveOneOut, Window

__all__ = [
    "And",
    "BoundMask",
    "Candidates",
    "Causal",
    "KNearest",
    "LeaveOneOut",
    "Mask",
    "MaskMod",
    "MatrixMask",
    "Or",
    "Predicate",
    "Problem",
    "Radius",
    "Visibility",
    "Window",
    "get_mask",
]

_NAMED = {"causal": Causal, "leave-one-out": LeaveOneOut, "loo": LeaveOneOut}


def get_mask(mask: Any) -> Mask | None:
    """Turn what a caller passed as ``mask`` into a :class:`Mask` (or None)."""
    if mask is None or isinstance(mask, Mask):
        return mask
    if isinstance(mask, str):
        try:
            return _NAMED[mask.lower()]()
        except KeyError:
            raise NadarayaError(
                f"mask {mask!r} is not known; use 'causal', 'leave-one-out', a Mask object "
                "(Window, Radius, KNearest, ...), a boolean matrix, a predicate fn(i, j) or a "
                "mask_mod(b, h, q_idx, kv_idx)."
            ) from None
    import scipy.sparse as sp

    if sp.issparse(mask) or isinstance(mask, torch.Tensor | np.ndarray | list):
        return MatrixMask(mask)
    if callable(mask):
        return MaskMod(mask) if is_mask_mod(mask) else Predicate(mask)
    raise NadarayaError(
        f"mask must be a Mask, a boolean matrix, a predicate or a name; got {type(mask).__name__}."
    )
