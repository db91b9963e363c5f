"""Masks on blocks of a chunked problem: global indices in every task.

A task sees a chunk of queries (global rows ``qidx``) and a chunk of keys
(global columns from ``k0``). Index masks (causal, window, leave-one-out,
predicates, boolean matrices, and ``&`` / ``|`` of them) are asked about the
global indices of the block through :class:`GlobalIndex`; a radius mask only
looks at the pair of points, so it binds to the block as it is. Masks that
need every key at once (k-nearest) cannot be split and are refused.
"""

from __future__ import annotations

import torch

from ..._config import get_config
from ..._errors import NadarayaError
from ...masks import (
    And,
    BoundMask,
    KNearest,
    LeaveOneOut,
    Mask,
    MatrixMask,
    Or,
    Problem,
    Radius,
    Visibility,
)
from ...masks._base import IndexMask

__all__ = ["GlobalIndex", "check_mask", "localize"]


def _matrix_bytes(mask: MatrixMask) -> int:
    if mask.sparse:
        m = mask.matrix
        return int(m.indices.nbytes + m.indptr.nbytes)
    return int(mask.matrix.numel())


def check_mask(mask: Mask | None, m: int, n: int) -> None:
    """Refuse masks a chunked problem cannot honour; check the rest against ``(m, n)``.

    Raises
    ------
    NadarayaError
        Naming ``mask`` and the fix, for k-nearest masks, mask types that are
        not index or pairwise masks, and boolean matrices larger than the
        working-memory budget (each task would receive the whole matrix).
    """
    if mask is None:
        return
    if isinstance(mask, And | Or):
        check_mask(mask.left, m, n)
        check_mask(mask.right, m, n)
        return
    if isinstance(mask, Radius):
        return
    if isinstance(mask, KNearest):
        raise NadarayaError(
            f"mask {mask!r} needs every key at once to find each query's nearest ones, so the "
            "Dask engine cannot split the keys into chunks. Use a Radius mask, compute the "
            "inputs (.compute()) and smooth in memory, or pass a boolean MatrixMask of the "
            "neighbours."
        )
    if isinstance(mask, MatrixMask):
        budget = get_config().working_memory * 2**20
        if _matrix_bytes(mask) > budget:
            raise NadarayaError(
                f"mask is a {mask.shape[0]} x {mask.shape[1]} boolean matrix, "
                f"{_matrix_bytes(mask) / 2**20:.0f} MiB, larger than the working-memory budget "
                f"({budget / 2**20:.0f} MiB) that every Dask task would have to receive. Use a "
                "structured mask (Causal, Window, LeaveOneOut), a predicate fn(i, j), or a "
                "sparse matrix."
            )
    elif not isinstance(mask, IndexMask):
        raise NadarayaError(
            f"mask {mask!r} is not an index mask (Causal, Window, LeaveOneOut, a predicate, a "
            "boolean matrix) or a Radius mask, so the Dask engine cannot evaluate it on a "
            "chunk of keys. Use one of those, or compute the inputs and smooth in memory."
        )
    empty = torch.zeros(0, 1)
    BoundMask(mask, Problem(m, n, empty, empty))  # checks rows, shapes against (m, n)


class GlobalIndex(Mask):
    """``inner`` asked about global indices: local query ``i`` is ``qidx[i]``, key ``j`` ``k0 + j``.

    Parameters
    ----------
    inner : Mask
        An index mask (or a boolean matrix) over the whole ``(m, n)`` problem.
    qidx : torch.Tensor of shape (m_local,), int64
        Global index of each local query.
    k0 : int
        Global index of the first local key.
    m, n : int
        Sizes of the whole problem.
    """

    name = "global-index"

    def __init__(self, inner: Mask, qidx: torch.Tensor, k0: int, m: int, n: int) -> None:
        self.inner, self.qidx, self.k0, self.m, self.n = inner, qidx, k0, m, n
        steps = qidx[1:] - qidx[:-1]
        self.q0 = int(qidx[0]) if qidx.numel() and bool((steps == 1).all()) else None

    def _prepare(self, bound: BoundMask) -> None:
        p = bound.problem
        bound.state["inner"] = BoundMask(self.inner, Problem(self.m, self.n, p.queries, p.keys))

    def _inner(self, bound: BoundMask) -> BoundMask:
        return bound.state["inner"]  # type: ignore[return-value]

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        gi = self.qidx[rows]
        j = torch.arange(self.k0 + cols.start, self.k0 + cols.stop)
        return self._inner(bound).pairs(gi, j.expand(gi.numel(), -1))

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        if self.q0 is None:
            return Visibility.PARTIAL
        return self._inner(bound).status(
            slice(self.q0 + rows.start, self.q0 + rows.stop),
            slice(self.k0 + cols.start, self.k0 + cols.stop))

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return self._inner(bound).pairs(self.qidx[rows], index + self.k0)

    def __repr__(self) -> str:
        return repr(self.inner)


def localize(mask: Mask | None, qidx: torch.Tensor, k0: int, m: int, n: int) -> Mask | None:
    """The mask of one block, in the block's local indices (see :class:`GlobalIndex`)."""
    if mask is None:
        return None
    if isinstance(mask, And):
        return And(localize(mask.left, qidx, k0, m, n), localize(mask.right, qidx, k0, m, n))
    if isinstance(mask, Or):
        return Or(localize(mask.left, qidx, k0, m, n), localize(mask.right, qidx, k0, m, n))
    if isinstance(mask, Radius):
        return mask
    if (type(mask) is LeaveOneOut and mask.rows is None and qidx.numel()
            and int(qidx[0]) == k0 and bool((qidx == torch.arange(k0, k0 + qidx.numel())).all())):
        # a diagonal block: local query i hides local key i, as leave-one-out in memory
        return LeaveOneOut()
    return GlobalIndex(mask, qidx, k0, m, n)
