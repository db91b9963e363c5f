"""The dense engine: the reference. Materializes score rows of a few queries."""

from __future__ import annotations

import torch

from .._config import block_elements
from ._job import Job
from ._state import SmoothState

__all__ = ["DenseEngine", "dense_weights"]


def _row_blocks(job: Job) -> int:
    return max(1, block_elements(job.values.element_size(), buffers=3) // max(job.n, 1))


def _scores(job: Job, rows: slice) -> torch.Tensor:
    s = job.kernel.score(rows, slice(None))
    if job.mask is not None:
        visible = job.mask.block(rows, slice(0, job.n))
        s = torch.where(visible, s, torch.full_like(s, -torch.inf))
    return s


def dense_weights(job: Job, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalized weights ``(mb, n)`` of queries ``rows`` and their lse ``(mb,)``.

    Rows with no weight get all-zero weights and ``lse = -inf``.
    """
    s = _scores(job, rows)
    top = s.max(dim=1).values if s.shape[1] else s.new_full((s.shape[0],), -torch.inf)
    safe = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w = torch.exp(s - safe[:, None])
    total = w.sum(dim=1)
    # Divide by the sum itself: exp(s - lse) would carry lse's rounding,
    # eps * |lse|, into every weight.
    w = w / torch.where(total > 0, total, torch.ones_like(total))[:, None]
    return w, safe + torch.log(total)


class DenseEngine:
    """Reference engine: per block of query rows, scores against every key.

    Memory is bounded by the working-memory budget (rows per block shrink as
    ``n`` grows); it is differentiable, and in float64 it is the golden
    result every other engine is tested against.
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
            accs.append(w @ job.values)
        if not offsets:
            return SmoothState.empty(0, job.p, dtype=job.dtype, device=job.device)
        return SmoothState(torch.cat(offsets), torch.cat(totals), torch.cat(accs))
