"""Bandwidth search: a coarse global scan of ``log h``, then bracketed local searches.

One bandwidth: a log grid around the rule-of-thumb start (and the upper
bound) finds the basins (:func:`._scan.grid_minima`); Brent's method
(golden section with parabolic steps) narrows the best two to ``xtol`` in
``log h``, and Newton steps polish the best. A bandwidth vector: the best
common scale of the start, then a Sobol scan around it
(:func:`._scan.scan_points`); from the best distinct points the features
are searched one at a time (a walk downhill in growing steps until the
criterion rises, then Brent's method), sweeping with pattern moves until a
sweep moves no bandwidth by more than the tolerance, and the best is
polished by Newton steps (:func:`._scan.newton_polish`). With
``common=True`` only one factor common to all features is searched. A
budget of evaluations (``max_evaluations``) ends a search that has not
settled at the best bandwidth evaluated. Every evaluation is recorded, so
the criterion curve can be plotted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._line import brent, minimize_log
from ._progress import report
from ._scan import grid_minima, newton_polish, scan_points

__all__ = ["SearchResult", "brent", "coordinate_search", "minimize_log"]


@dataclass
class SearchResult:
    """The chosen bandwidth and every evaluation of the criterion.

    Attributes
    ----------
    bandwidth : ndarray of shape (n_features,)
    score : float
    history : list of (ndarray of shape (n_features,), float, int)
        ``(bandwidth, score, feature searched)`` in order of evaluation; the
        feature is -1 for moves of several bandwidths at once.
    at_bound : list of int
        Features whose best bandwidth lies on the search bound.
    subsample : int
        How many entries of ``history`` (the first ones) were evaluated on a
        subsample of the rows; 0 when the search used all rows throughout.
    converged : bool
        False when the budget of evaluations ended the search before it settled.
    smoothed_out : list of int
        Features the search left at their upper bound, or constant (given ``inf``).
    """

    bandwidth: np.ndarray
    score: float
    history: list[tuple[np.ndarray, float, int]] = field(default_factory=list)
    at_bound: list[int] = field(default_factory=list)
    subsample: int = 0
    converged: bool = True
    smoothed_out: list[int] = field(default_factory=list)


class _Exhausted(Exception):
    """The budget of evaluations is spent."""


def _pattern_move(evaluate: Callable[[np.ndarray], float], before: np.ndarray,
                  after: np.ndarray, best: float, lo: np.ndarray, hi: np.ndarray,
                  tol: float) -> tuple[np.ndarray, float]:
    """Line search along the displacement of a sweep (it follows curved valleys)."""
    step = after - before
    moving = np.abs(step) > 0
    limits = np.where(step > 0, (hi - before) / np.where(moving, step, 1.0),
                      (lo - before) / np.where(moving, step, 1.0))
    amax = float(np.min(limits[moving]))
    if amax <= 1.0:
        return after, best

    def along(a: float) -> float:
        return evaluate(before + a * step)

    scale = float(np.max(np.abs(step)))
    a, value, _ = minimize_log(along, 1.0, 1.0, amax, step=1.0, xtol=tol / scale)
    if value < best:
        return before + a * step, value
    return after, best


def _sweeps(evaluate: Callable[[np.ndarray], float], t: np.ndarray, best: float,
            features: list[int], lower: np.ndarray, upper: np.ndarray, tol: float,
            xtol: float, max_sweeps: int, label: list[int], probe: bool, ftol: float = 1e-12,
            step: float = 0.5, trust: bool = False) -> tuple[np.ndarray, float, set[int]]:
    """Coordinate sweeps with pattern moves from ``t`` until they settle at ``xtol``.

    A sweep that moves no bandwidth by more than twice the tolerance, or that
    improves the criterion by less than ``ftol`` relative, ends the search.
    """
    steps = {f: step for f in features}
    for sweep in range(max_sweeps if len(features) > 1 else 1):
        moved, start, before = 0.0, best, t.copy()
        for f in features:
            label[0] = f

            def along(s: float, f: int = f, base: np.ndarray = t) -> float:
                tt = base.copy()
                tt[f] = s
                return evaluate(tt)

            lo, hi = math.log(lower[f]), math.log(upper[f])
            new, value, bound = minimize_log(along, t[f], lo, hi, step=steps[f], xtol=tol,
                                             trust=trust)
            if probe and sweep == 0 and not bound and len(features) > 1:
                # the feature smoothed out is a basin the walk from t may not reach
                far = along(hi)
                if far < value:
                    new, value, bound = hi, far, True
            if value < best or not math.isfinite(best):
                delta = abs(new - t[f])
                t[f] = new
                best = value
                moved = max(moved, delta)
                steps[f] = min(0.5, max(2.0 * delta, 10.0 * xtol))
        if len(features) > 1 and moved > 0:
            label[0] = -1
            swept = t.copy()
            t, best = _pattern_move(evaluate, before, t, best, np.log(lower), np.log(upper),
                                    tol)
            # a long pattern move lands where the sweeps have not been: not settled
            moved = max(moved, float(np.max(np.abs(t - swept))))
        settled = moved <= 2.0 * tol or not start - best > ftol * abs(best)
        if settled and tol <= xtol:
            break
        tol = max(xtol, min(tol, 0.1 * moved)) if not settled else xtol
    return t, best, set(_at_bound(t, features, lower, upper))


def _at_bound(t: np.ndarray, features: list[int], lower: np.ndarray, upper: np.ndarray
              ) -> list[int]:
    return sorted(f for f in features
                  if t[f] <= math.log(lower[f]) + 1e-12 or t[f] >= math.log(upper[f]) - 1e-12)


def coordinate_search(objective: Callable[[np.ndarray], float], h0: np.ndarray,
                      lower: np.ndarray, upper: np.ndarray, active: np.ndarray, *,
                      xtol: float = 1e-4, max_sweeps: int = 30, n_starts: int = 1,
                      refine: bool = False, step: float = 0.5, common: bool = False,
                      max_evaluations: int | None = None) -> SearchResult:
    """Minimise ``objective(h)`` over per-feature bandwidths, globally then locally.

    One feature: the walk downhill from ``h0`` (bracket, then Brent's
    method), and a grid of step 0.5 in ``log h`` over a factor of 20 on each
    side of ``h0`` and the upper bound, with Brent's method in the brackets
    of the best ``max(n_starts, 2)`` grid minima; Newton steps from the best.
    Several features: the first start is the best common scale of ``h0`` (a
    1-D search on one factor for all features); the others are the best
    points of a scrambled Sobol scan of ``log h`` around it (8 points per
    feature; the top eighth of each coordinate's range stands for its upper
    bound, so features smoothed out are scanned too), at least 0.5 apart in
    ``log h``: ``max(n_starts, 2)`` starts in all. Each start is swept
    coarsely (at most three sweeps at a tolerance of 1e-2 on ``log h``,
    fewer when a sweep gains less than 1e-4 of the criterion); the best is
    then swept to ``xtol`` and polished by Newton steps on finite
    differences. A sweep searches each feature in turn (and, in the first
    sweep, tries the feature smoothed out, at its upper bound), then
    searches along the sweep's displacement (a pattern move), which follows
    curved valleys that coordinate steps alone cross slowly.

    Parameters
    ----------
    objective : callable
        ``h (n_features,) -> float``; ``inf`` marks an inadmissible bandwidth.
    h0, lower, upper : ndarray of shape (n_features,)
        Start and bounds (positive).
    active : ndarray of bool, shape (n_features,)
        Features to search; the others keep ``h0``.
    xtol : float
        Tolerance on ``log h``.
    max_sweeps : int
        Largest number of sweeps over the features.
    n_starts : int
        Number of local searches from the scan's best points (at least 2).
    refine : bool
        ``h0`` is already close (from a subsample): sweep from it directly to
        ``xtol``, with no common-scale search and no other starts, and trust
        parabolic steps (see :func:`brent`).
    step : float
        First step of each line search, in ``log h``.
    common : bool
        Search only one factor common to all features (``h = a h0``), to ``xtol``:
        for more features than the data can fix one bandwidth each.
    max_evaluations : int or None
        Budget of evaluations: when it is spent, the search ends at the best
        bandwidth evaluated, with ``converged=False``.
    """
    t0 = np.log(h0.astype(float))
    history: list[tuple[np.ndarray, float, int]] = []
    cache: dict[tuple[float, ...], float] = {}
    label = [-1]
    best_seen: list[tuple[float, np.ndarray]] = []

    def evaluate(tvec: np.ndarray) -> float:
        key = tuple(np.round(tvec, 12))
        if key not in cache:
            if max_evaluations is not None and len(history) >= max_evaluations:
                raise _Exhausted
            h = np.exp(tvec)
            value = float(objective(h))
            cache[key] = value
            history.append((h, value, label[0]))
            if not best_seen or value < best_seen[0][0]:
                best_seen[:] = [(value, tvec.copy())]
            report(history)
        return cache[key]

    features = [int(i) for i in np.flatnonzero(active)]
    if not features:
        return SearchResult(np.exp(t0), math.nan, history, [])
    try:
        t, best, at_bound = _phases(evaluate, t0, features, lower, upper, label, xtol=xtol,
                                    max_sweeps=max_sweeps, n_starts=n_starts, refine=refine,
                                    step=step, common=common)
    except _Exhausted:
        if not best_seen:
            return SearchResult(np.exp(t0), math.nan, history, [], converged=False)
        best, t = best_seen[0]
        return SearchResult(np.exp(t), best, history, _at_bound(t, features, lower, upper),
                            converged=False)
    return SearchResult(np.exp(t), best, history, at_bound)


def _phases(evaluate: Callable[[np.ndarray], float], t0: np.ndarray, features: list[int],
            lower: np.ndarray, upper: np.ndarray, label: list[int], *, xtol: float,
            max_sweeps: int, n_starts: int, refine: bool, step: float, common: bool
            ) -> tuple[np.ndarray, float, list[int]]:
    """The phases of :func:`coordinate_search`: ``(log h, value, features at a bound)``."""
    best = evaluate(t0)
    log_lo, log_hi = np.log(lower), np.log(upper)
    if refine and not common:
        t, best, at_bound = _sweeps(evaluate, t0.copy(), best, features, lower, upper, xtol,
                                    xtol, max_sweeps, label, False, step=step, trust=True)
        return t, best, sorted(at_bound)
    if len(features) == 1:
        return _one(evaluate, t0, best, features[0], log_lo, log_hi, label, xtol, n_starts)
    coarse = xtol if common else max(xtol, 1e-2)
    on = np.zeros_like(t0)
    on[features] = 1.0
    lo_a = float(np.max(log_lo[features] - t0[features]))
    hi_a = float(np.min(log_hi[features] - t0[features]))
    a, value, _ = minimize_log(lambda a: evaluate(t0 + a * on), 0.0, lo_a, hi_a, step=0.5,
                               xtol=coarse)
    if common:
        t = t0 + a * on if value < best else t0.copy()
        return t, min(value, best), _at_bound(t, features, lower, upper)
    # the scan around the best common scale; the best distinct points start local searches
    centre = t0 + a * on if value < best else t0.copy()
    starts = [(centre, min(value, best))]
    label[0] = -1
    scanned = [(p, evaluate(p)) for p in scan_points(centre, features, log_lo, log_hi)]
    for p, v in sorted(scanned, key=lambda r: r[1]):
        if len(starts) >= max(n_starts, 2):
            break
        if math.isfinite(v) and all(np.max(np.abs(p - q)) > 0.5 for q, _ in starts):
            starts.append((p, v))
    runs = [_sweeps(evaluate, t.copy(), b, features, lower, upper, coarse, coarse, 3,
                    label, True, ftol=1e-4) for t, b in starts]
    t, best, _ = min(runs, key=lambda r: r[1])
    t, best, _ = _sweeps(evaluate, t.copy(), best, features, lower, upper, coarse, xtol,
                         max_sweeps, label, False)
    label[0] = -1
    t, best = newton_polish(evaluate, t, best, features, log_lo, log_hi)
    return t, best, _at_bound(t, features, lower, upper)


def _one(evaluate: Callable[[np.ndarray], float], t0: np.ndarray, best: float, f: int,
         log_lo: np.ndarray, log_hi: np.ndarray, label: list[int], xtol: float, keep: int
         ) -> tuple[np.ndarray, float, list[int]]:
    """One bandwidth: the walk from the start, and Brent's method in a log grid's best brackets."""
    label[0] = f

    def along(s: float) -> float:
        tt = t0.copy()
        tt[f] = s
        return evaluate(tt)

    lo, hi = float(log_lo[f]), float(log_hi[f])
    # the walk downhill from the start, which may leave the scanned range
    found = [(t0[f], best, False), minimize_log(along, float(t0[f]), lo, hi, xtol=xtol)]
    for a, fa, x, fx, b, fb in grid_minima(along, float(t0[f]), lo, hi, keep=max(keep, 2)):
        if a < x < b:
            found.append((*brent(along, a, b, x, fx, xtol, flo=fa, fhi=fb), False))
        elif x in (lo, hi):
            found.append((x, fx, True))
        else:  # an end of the grid inside the bounds: the criterion may fall beyond it
            found.append(minimize_log(along, x, lo, hi, xtol=xtol))
    x, value, _ = min(found, key=lambda r: r[1])
    t = t0.copy()
    t[f] = x
    t, value = newton_polish(evaluate, t, value, [f], log_lo, log_hi)
    return t, value, [f] if t[f] <= lo + 1e-12 or t[f] >= hi - 1e-12 else []
