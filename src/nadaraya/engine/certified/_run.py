"""Running a certified method: its sums block by block, each query's check, and the exact redo.

The method is prepared once for the job (:func:`~._sums.prepare_sums`); the
queries then go in blocks of :func:`~._sums.block_rows` rows, as many side by
side as there are threads (:func:`~nadaraya.engine._threads.map_blocks`):
each block's sums are checked against the tolerance and divided into means,
written to its rows of the one ``(m, p)`` result, and dropped. The queries
the bounds do not prove are computed again by the exact engines at the end.
Memory is the method's key side, one block's temporaries and the result
(plus the log-sums when they are asked for).
"""

from __future__ import annotations

import torch

from ...kernels import BoundKernel
from .._dispatch import choose
from .._job import Job
from .._state import MeanState, SmoothState
from .._threads import map_blocks
from ._leave_out import is_leave_one_out, less_own_terms, redo_rows, unmasked
from ._sums import Method, PreparedSums, Sums, block_rows, prepare_sums
from ._tolerance import unproven_rows

__all__ = ["certified_state", "query_rows", "state_of"]


def query_rows(job: Job, rows: torch.Tensor) -> Job:
    """The same job restricted to the queries ``rows`` (an index tensor); no mask.

    Parameters
    ----------
    job : Job
        The bound problem: kernel and points, mask, values and sizes.
    rows : torch.Tensor of shape (r,)
        Indices of the queries to keep.
    """
    kernel = BoundKernel(job.kernel.kernel, job.kernel.q[rows], job.kernel.k)
    return Job(kernel, None, job.values, job.queries[rows], job.keys, job.normalize,
               job.exponents)


def state_of(sums: Sums, dtype: torch.dtype) -> SmoothState:
    """The sums as an engine state in ``dtype``: offset ``log total``, total 1, acc the mean.

    Kept in this form so a float32 state neither underflows for tiny totals nor
    overflows for large ones; :func:`~nadaraya.engine.unnormalized._engine.finish` reads
    means and sums from it as from any engine's state.

    Parameters
    ----------
    sums : Sums
        A method's sums (float64).
    dtype : torch.dtype
        The job's dtype.
    """
    total = sums.total
    positive = total > 0
    safe = torch.where(positive, total, torch.ones_like(total))
    offset = torch.where(positive, torch.log(safe), torch.full_like(total, -torch.inf))
    acc = torch.where(positive[:, None], sums.acc / safe[:, None], torch.zeros_like(sums.acc))
    return SmoothState(offset.to(dtype), positive.to(dtype), acc.to(dtype))


def certified_state(job: Job, method: Method, tolerance: float, *,
                    lse: bool = False) -> tuple[MeanState, int]:
    """The state of ``job`` from ``method``, every query proven within ``tolerance``.

    Parameters
    ----------
    job : Job
    method : Method
    tolerance : float
    lse : bool
        Keep the log-sums (for ``return_lse``); they are kept too for
        ``normalize=False``, whose sums are the means times ``exp(offset)``.

    Returns
    -------
    state : MeanState
        One row per query, in the job's dtype: the means (``total`` 1, or 0 on
        the rows that see no weight).
    redone : int
        How many queries the method's bound did not prove and the exact engines
        computed instead.
    """
    leave_out = is_leave_one_out(job)
    ready = prepare_sums(method, unmasked(job) if leave_out else job, tolerance)
    values = job.values.detach()
    # max |v| per column as the larger of -min and max: no (n, p) temporary
    scale = (torch.maximum(values.amax(dim=0), -values.amin(dim=0)) if job.n
             else values.new_zeros(job.p)).to(torch.float64)
    keep = lse or not job.normalize
    means = torch.empty(job.m, job.p, dtype=job.dtype, device=job.device)
    offset = (torch.empty(job.m, dtype=job.dtype, device=job.device) if keep
              else torch.zeros((), dtype=job.dtype, device=job.device).expand(job.m))
    unproven = _blocks(job, ready, scale, tolerance, lse, means, offset if keep else None)
    del ready  # the method's key side goes before the exact engines run
    rows = torch.cat(unproven) if unproven else torch.zeros(0, dtype=torch.int64)
    total = torch.ones((), dtype=job.dtype, device=job.device).expand(job.m)
    if rows.numel():
        sub = redo_rows(job, rows) if leave_out else query_rows(job, rows)
        engine, _ = choose(sub, "auto", describe=False)
        exact = engine.run(sub)
        weight = exact.total.to(job.dtype)
        has = weight > 0
        safe = torch.where(has, weight, torch.ones_like(weight))
        means[rows] = torch.where(has[:, None], exact.acc.to(job.dtype) / safe[:, None],
                                  torch.zeros_like(means[rows]))
        if keep:
            offset[rows] = (exact.offset + torch.log(exact.total)).to(job.dtype)
        if not bool(has.all()):
            total = torch.ones(job.m, dtype=job.dtype, device=job.device)
            total[rows[~has]] = 0.0
    return MeanState(offset, total, means, keeps_offset=keep), int(rows.numel())


def _blocks(job: Job, ready: PreparedSums, scale: torch.Tensor, tolerance: float, lse: bool,
            means: torch.Tensor, offset: torch.Tensor | None) -> list[torch.Tensor]:
    """Evaluate, check and divide the queries block by block, blocks side by side.

    Each block writes its rows of ``means`` (and ``offset``) and returns the indices
    of its queries the bounds do not prove.
    """
    leave_out = is_leave_one_out(job)
    zero = scale == 0
    zeros = job.p and bool(zero.any())
    step = block_rows(job)

    def block(start: int) -> torch.Tensor:
        rows = slice(start, min(start + step, job.m))
        sums = ready.evaluate(rows)
        if leave_out:
            sums = less_own_terms(job, sums, rows)
        bad = unproven_rows(sums, scale, tolerance, normalize=job.normalize, lse=lse)
        if zeros:
            # a column of zeros is smoothed exactly: its sums are zero whatever the method
            sums.acc[:, zero] = 0.0
        part = state_of(sums, job.dtype)
        means[rows] = part.acc
        if offset is not None:
            offset[rows] = part.offset
        return torch.nonzero(bad).flatten() + start

    return map_blocks(block, range(0, job.m, step), device=job.device)
