"""FlexAttention's ``mask_mod(b, h, q_idx, kv_idx)``: a mask per batch element and head."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import torch

from .._errors import NadarayaError
from ._base import BoundMask, IndexMask, Mask

__all__ = ["MaskMod", "is_mask_mod"]


def is_mask_mod(fn: Any) -> bool:
    """Whether a callable takes FlexAttention's four indices ``(b, h, q_idx, kv_idx)``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    return len(positional) == 4


class MaskMod(IndexMask):
    """A mask from FlexAttention's ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

    Evaluated vectorized, as ``torch.nn.attention.flex_attention.create_mask``
    does: ``b``, ``h``, ``q_idx`` and ``kv_idx`` are int64 tensors that
    broadcast against each other (``b`` ``(B, 1, 1, 1)``, ``h`` ``(H, 1,
    1)``, ``q_idx`` ``(mb, 1)``, ``kv_idx`` ``(1, nb)``), and the result must
    be a bool tensor that broadcasts to ``(B, H, mb, nb)``. For problems of
    shape ``(..., H, L, E)`` ``h`` indexes the heads (dimension -3) and ``b``
    the flattened dimensions before them; a single problem has ``b = h = 0``.
    Combine it with the other masks with ``&`` and ``|``.

    Parameters
    ----------
    fn : callable
        ``fn(b, h, q_idx, kv_idx)``; True where query ``q_idx`` sees key
        ``kv_idx`` in head ``h`` of batch element ``b``.

    Examples
    --------
    >>> from nadaraya.masks import MaskMod
    >>> def causal(b, h, q_idx, kv_idx):
    ...     return q_idx >= kv_idx
    >>> mask = MaskMod(causal)
    """

    name = "mask_mod"

    def __init__(self, fn: Callable[[Any, Any, Any, Any], Any]) -> None:
        if not callable(fn):
            raise NadarayaError(f"mask_mod must be callable; got {type(fn).__name__}.")
        self.fn = fn

    @property
    def reads_index(self) -> bool:
        return True

    def at(self, lead: tuple[int, ...], index: int) -> Mask:
        return _Fixed(self, *_unravel(lead, index))

    def _call(self, b: torch.Tensor, h: torch.Tensor, i: torch.Tensor, j: torch.Tensor,
              shape: tuple[int, ...]) -> torch.Tensor:
        out = torch.as_tensor(self.fn(b, h, i, j), device=i.device)
        if out.dtype != torch.bool:
            raise NadarayaError(
                f"mask_mod must return a bool tensor; got dtype {out.dtype}. Return a "
                "comparison such as (q_idx >= kv_idx)."
            )
        try:
            fits = tuple(torch.broadcast_shapes(out.shape, shape)) == shape
        except RuntimeError:
            fits = False
        if not fits:
            raise NadarayaError(
                f"mask_mod returned shape {tuple(out.shape)}, which does not broadcast to "
                f"(batch, heads, queries, keys) = {shape}; build it from b, h, q_idx and "
                "kv_idx with element-wise operations."
            )
        return out

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        dev, lead = bound.device, bound.problem.lead
        i = torch.arange(rows.start, rows.stop, device=dev)[:, None]
        j = torch.arange(cols.start, cols.stop, device=dev)[None, :]
        shape = (*lead, i.shape[0], j.shape[1])
        if not lead:
            zero = torch.zeros((), dtype=torch.long, device=dev)
            return self._call(zero, zero, i, j, shape)
        h = torch.arange(lead[-1], device=dev).reshape(-1, 1, 1)
        b = torch.arange(math.prod(lead[:-1]), device=dev).reshape(*lead[:-1], 1, 1, 1)
        return self._call(b, h, i, j, shape)

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros((), dtype=torch.long, device=i.device)
        return self._call(zero, zero, i, j, tuple(torch.broadcast_shapes(i.shape, j.shape)))

    def _params(self) -> str:
        return getattr(self.fn, "__name__", "fn")


class _Fixed(IndexMask):
    """A :class:`MaskMod` at one (batch, head) index: a mask of one problem."""

    name = "mask_mod"

    def __init__(self, mod: MaskMod, b: int, h: int) -> None:
        self.mod, self.b, self.h = mod, b, h

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        b, h = (torch.tensor(x, device=i.device) for x in (self.b, self.h))
        return self.mod._call(b, h, i, j, tuple(torch.broadcast_shapes(i.shape, j.shape)))

    def _params(self) -> str:
        return f"{self.mod._params()}, b={self.b}, h={self.h}"


def _unravel(lead: tuple[int, ...], index: int) -> tuple[int, int]:
    """The (batch, head) of flat problem ``index`` among ``lead`` (``(..., heads)``)."""
    if not lead:
        return 0, 0
    return divmod(index, lead[-1])
