"""The global part of the bandwidth search: a coarse scan of ``log h``, and a Newton polish.

A criterion such as leave-one-out cross-validation may have several local
minima in the bandwidths (a smooth trend in one feature and a fast wave in
another; a feature that helps only when another is smoothed out), so a walk
from one start can stop in the wrong basin. Before any local search the
bandwidths are scanned coarsely:

* one bandwidth: a grid of :data:`GRID_STEP` in ``log h`` over
  :data:`SPAN` on each side of the start, plus the upper bound (where the
  feature is smoothed out); the best local minima of the grid are refined;
* several: a scrambled Sobol sequence over the same box, where the top
  :data:`OUT` of each coordinate's range stands for the upper bound (so
  combinations of features smoothed out are scanned too); the best points
  start the local searches.

At the end, the local search's result is polished by Newton steps on
finite differences in ``log h`` (bandwidths off their bounds): coordinate
sweeps settle slowly in valleys that are not aligned with the axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["grid_minima", "newton_polish", "scan_points"]

#: Half-width of the scanned box around the start, in ``log h`` (a factor of e^3 = 20).
SPAN = 3.0
#: Step of the 1-D grid in ``log h``.
GRID_STEP = 0.5
#: Fraction of each coordinate of the Sobol scan mapped to the upper bound (smoothed out).
OUT = 0.125
#: Sobol points per searched feature (rounded up to a power of two).
PER_FEATURE = 8


def scan_points(t0: np.ndarray, features: list[int], log_lo: np.ndarray,
                log_hi: np.ndarray) -> np.ndarray:
    """Points of the scan in ``log h``, shape ``(n_points, n_features)``.

    Only the coordinates ``features`` vary; each stays within
    ``[log_lo, log_hi]``, inside ``t0 +/- SPAN`` or on ``log_hi``.

    Examples
    --------
    >>> import numpy as np
    >>> scan_points(np.zeros(2), [0, 1], np.full(2, -9.0), np.full(2, 9.0)).shape
    (16, 2)
    """
    from scipy.stats import qmc

    k = len(features)
    m = max(3, math.ceil(math.log2(PER_FEATURE * k)))
    u = qmc.Sobol(k, scramble=True, seed=0).random_base2(m)
    f = np.asarray(features)
    lo = np.maximum(log_lo[f], t0[f] - SPAN)
    hi = np.minimum(log_hi[f], t0[f] + SPAN)
    inside = lo + (u / (1.0 - OUT)) * (hi - lo)
    pts = np.repeat(t0[None, :], u.shape[0], axis=0)
    pts[:, f] = np.where(u >= 1.0 - OUT, log_hi[f], np.minimum(inside, hi))
    return pts


def grid_minima(f: Callable[[float], float], t0: float, lo: float, hi: float, *,
                keep: int = 2) -> list[tuple[float, float, float, float, float, float]]:
    """Scan ``f`` on a log grid around ``t0`` (and at ``hi``); the best local minima.

    Returns up to ``keep`` brackets ``(a, fa, x, fx, b, fb)``, best ``fx`` first,
    with ``a <= x <= b`` neighbours on the grid (``a == x`` or ``x == b`` at an
    end of the grid, where the criterion may keep falling beyond it).

    Examples
    --------
    >>> best = grid_minima(lambda t: min((t - 0.5) ** 2 + 0.1, (t - 2.5) ** 2), 0.5, -9, 9)
    >>> [round(r[2], 2) for r in best]
    [2.5, 0.5]
    """
    grid = np.arange(-SPAN, SPAN + GRID_STEP / 2, GRID_STEP) + t0
    pts = sorted({float(t) for t in np.clip(grid, lo, hi)} | {hi})
    values = [f(t) for t in pts]
    found = []
    for i, v in enumerate(values):
        left = values[i - 1] if i > 0 else math.inf
        right = values[i + 1] if i + 1 < len(values) else math.inf
        if math.isfinite(v) and v <= left and v <= right:
            a, fa = (pts[i - 1], left) if i > 0 else (pts[i], v)
            b, fb = (pts[i + 1], right) if i + 1 < len(pts) else (pts[i], v)
            found.append((a, fa, pts[i], v, b, fb))
    found.sort(key=lambda r: r[3])
    return found[:keep]


def newton_polish(evaluate: Callable[[np.ndarray], float], t: np.ndarray, best: float,
                  features: list[int], log_lo: np.ndarray, log_hi: np.ndarray, *,
                  step: float = 1e-2, iterations: int = 3, xtol: float = 1e-7
                  ) -> tuple[np.ndarray, float]:
    """Newton steps on ``log h`` from ``t``, accepted only where they do not raise the criterion.

    The gradient by central differences of ``step`` and ``2 step`` combined
    (Richardson: exact to fourth order, so the step can be wide, and the
    rounding of the criterion moves the result little), the Hessian by
    differences of ``step`` (``4k + k(k - 1) / 2`` evaluations for ``k`` free
    features: those more than ``2 step`` inside their bounds); a Hessian that
    is not positive definite, or a step that raises the criterion after
    three halvings, ends the polish.

    Examples
    --------
    >>> import numpy as np
    >>> f = lambda t: float((t[0] - 0.1) ** 2 + (t[0] - t[1]) ** 2)
    >>> t, value = newton_polish(f, np.zeros(2), f(np.zeros(2)), [0, 1], -np.ones(2), np.ones(2))
    >>> np.round(t, 6).tolist()
    [0.1, 0.1]
    """
    free = [f for f in features if log_lo[f] + 2 * step < t[f] < log_hi[f] - 2 * step]
    if not free or not math.isfinite(best):
        return t, best
    k = len(free)
    for _ in range(iterations):
        unit = np.eye(t.size)[free] * step
        plus = np.array([evaluate(t + e) for e in unit])
        minus = np.array([evaluate(t - e) for e in unit])
        wide = np.array([evaluate(t + 2 * e) - evaluate(t - 2 * e) for e in unit])
        if not (np.isfinite(plus).all() and np.isfinite(minus).all()
                and np.isfinite(wide).all()):
            break
        grad = (8 * (plus - minus) - wide) / (12 * step)
        H = np.diag((plus - 2 * best + minus) / step**2)
        for i in range(k):
            for j in range(i + 1, k):
                both = evaluate(t + unit[i] + unit[j])
                H[i, j] = H[j, i] = (both - plus[i] - plus[j] + best) / step**2
        try:
            np.linalg.cholesky(H)
        except np.linalg.LinAlgError:
            break
        move = -np.linalg.solve(H, grad)
        move *= min(1.0, 0.5 / max(float(np.max(np.abs(move))), 1e-300))
        improved = False
        for _ in range(4):
            trial = t.copy()
            trial[free] = np.clip(t[free] + move, log_lo[free], log_hi[free])
            value = evaluate(trial)
            # a tie at the criterion's resolution: the model's minimum is the better guess
            if value <= best:
                t, best, improved = trial, value, True
                break
            move /= 2.0
        if not improved or np.max(np.abs(move)) < xtol:
            break
    return t, best
