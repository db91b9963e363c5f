"""The dense engine: the reference. Materializes score rows of a few queries."""

from __future__ import annotations

import torch

from ..._config import block_elements
from .._job import Job
from .._products import weighted_sum
from .._state import SmoothState

__all__ = ["DenseEngine", "dense_weights"]


def _row_blocks(job: Job) -> int:
    # the kernel's score block and its scratch, with room to spare; a mask's
    # block (bool) and what it is made from (a neighbour list, say)
    buffers = 3 if job.mask is None else 5
    return max(1, block_elements(job.values.element_size(), buffers=buffers) // max(job.n, 1))


def _scores(job: Job, rows: slice, in_place: bool) -> torch.Tensor:
    s = job.kernel.score(rows, slice(None))
    if job.mask is not None:
        hidden = ~job.mask.block(rows, slice(0, job.n))
        s = s.masked_fill_(hidden, -torch.inf) if in_place else s.masked_fill(hidden, -torch.inf)
    return s


def dense_weights(job: Job, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalized weights ``(mb, n)`` of queries ``rows`` and their lse ``(mb,)``.

    Rows with no weight get all-zero weights and ``lse = -inf``. Unless a
    gradient is recorded, the weights overwrite the scores: one ``(mb, n)``
    block (and the kernel's scratch) at a time.
    """
    in_place = not job.requires_grad
    s = _scores(job, rows, in_place)
    top = s.max(dim=1).values if s.shape[1] else s.new_full((s.shape[0],), -torch.inf)
    safe = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w = s.sub_(safe[:, None]).exp_() if in_place else torch.exp(s - safe[:, None])
    total = w.sum(dim=1)
    # Divide by the sum itself: exp(s - lse) would carry lse's rounding,
    # eps * |lse|, into every weight.
    divisor = torch.where(total > 0, total, torch.ones_like(total))[:, None]
    w = w.div_(divisor) if in_place else w / divisor
    return w, safe + torch.log(total)


class DenseEngine:
    """Reference engine: per block of query rows, scores against every key.

    Memory is bounded by the working-memory budget (rows per block shrink as
    ``n`` grows); it is differentiable, and in float64 it is the golden
    result every other engine is tested against. Products with the values
    are summed in float64 (see :mod:`~nadaraya.engine._products`).
    """

    name = "dense"

    def refuse(self, job: Job) -> str | None:
        return None

    def cost(self, job: Job) -> float:
        return 3.0 * job.m * job.n * (job.p + job.kernel.q.shape[1] + 4)

    def run(self, job: Job) -> SmoothState:
        step = _row_blocks(job)
        offsets, totals, accs = [], [], []
        for start in range(0, job.m, step):
            rows = slice(start, min(start + step, job.m))
            w, lse = dense_weights(job, rows)
            offsets.append(lse)
            totals.append(w.sum(dim=1))
            accs.append(weighted_sum(w, job.values))
            del w  # before the next block's scores
        if not offsets:
            return SmoothState.empty(0, job.p, dtype=job.dtype, device=job.device)
        return SmoothState(torch.cat(offsets), torch.cat(totals), torch.cat(accs))
