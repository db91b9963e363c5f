"""Choosing the box side, the expansion order and the reach from the tolerance.

Each sum's bound is aimed at ``tolerance / 8`` of the total for a query amid
keys of uniform density (so the output bound ``(acc_err + |out| total_err) /
total`` is about ``tolerance / 4``): half for the expansion (``E`` times the
decay-weighted mass ``W``, :meth:`._basis.Basis.bulk_ratio` totals there) and
half for the cut-off. Among the box sides of :data:`SIDES` and the two
expansions, the planner takes the plan whose modelled time (moments,
translation passes, evaluation, or direct sums) is least, from a survey of
the points counted in boxes of side 1; an expansion whose buffers for one
pass would pass ``MEMORY_SHARE * working_memory`` is not considered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..._config import get_config
from . import _native
from ._basis import BASES, Basis
from ._boxes import bin_points, grid_of, linear_keys

__all__ = ["FIXED_SECONDS", "LOOKUP_NS", "MAX_ORDER", "MEMORY_SHARE", "SIDES", "VISIT_NS",
           "Params", "Survey", "ball_offsets", "choose", "evaluate_ns", "moment_ns", "pair_ns",
           "pass_ns", "survey"]

# Box sides tried (bandwidths): two significant bits, so box centres are exact.
SIDES = (0.25, 0.375, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
MAX_ORDER = 40
# Share of the tolerance each sum's bound aims at, and its split.
SHARE = 1.0 / 8
# The boxes' expansions of one pass may take this many times working_memory: they are
# O(n) (a few times the points), not O(n m) like the blocks the budget is for.
MEMORY_SHARE = 4.0
# The time model (nanoseconds on one thread, measured with fgt.c on x86-64 with AVX2 and
# AVX-512): a point's moments or evaluation, a box's translation passes, a direct pair,
# a target's visit of a source box, a box lookup.
VISIT_NS, LOOKUP_NS = 10.0, 30.0
# Seconds of bookkeeping every run pays (binning, box sets, calls into fgt.c).
FIXED_SECONDS = 5e-3


def moment_ns(order: int, d: int, ch: int) -> float:
    """One key's share of its box's moments."""
    return 0.2 * order**d * ch + 1.0 * d * order + 40.0


def evaluate_ns(order: int, d: int, ch: int) -> float:
    """One query's evaluation of its box's expansion."""
    return 0.09 * order**d * ch + 1.5 * d * order + 10.0


def pass_ns(order: int, d: int, reach: int, ch: int) -> float:
    """The ``d`` translation passes of one box."""
    return 0.11 * d * (2 * reach + 1) * order ** (d + 1) * ch


def pair_ns(d: int, nv: int) -> float:
    """One direct (query, key) pair."""
    return (1.5 + 0.5 * d) * (1 + 0.5 * nv)


@dataclass(frozen=True)
class Params:
    """One plan.

    Attributes
    ----------
    side : float
        Box side (bandwidths).
    basis : str
        ``"hermite"`` or ``"chebyshev"`` (see :mod:`._basis`).
    order : int
        Expansion order ``p`` per coordinate; 0 when every sum is direct.
    reach : int
        ``K``: expansions cover offsets ``|o_i| <= K``; direct sums boxes within ``K side``.
    factor : float
        ``E``: the expansion bound per unit of decay-weighted mass.
    seconds : float
        Modelled time (one thread).
    """

    side: float
    basis: str
    order: int
    reach: int
    factor: float
    seconds: float

    @property
    def radius(self) -> float:
        """The cut-off distance ``K side`` (bandwidths)."""
        return self.reach * self.side


@dataclass
class Survey:
    """Keys and queries counted in boxes of side 1.

    Attributes
    ----------
    key_boxes, query_boxes : int
        Occupied boxes.
    density : float
        Keys in a query's box, averaged over the queries (keys per unit volume
        about a query, at least 1).
    most : int
        The most keys in one box.
    d : int
        Coordinates.
    """

    key_boxes: int
    query_boxes: int
    density: float
    most: int
    d: int


def survey(queries: torch.Tensor, keys: torch.Tensor) -> Survey:
    """Count both point sets in boxes of side 1 (a histogram where the grid is small)."""
    n, m, d = keys.shape[0], queries.shape[0], keys.shape[1]
    ends = np.concatenate([np.stack(_native.value_range(keys)),
                           np.stack(_native.value_range(queries))])
    lo, span = grid_of(torch.from_numpy(ends), 1.0)
    total = math.prod(span.tolist())
    if total <= 4 * (n + m) + 4096:
        hk = _native.histogram(_native.box_keys(keys, 1.0, lo, span), total)
        hq = _native.histogram(_native.box_keys(queries, 1.0, lo, span), total)
        density = float((hk * hq).sum()) / m
        return Survey(int(torch.count_nonzero(hk)), int(torch.count_nonzero(hq)),
                      max(density, 1.0), int(hk.max()), d)
    kb, qb = bin_points(keys, 1.0), bin_points(queries, 1.0)
    kc, qc = kb.count.numpy().astype(float), qb.count.numpy().astype(float)
    both = linear_keys(np.concatenate([kb.coords.numpy(), qb.coords.numpy()]))
    if both is None:  # too far apart to match boxes: the keys' own density
        density = float((kc**2).sum()) / n
    else:
        kk, qk = both.numpy()[: kb.n_boxes], both.numpy()[kb.n_boxes:]
        at = np.minimum(np.searchsorted(kk, qk), kb.n_boxes - 1)
        density = float((np.where(kk[at] == qk, kc[at], 0.0) * qc).sum()) / m
    return Survey(kb.n_boxes, qb.n_boxes, max(density, 1.0), int(kc.max()), d)


def ball_offsets(reach: int, d: int) -> torch.Tensor:
    """Box offsets ``(k, d)`` whose boxes lie within ``reach`` boxes of the centre box."""
    r = torch.arange(-reach - 1, reach + 2, dtype=torch.int64)
    grid = torch.cartesian_prod(*([r] * d)).reshape(-1, d)
    gap = (grid.abs() - 1).clamp(min=0)
    return grid[(gap**2).sum(dim=1) <= reach**2].contiguous()


@lru_cache(maxsize=256)
def _ball_count(reach: int, d: int) -> float:
    """Number of :func:`ball_offsets` (estimated above a few thousand)."""
    if (2 * reach + 3) ** d <= 20_000:
        return float(ball_offsets(reach, d).shape[0])
    return math.pi ** (d / 2) / math.gamma(d / 2 + 1) * (reach + 1.5) ** d


def _reach(side: float, d: int, target: float) -> int:
    """Smallest ``K`` whose cut-off, for keys of uniform density, is ``target`` of a total.

    The uncovered mass near a query is at most that of the ``3^d`` coarse blocks of
    ``2K`` boxes, ``(6 K side)^d`` volumes, against a total of ``(2 pi)^(d/2)``.
    """
    k = 1
    while (6 * k * side) ** d / (2 * math.pi) ** (d / 2) * math.exp(-(k * side) ** 2 / 2) > target:
        k += 1
    return k


def _order(basis: Basis, side: float, reach: int, d: int, most: int,
           target: float) -> tuple[int, float]:
    """Smallest order ``p`` whose bulk bound is ``target``; ``(0, inf)`` if none."""
    ratio = basis.bulk_ratio(side, reach, d)
    for p in range(max(2, basis.order_floor(side, d, target / ratio)), MAX_ORDER + 1):
        e = basis.factor(side, p, d, reach, most)
        if e * ratio <= target:
            return p, e
        if p > 4 and e > basis.factor(side, p - 2, d, reach, most):
            break  # rounding has overtaken truncation: higher orders only lose
    return 0, math.inf


def choose(sv: Survey, n: int, m: int, nv: int, tolerance: float) -> Params:
    """The cheapest plan for ``n`` keys, ``m`` queries and ``nv`` value columns."""
    d, ch = sv.d, nv + 1
    target = tolerance * SHARE / 2
    memory = MEMORY_SHARE * get_config().working_memory * 2**20
    best: Params | None = None
    for side in SIDES:
        reach = _reach(side, d, target)
        boxes_k = min(max(sv.key_boxes / side**d, 1.0), n)
        boxes_q = min(max(sv.query_boxes / side**d, 1.0), m)
        offsets = _ball_count(reach, d)
        pairs = m * min(n, sv.density * side**d * offsets)
        visits = m * min(offsets, boxes_k)
        direct = FIXED_SECONDS + (pairs * pair_ns(d, nv) + visits * VISIT_NS
                                  + boxes_q * offsets * LOOKUP_NS) * 1e-9
        plans = [Params(side, "hermite", 0, reach, 0.0, direct)]
        grid = max(boxes_k, boxes_q)
        passes = grid + 2 * reach * (d - 1) * grid ** ((d - 1) / d)
        for basis in BASES:
            most = int(sv.most * max(side, 1.0) ** d)
            order, factor = _order(basis, side, reach, d, most, target)
            if not order or 8.0 * passes * order**d * ch > memory:
                continue
            expanded = FIXED_SECONDS + (n * moment_ns(order, d, ch) + m * evaluate_ns(order, d, ch)
                                        + passes * pass_ns(order, d, reach, ch)) * 1e-9
            plans.append(Params(side, basis.name, order, reach, factor, expanded))
        for plan in plans:
            if best is None or plan.seconds < best.seconds:
                best = plan
    assert best is not None
    return best
