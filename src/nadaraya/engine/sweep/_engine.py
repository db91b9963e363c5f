"""The sweep engine: exact O(n + m) sums in one dimension, after sorting.

It takes jobs whose kernel is one of the Laplacian, Matern 3/2, Matern 5/2
(:mod:`._exp`), Epanechnikov, tricube or uniform (:mod:`._window`) alone, on
one prepared feature, with no mask and no gradient, on the CPU, with the
compiled loops available; and problems large enough that an O(n m) engine
would take longer than sorting (see :func:`worth_it`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...kernels import Epanechnikov, Laplacian, Matern32, Matern52, Tricube, Uniform
from .._job import Job
from .._state import MeanState
from .._threads import map_blocks
from . import _order
from ._exp import ExpKernel, ExpSweep
from ._native import unavailable
from ._order import Groups, is_wide
from ._window import to_means, window_sums

__all__ = ["SweepEngine", "worth_it"]

_EXP = {
    Laplacian: ExpKernel((1.0,), 1.0),
    Matern32: ExpKernel((1.0, 1.0), math.sqrt(3.0)),
    Matern52: ExpKernel((1.0, 1.0, 1.0 / 3.0), math.sqrt(5.0)),
}
_WINDOW = {Uniform: "uniform", Epanechnikov: "epanechnikov", Tricube: "tricube"}

# The fastest O(n m) engine (the compiled one) spends about a nanosecond per (query, key)
# pair; a sweep, about PAIRS_PER_POINT times that per point (sorting included) and MIN_PAIRS
# pairs' worth more fixed cost (calls, conversions). Measured on 2 shared cores: even at
# n = m = 1000, the sweep 3 to 7 times faster at n = m = 3000.
PAIRS_PER_POINT = 300.0
MIN_PAIRS = 3e5
# Below this many points the blocks run in turn: threads cost more than they save.
_SERIAL_POINTS = 2**16

def worth_it(m: int, n: int) -> bool:
    """Whether sweeping beats summing every pair: ``m n > PAIRS_PER_POINT (m + n) + MIN_PAIRS``.

    Parameters
    ----------
    m : int
        Number of queries.
    n : int
        Number of keys.
    """
    return m * n > PAIRS_PER_POINT * (m + n) + MIN_PAIRS


class SweepEngine:
    """Exact sums of 1-D kernels by sweeps over sorted keys (Hofmeyr's recursions, window sums).

    The result is the dense engine's up to rounding, with a bound stated in
    :mod:`._exp` and :mod:`._window`; it works in float64 whatever the job's
    dtype and returns the state in the job's dtype. Keys and queries are read
    through their sorted orders and every result is written to its query's
    row, so the memory beyond the job is the state itself, two orders (4 bytes
    a point) and scratch of a block per thread. The state is a
    :class:`~nadaraya.engine._state.MeanState` that keeps its log-sums:
    ``offset`` is ``log sum_k K``, ``total`` 1 (0 where a compact kernel's
    window is empty) and ``acc`` the means, which
    :func:`~nadaraya.engine.unnormalized.finish` turns into the output in place;
    it merges as any state.
    """

    name = "sweep"
    unnormalized = True  # the state is exact in the log domain: acc * exp(offset) is the sum

    def refuse(self, job: Job) -> str | None:
        kernel = job.kernel.kernel
        if type(kernel) not in _EXP and type(kernel) not in _WINDOW:
            return (f"the kernel {kernel!r} is not one it sums exactly (the Laplacian, Matern32, "
                    "Matern52, Epanechnikov, tricube or uniform kernel, on its own)")
        features = job.kernel.q.shape[1]
        if features != 1:
            return (f"the kernel sees {features} features; sweeps over sorted points need "
                    "exactly one")
        if job.mask is not None:
            return "a mask hides keys query by query; the sweeps sum every key"
        if job.requires_grad:
            return "inputs require grad, and the sweeps record no gradient"
        if job.device.type != "cpu":
            return f"it runs on the CPU only, not on {job.device.type}"
        why = unavailable()
        if why is not None:
            return why
        if not worth_it(job.m, job.n):
            return (f"{job.m} queries x {job.n} keys is small: summing every pair is as fast "
                    "as sorting")
        return None

    def cost(self, job: Job) -> float:
        sizes = job.m + job.n
        return PAIRS_PER_POINT * sizes * (job.p + 2) + MIN_PAIRS

    def run(self, job: Job) -> MeanState:
        def each(fn: Callable[[Any], Any], blocks: list[Any]) -> list[Any]:
            """``[fn(b) for b in blocks]``, in threads for large problems."""
            if job.n + job.m < _SERIAL_POINTS:
                return [fn(b) for b in blocks]
            return map_blocks(fn, blocks, device=job.device)

        keys, queries = _positions(job.kernel.k), _positions(job.kernel.q)
        wide = is_wide(job.n, job.m)
        values = np.ascontiguousarray(job.values.detach().to(torch.float64).numpy())
        threads = max(1, torch.get_num_threads())
        kernel = job.kernel.kernel
        # the results go straight to each query's row, a group of keys or queries at a time
        lse, mean = np.zeros(job.m), np.zeros((job.m, job.p))
        if type(kernel) in _EXP:
            key_groups = Groups(keys, wide, _order.GROUP)
            sweep = ExpSweep(_EXP[type(kernel)], keys, key_groups, values, each, threads)
            sweep.evaluate(queries, lse, mean)
            del sweep
            empty = 0  # every query has weight: its nearest key's, at least
        else:
            query_groups = Groups(queries, wide, _order.GROUP)
            window_sums(_WINDOW[type(kernel)], keys, values, queries, query_groups,
                        job.dtype == torch.float32, each, threads, lse, mean)
            empty = to_means(lse, mean)  # the sums become log-sums and means, in place
        offset = torch.from_numpy(lse).to(job.dtype)
        total = (torch.isfinite(offset).to(job.dtype) if empty
                 else torch.ones((), dtype=job.dtype).expand(job.m))
        return MeanState(offset, total, torch.from_numpy(mean).to(job.dtype), keeps_offset=True)


def _positions(points: torch.Tensor) -> np.ndarray:
    """The one prepared coordinate as contiguous float64 (exact for float32 points)."""
    return np.ascontiguousarray(points.detach()[:, 0].to(torch.float64).numpy())
