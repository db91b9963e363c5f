"""Leave-one-out through a certified method: the full sums less each point's own term.

A leave-one-out job (queries are the keys, mask :class:`~nadaraya.masks.LeaveOneOut`)
runs the method without the mask and subtracts, for query ``i``, its own key's
weight ``K(x_i, x_i)`` and weighted value. The subtraction adds its own
rounding to the bounds (a few ulps of the sums it takes apart); a point whose
own weight is nearly all of its sum loses the digits of the others' and fails
the check, and is recomputed exactly, with the key it leaves out hidden by
``LeaveOneOut(rows=...)``.
"""

from __future__ import annotations

import torch

from ...kernels import BoundKernel
from ...masks import LeaveOneOut, Problem
from .._job import Job
from ._sums import Sums

__all__ = ["is_leave_one_out", "less_own_terms", "redo_rows", "unmasked"]

_ULP = 2.0**-52


def is_leave_one_out(job: Job) -> bool:
    """Whether ``job`` hides key ``i`` from query ``i`` and nothing else, queries being the keys."""
    mask = job.mask
    return (mask is not None and type(mask.mask) is LeaveOneOut and mask.mask.rows is None
            and job.m == job.n and torch.equal(job.queries, job.keys))


def unmasked(job: Job) -> Job:
    """The job with every key visible (what a method computes before the subtraction)."""
    return Job(job.kernel, None, job.values, job.queries, job.keys, job.normalize, job.exponents)


def less_own_terms(job: Job, sums: Sums, rows: slice | None = None) -> Sums:
    """``sums`` over all keys minus each query's own key, bounds widened for the rounding.

    ``sums`` are those of the queries ``rows`` (default: all of them).
    """
    start, stop, _ = (rows or slice(0, job.m)).indices(job.m)
    idx = torch.arange(start, stop, device=job.device)
    own = torch.exp(job.kernel.pairs(idx, idx[:, None])[:, 0].detach().to(torch.float64))
    v = job.values[start:stop].detach().to(torch.float64)
    total = sums.total - own
    acc = sums.acc - own[:, None] * v
    total_err = sums.total_err + 2 * _ULP * (sums.total.abs() + own)
    acc_err = sums.acc_err + 2 * _ULP * (sums.acc.abs() + own[:, None] * v.abs())
    return Sums(total, acc, total_err, acc_err)


def redo_rows(job: Job, rows: torch.Tensor) -> Job:
    """The leave-one-out job for the queries ``rows`` only, each still hiding its own key."""
    kernel = BoundKernel(job.kernel.kernel, job.kernel.q[rows], job.kernel.k)
    queries = job.queries[rows]
    mask = LeaveOneOut(rows=rows).bind(Problem(rows.numel(), job.n, queries, job.keys))
    return Job(kernel, mask, job.values, queries, job.keys, job.normalize, job.exponents)
