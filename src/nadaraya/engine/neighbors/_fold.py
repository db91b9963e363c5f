"""The neighbors engine's folding: candidate pairs scored and reduced into the state.

Pairs go in chunks within the working-memory budget; the mask's other conjuncts
hide pairs; each query reduces in the log domain into a wide state.
"""

from __future__ import annotations

import torch

from ..._config import get_config
from ...kernels import BoundKernel
from ...masks import BoundMask
from .._job import Job
from .._products import WIDE
from .._state import SmoothState

__all__: list[str] = []


# -- folding pairs into the state -------------------------------------------------
def _bytes_per_pair(job: Job) -> int:
    e = job.kernel.q.shape[1]
    return 48 + job.dtype.itemsize * (3 * e + 2 * job.p + 6)


def _chunk_pairs(job: Job) -> int:
    """Pairs per chunk within the budget (a tree's output, 24 bytes a pair, included)."""
    budget = get_config().working_memory * 2**20
    return max(1, int(budget // (_bytes_per_pair(job) + 24)))


def _hide(filters: list[BoundMask], rows: torch.Tensor, index: torch.Tensor,
          hidden: torch.Tensor | None = None) -> torch.Tensor | None:
    """Pairs (``rows[i]``, ``index[i, t]``) that one of ``filters`` hides."""
    for f in filters:
        unseen = ~f.pairs(rows, index)
        hidden = unseen if hidden is None else hidden.logical_or_(unseen)
    return hidden


def _fold_table(kernel: BoundKernel, values: torch.Tensor, index: torch.Tensor,
                hidden: torch.Tensor | None, part: SmoothState) -> None:
    """Reduce each query of ``kernel`` over its keys ``index (c, K)`` into ``part``.

    The sums over a query's keys are taken in float64 (then rounded to ``part``'s dtype).
    """
    s = kernel.pairs(slice(None), index) if index.shape[1] else kernel.q.new_empty(index.shape)
    if hidden is not None:
        s.masked_fill_(hidden, -torch.inf)
    top = s.amax(1) if s.shape[1] else s.new_full((s.shape[0],), -torch.inf)
    safe = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w = s.sub_(safe[:, None]).exp_()
    part.offset.copy_(top)
    part.total.copy_(w.sum(1, dtype=WIDE))
    if values.shape[1] == 1:
        part.acc[:, 0] = (w * values[index, 0]).sum(1, dtype=WIDE)
    elif values.shape[1]:
        part.acc.copy_((values[index] * w[:, :, None]).sum(1, dtype=WIDE))


def _fold_pairs(kernel: BoundKernel, values: torch.Tensor, local: torch.Tensor,
                cols: torch.Tensor, hidden: torch.Tensor | None, part: SmoothState) -> None:
    """Merge the pairs (query ``local``, key ``cols``) of ``kernel`` into ``part``.

    ``part`` may be wider than the scores (float64 sums of float32 pairs); its
    offsets are scores, so the weights are formed exactly as in the scores' dtype.
    """
    s = kernel.pairs(local, cols[:, None])[:, 0]
    if hidden is not None:
        s.masked_fill_(hidden, -torch.inf)
    top = s.new_full(part.offset.shape, -torch.inf).scatter_reduce_(0, local, s, reduce="amax")
    new = torch.maximum(part.offset, top.to(part.offset.dtype))
    safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
    rescale = torch.exp(part.offset - safe)
    part.total.mul_(rescale)
    part.acc.mul_(rescale[:, None])
    w = s.sub_(safe.to(s.dtype)[local]).exp_()
    wide = part.total.dtype
    part.total.index_add_(0, local, w.to(wide))
    if values.shape[1] == 1:
        part.acc[:, 0].index_add_(0, local, values[cols, 0].mul_(w).to(wide))
    elif values.shape[1]:
        part.acc.index_add_(0, local, values[cols].mul_(w[:, None]).to(wide))
    part.offset.copy_(new)


def _wide_state(rows: int, job: Job) -> SmoothState:
    """An empty state with float64 sums, for pairs folded over several chunks."""
    return SmoothState.empty(rows, job.p, dtype=WIDE, device=job.device)


# -- the three sources --------------------------------------------------------------
