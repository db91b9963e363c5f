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
from .._state import SmoothState
from .._threads import map_blocks
from ._exp import ExpKernel, exp_sums
from ._native import unavailable
from ._order import sort_points
from ._window import window_sums

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
    """Whether sweeping beats summing every pair: ``m n > PAIRS_PER_POINT (m + n) + MIN_PAIRS``."""
    return m * n > PAIRS_PER_POINT * (m + n) + MIN_PAIRS


class SweepEngine:
    """Exact sums of 1-D kernels by sweeps over sorted keys (Hofmeyr's recursions, window sums).

    The result is the dense engine's up to rounding, with a bound stated in
    :mod:`._exp` and :mod:`._window`; it works in float64 whatever the job's
    dtype and returns the state in the job's dtype.
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

    def run(self, job: Job) -> SmoothState:
        def each(fn: Callable[[Any], Any], blocks: list[Any]) -> list[Any]:
            """``[fn(b) for b in blocks]``, in threads for large problems."""
            if job.n + job.m < _SERIAL_POINTS:
                return [fn(b) for b in blocks]
            return map_blocks(fn, blocks, device=job.device)

        if job.m == job.n and torch.equal(job.kernel.q, job.kernel.k):
            keys = queries = sort_points(_positions(job.kernel.k))  # smoothing the keys
        else:  # keys and queries sorted side by side
            keys, queries = each(sort_points, [_positions(job.kernel.k),
                                               _positions(job.kernel.q)])
        values = keys.take(job.values.detach().to(torch.float64).numpy())
        threads = max(1, torch.get_num_threads())
        kernel = job.kernel.kernel
        if type(kernel) in _EXP:
            offset, total, acc = exp_sums(_EXP[type(kernel)], keys.points, values,
                                          queries.points, each, threads)
        else:
            total, acc, _ = window_sums(_WINDOW[type(kernel)], keys.points, values,
                                        queries.points, job.dtype == torch.float32, each,
                                        threads)
            offset = np.where(total > 0, 0.0, -np.inf)
        state = (queries.restore(offset), queries.restore(total), queries.restore(acc))
        return SmoothState(*(torch.from_numpy(x).to(job.dtype) for x in state))


def _positions(points: torch.Tensor) -> np.ndarray:
    """The one prepared coordinate as contiguous float64 (exact for float32 points)."""
    return np.ascontiguousarray(points.detach()[:, 0].to(torch.float64).numpy())
