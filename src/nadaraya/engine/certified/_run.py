"""Running a certified method: its sums, each query's check, and the exact redo."""

from __future__ import annotations

import torch

from ...kernels import BoundKernel
from .._dispatch import choose
from .._job import Job
from .._state import SmoothState
from ._leave_out import is_leave_one_out, less_own_terms, redo_rows, unmasked
from ._sums import Method, Sums
from ._tolerance import unproven_rows

__all__ = ["certified_state", "query_rows", "state_of"]


def query_rows(job: Job, rows: torch.Tensor) -> Job:
    """The same job restricted to the queries ``rows`` (an index tensor); no mask."""
    kernel = BoundKernel(job.kernel.kernel, job.kernel.q[rows], job.kernel.k)
    return Job(kernel, None, job.values, job.queries[rows], job.keys, job.normalize,
               job.exponents)


def state_of(sums: Sums, dtype: torch.dtype) -> SmoothState:
    """The sums as an engine state in ``dtype``: offset ``log total``, total 1, acc the mean.

    Kept in this form so a float32 state neither underflows for tiny totals nor
    overflows for large ones; :func:`~nadaraya.engine._unnormalized.finish` reads
    means and sums from it as from any engine's state.
    """
    total = sums.total
    positive = total > 0
    safe = torch.where(positive, total, torch.ones_like(total))
    offset = torch.where(positive, torch.log(safe), torch.full_like(total, -torch.inf))
    acc = torch.where(positive[:, None], sums.acc / safe[:, None], torch.zeros_like(sums.acc))
    return SmoothState(offset.to(dtype), positive.to(dtype), acc.to(dtype))


def certified_state(job: Job, method: Method, tolerance: float, *,
                    lse: bool = False) -> tuple[SmoothState, int]:
    """The state of ``job`` from ``method``, every query proven within ``tolerance``.

    Returns
    -------
    state : SmoothState
        One row per query, in the job's dtype.
    redone : int
        How many queries the method's bound did not prove and the exact engines
        computed instead.
    """
    leave_out = is_leave_one_out(job)
    if leave_out:
        sums = less_own_terms(job, method.sums(unmasked(job), tolerance))
    else:
        sums = method.sums(job, tolerance)
    values = job.values.detach()
    scale = (values.abs().amax(dim=0) if job.n else values.new_zeros(job.p)).to(torch.float64)
    bad = unproven_rows(sums, scale, tolerance, normalize=job.normalize, lse=lse)
    if job.p:
        # a column of zeros is smoothed exactly: its sums are zero whatever the method
        sums.acc[:, scale == 0] = 0.0
    state = state_of(sums, job.dtype)
    rows = torch.nonzero(bad).flatten()
    if rows.numel():
        sub = redo_rows(job, rows) if leave_out else query_rows(job, rows)
        engine, _ = choose(sub, "auto", describe=False)
        exact = engine.run(sub)
        state.offset[rows] = exact.offset.to(job.dtype)
        state.total[rows] = exact.total.to(job.dtype)
        state.acc[rows] = exact.acc.to(job.dtype)
    return state, int(rows.numel())
