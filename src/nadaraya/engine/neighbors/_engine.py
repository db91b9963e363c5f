"""The neighbors engine: visit only the keys that can carry weight.

Each query's candidate keys come from one *source*, whichever promises the
fewest (query, key) pairs:

* a ball: every key within a radius of the query, found by a dual KD-tree
  walk (``scipy.spatial.cKDTree.sparse_distance_matrix``), in the space where
  a compact kernel is radial (radius: its support; for a product, the ball
  around its compact factors) or in the raw space of a
  :class:`~nadaraya.masks.Radius` mask;
* a sparse matrix mask: its stored entries, row by row;
* a table: a mask's own neighbour list (:class:`~nadaraya.masks.KNearest`,
  see :meth:`~nadaraya.masks.BoundMask.candidates`).

Scores come from the kernel's pair form, the rest of the mask hides pairs,
and each query reduces in the log domain (shift by its largest score) into a
:class:`~nadaraya.engine.SmoothState`, so the result is the dense engine's
up to rounding. Work and memory follow the number of candidate pairs: queries
go in chunks whose pairs fit the working-memory budget. Trees are built on the
CPU; scores and sums are computed on the inputs' device.

The pieces: :mod:`._sources` (which source, and its estimated pairs),
:mod:`._fold` (pairs into the state), :mod:`._runs` (one run per source).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .._job import Job
from .._state import SmoothState
from ._runs import _run_ball, _run_sparse, _run_table
from ._sources import _Ball, _plan, _Source, _Sparse, _Table

__all__ = ["MAX_PAIR_FRACTION", "NeighborsEngine"]

# Above this share of all m * n pairs, scanning every key (streamed engine) is
# faster than gathering candidates pair by pair. A tree walk costs more per
# pair as its dimension grows: a ball in ``e`` dimensions pays off below
# ``BALL_SHARE / e`` (measured: about 30 ns a pair streamed, against 90 ns in
# 2-D and 250 ns in 6-D through the tree).
MAX_PAIR_FRACTION = 0.25
BALL_SHARE = 0.6


def _max_share(plan: _Source) -> float:
    """Largest share of all pairs at which this source beats scanning every key."""
    if isinstance(plan, _Ball):
        return min(MAX_PAIR_FRACTION, BALL_SHARE / max(plan.qpts.shape[1], 1))
    return MAX_PAIR_FRACTION


_RUNNERS: dict[type, Callable[[Job, Any, SmoothState], None]] = {
    _Ball: _run_ball, _Sparse: _run_sparse, _Table: _run_table,
}


class NeighborsEngine:
    """Exact smoothing that visits only the keys that can carry weight.

    Runs when the kernel has compact support (Epanechnikov, tricube, uniform,
    or a product with such a factor) or the mask is sparse (k-nearest,
    radius, a sparse matrix, or an ``&`` with one of these), and the
    candidate pairs are few compared with ``m * n``. Cost and memory follow
    the number of candidate pairs; queries are processed in chunks within the
    working-memory budget. KD-trees are built on the CPU with scipy (inputs on
    another device are copied to the CPU for them); scores and sums are
    computed on the inputs' device. On the CPU the engine spreads chunks over
    its own threads (or walks the tree in one while another folds), with
    torch set to one thread for the duration of the call.
    """

    name = "neighbors"
    unnormalized = True

    def refuse(self, job: Job) -> str | None:
        if job.requires_grad:
            return ("inputs require grad, and the choice of neighbours has no gradient "
                    "(the dense engine differentiates)")
        probe = torch.zeros(1, dtype=torch.long, device=job.device)
        if job.kernel.pairs(probe, probe[:, None]) is None:
            return (f"the kernel {job.kernel.kernel!r} cannot score single (query, key) "
                    "pairs (it has no pair form)")
        plan = _plan(job)
        if plan is None:
            return ("the kernel has unbounded support and the mask is dense (no k-nearest, "
                    "radius or sparse mask), so every key can carry weight for every query")
        share, limit = plan.pairs / (job.m * job.n), _max_share(plan)
        if share > limit:
            return (f"about {share:.0%} of all query-key pairs are candidates (through "
                    f"{plan.what}); above {limit:.0%} scanning every key is faster than "
                    "a neighbour search")
        return None

    def cost(self, job: Job) -> float:
        if self.refuse(job) is not None:
            return math.inf
        plan = _plan(job)
        return plan.pairs * (job.p + job.kernel.q.shape[1] + 8)  # type: ignore[union-attr]

    def run(self, job: Job) -> SmoothState:
        why = self.refuse(job)
        if why is not None:
            from ..._errors import NadarayaError

            raise NadarayaError(f"engine 'neighbors' cannot run this problem: {why}.")
        plan = _plan(job)
        state = SmoothState.empty(job.m, job.p, dtype=job.dtype, device=job.device)
        _RUNNERS[type(plan)](job, plan, state)
        return state
