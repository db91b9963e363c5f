"""Resolving an estimator's ``bandwidth=`` into numbers.

Numbers and vectors are checked; ``"scott"`` and ``"silverman"`` are the
rules of :mod:`nadaraya.bandwidth` (with sample weights, computed from the
weighted spread); ``"cv"``, ``"gcv"`` and ``"aicc"`` are searched with
:func:`~nadaraya.estimators._search.coordinate_search` on the criterion.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import NadarayaError
from . import _frame
from ._loo import CRITERIA
from ._mixed import LOGIT_BOUND
from ._search import SearchResult, coordinate_search

__all__ = ["PLUGINS", "RULES", "DataSummary", "check_bandwidth", "rule_bandwidth", "rule_from",
           "search_bandwidth", "summarize", "weighted_spread"]

RULES = ("scott", "silverman")
#: Plug-in selectors: ``"dpi"``, Ruppert, Sheather and Wand's direct plug-in (``"plug-in"``
#: is another name for it); see :mod:`._plugin`.
PLUGINS = ("dpi",)


def check_bandwidth(bandwidth: Any, n_features: int | None = None, *,
                    allow_zero: bool = False) -> Any:
    """Validate ``bandwidth=``; return a criterion/rule name, None, or an ndarray.

    ``allow_zero``: zeros pass (the lambda of a categorical feature; the
    caller checks each feature's range).
    """
    if bandwidth is None:
        return None
    if isinstance(bandwidth, str):
        name = bandwidth.lower()
        name = "dpi" if name == "plug-in" else name
        if name not in CRITERIA + RULES + PLUGINS:
            raise NadarayaError(
                f"bandwidth {bandwidth!r} is not known; use a positive number, one per "
                f"feature, or one of {', '.join(map(repr, CRITERIA + RULES + PLUGINS))}."
            )
        return name
    try:
        h = np.asarray(bandwidth, dtype=float)
    except (TypeError, ValueError):
        raise NadarayaError(
            f"bandwidth must be a positive number, a vector of them or a method name; "
            f"got {bandwidth!r}."
        ) from None
    if h.ndim > 1 or h.size == 0 or np.isnan(h).any() or not (
            (h >= 0) if allow_zero else (h > 0)).all():
        raise NadarayaError(
            f"bandwidth must be > 0 (a number, or one per feature; inf smooths a feature "
            f"out); got {bandwidth!r}. Pass e.g. bandwidth=0.3 or bandwidth='cv'."
        )
    if n_features is not None and h.ndim == 1 and h.size not in (1, n_features):
        raise NadarayaError(
            f"bandwidth has {h.size} values but X has {n_features} feature(s); give one "
            "value per feature or a single number."
        )
    return h


def weighted_spread(X: np.ndarray, w: np.ndarray, ddof: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and standard deviation of each feature (``w`` as frequencies).

    A constant feature has exactly its value as mean and zero spread (not the
    rounding of the weighted sums, which would pass for a tiny spread). The
    sums are taken on the weights, and each feature's deviations, divided by a
    power of two near their largest (see :mod:`._frame`): weights and features
    of any magnitude give the same result, with no square out of range.
    """
    e = _frame.exponent(w)
    wf = _frame.to_frame(w, e)
    total = wf.sum()
    constant = (X == X[:1]).all(axis=0)
    mean = np.where(constant, X[0], wf @ X / total)
    dev = X - mean
    shifts = np.array([_frame.exponent(dev[:, f]) for f in range(X.shape[1])], dtype=int)
    dof = total - ddof * _frame.unit(e) if ddof else total
    var = wf @ _frame.to_frame(dev, shifts) ** 2 / (dof if dof > 0 else np.finfo(float).tiny)
    sd = _frame.from_frame(np.sqrt(var), shifts)
    return mean, np.where(constant, 0.0, sd)


def rule_bandwidth(name: str, X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Scott's or Silverman's rule per feature, with frequency weights.

    The rules of :mod:`nadaraya.bandwidth` with the weighted sample standard
    deviation and the total weight for ``n``: integer weights give the rule on
    the repeated rows.
    """
    return rule_from(name, X.shape, _frame.log_sum(w), lambda: weighted_spread(X, w, ddof=1.0)[1])


def rule_from(name: str, shape: tuple[int, int], log_n: float,
              spread: Callable[[], np.ndarray]) -> np.ndarray:
    """:func:`rule_bandwidth` from the data's shape, ``log`` total weight and a spread getter.

    ``spread()`` returns the weighted sample standard deviation of each feature
    (asked for only once the total weight is known to be above one).
    """
    n, d = shape
    if n >= 2 and not log_n > 0:
        raise NadarayaError(
            f"bandwidth={name!r} counts sample weights as samples and needs their total "
            f"above 1; got {math.exp(log_n):.3g}. Give bandwidth as a number or 'cv', or "
            "scale sample_weight up."
        )
    sd = spread()
    if n < 2 or (sd <= 0).any():
        cols = np.flatnonzero(sd <= 0).tolist()
        raise NadarayaError(
            f"bandwidth={name!r} needs spread in every feature; feature(s) {cols} of X are "
            "constant (or there is one sample). Give bandwidth as a number instead."
        )
    log_n += math.log((d + 2) / 4.0) if name == "silverman" else 0.0
    return sd * math.exp(-log_n / (d + 4))


def _min_gap(x: np.ndarray) -> float:
    u = np.unique(x)
    return float(np.diff(u).min()) if u.size > 1 else 0.0


#: Criterion values are compared on a grid of this size relative to the target's variance.
RESOLUTION = 1e-12

#: Above this many samples the search first runs on a subsample of this size.
SUBSAMPLE = 10_000

#: Budget of criterion evaluations per searched bandwidth: a bound on the cost that settled
#: searches stay below (10 features usually take 800 to 2,000 evaluations in all).
EVALUATIONS = 500


def search_bandwidth(objective_for: Callable[[np.ndarray | None], Callable[[np.ndarray], float]],
                     X: Any, w: Any, *, scale: float = 1.0, xtol: float = 1e-4,
                     subsample: int | None = None,
                     summary: Callable[[Any, Any], DataSummary] | None = None,
                     take: Callable[[Any, np.ndarray], np.ndarray] | None = None,
                     discrete: np.ndarray | None = None, smooth_out: bool = True
                     ) -> SearchResult:
    """Search the bandwidth minimising a criterion (per feature when X has several).

    The start is ``1.06 sd n^(-1/(d+4))`` per feature (weighted sd, ``n`` the
    total weight); each ``log h`` stays between a quarter of the smallest gap
    between the feature's values and 100 times its range, and the upper end
    stands for ``h = inf``: the criterion is evaluated with the feature
    smoothed out there (for local linear fits, a global linear term in it),
    and a bandwidth the search leaves there is returned as ``inf`` (Hall, Li
    and Racine 2007). A constant feature gets an infinite bandwidth (it
    carries no information). ``scale`` is the size of the criterion's values
    (the target's variance, say). The search scans the bandwidths coarsely
    before its local searches (:mod:`._scan`), so that it does not stop in a
    local minimum near the start.

    With at least as many (non-constant) features as the total weight ``n``,
    the data cannot fix one bandwidth per feature: the search is then on one
    factor common to all features, ``h = a h0``. A search that has not settled
    after :data:`EVALUATIONS` evaluations per searched bandwidth (the common
    factor counts as one) ends at the best bandwidth evaluated, with
    ``converged=False``.

    With more than ``2 * subsample`` rows the search runs first on a fixed
    random subsample of ``subsample`` rows; its bandwidth, times
    ``(n_sub / n)^(1/(d+4))`` (the rate of the optimal bandwidth), starts a
    short search on all rows, which needs a few full evaluations only; that
    search stops at a tolerance of 1e-3 in ``log h`` (at such sizes the
    criterion changes by a part in 10^10 or less over it, far below the
    sampling error of a data-driven bandwidth).

    Parameters
    ----------
    objective_for : callable
        ``objective_for(rows)`` returns the criterion ``h -> float`` on those
        rows (all rows for None).
    X : ndarray of shape (n, n_features)
    w : ndarray of shape (n,)
        Or any arrays that ``summary`` and ``take`` read (Dask arrays, say).
    subsample : int, optional
        Default :data:`SUBSAMPLE`.
    summary : callable, optional
        ``summary(X, w)`` gives the :class:`DataSummary` of all rows; default
        :func:`summarize`.
    take : callable, optional
        ``take(a, rows)`` gives the rows ``rows`` of ``X`` or ``w`` as an
        ndarray; default ``a[rows]``.
    discrete : ndarray of bool, shape (n_features,), optional
        Categorical features: their coordinate is the pseudo-bandwidth
        ``e^t``, ``t = logit(lambda / upper)`` in ``[-LOGIT_BOUND, LOGIT_BOUND]``
        (see :mod:`._mixed`), started at ``t = 0``; the objective receives it
        as is. A feature with one level gets ``inf`` (smoothed out).
    smooth_out : bool, default True
        Whether the upper end of a continuous feature stands for ``h = inf``.
        False keeps it the finite bound (a density, whose kernel ``K(x / h) / h``
        vanishes as ``h`` grows, has no smoothed-out feature).
    """
    discrete = np.zeros(X.shape[1], dtype=bool) if discrete is None else discrete
    n, d = X.shape
    subsample = SUBSAMPLE if subsample is None else subsample
    summary = summarize if summary is None else summary
    if n > 2 * subsample:
        rows = np.sort(np.random.RandomState(0).choice(n, subsample, replace=False))
        Xs, ws = (X[rows], w[rows]) if take is None else (take(X, rows), take(w, rows))
        first = _search(objective_for(rows), summarize(Xs, ws), scale=scale, xtol=1e-2,
                        discrete=discrete, smooth_out=smooth_out)
        whole = summary(X, w)
        factor = math.exp((_frame.log_sum(ws) - whole.log_n) / (d + 4))
        result = _search(objective_for(None), whole, scale=scale, xtol=max(xtol, 1e-3),
                         start=first.bandwidth * np.where(discrete, 1.0, factor),
                         discrete=discrete, smooth_out=smooth_out)
        result.history = first.history + result.history
        result.subsample = len(first.history)
        result.converged = first.converged and result.converged
        return result
    return _search(objective_for(None), summary(X, w), scale=scale, xtol=xtol,
                   discrete=discrete, smooth_out=smooth_out)


@dataclass
class DataSummary:
    """What the bandwidth search reads from the data, per feature.

    Attributes
    ----------
    sd : ndarray of shape (n_features,)
        Weighted standard deviation (:func:`weighted_spread`).
    log_n : float
        Log of the total weight (:func:`._frame.log_sum`).
    span : ndarray of shape (n_features,)
        Largest minus smallest value.
    gaps : ndarray of shape (n_features,)
        Smallest gap between distinct values (0 for a constant feature).
    """

    sd: np.ndarray
    log_n: float
    span: np.ndarray
    gaps: np.ndarray


def summarize(X: np.ndarray, w: np.ndarray) -> DataSummary:
    """The :class:`DataSummary` of in-memory data."""
    _, sd = weighted_spread(X, w)
    gaps = np.array([_min_gap(X[:, f]) for f in range(X.shape[1])])
    return DataSummary(sd, _frame.log_sum(w), X.max(axis=0) - X.min(axis=0), gaps)


def _search(objective: Callable[[np.ndarray], float], data: DataSummary, *,
            scale: float, xtol: float, start: np.ndarray | None = None,
            discrete: np.ndarray | None = None, smooth_out: bool = True) -> SearchResult:
    sd, span, gaps = data.sd, data.span, data.gaps
    d = span.shape[0]
    discrete = np.zeros(d, dtype=bool) if discrete is None else discrete
    log_n = data.log_n  # the total weight, which may lie beyond the float range
    active = span > 0
    lower = np.where(active, np.maximum(gaps / 4.0, 1e-9 * span), 1.0)
    upper = np.where(active, 100.0 * span, 1.0)
    lower = np.where(discrete, math.exp(-LOGIT_BOUND), lower)
    upper = np.where(discrete, math.exp(LOGIT_BOUND), upper)
    h0 = 1.06 * sd * math.exp(-log_n / (4 + d)) if start is None else start
    h0 = np.where(discrete & (start is None), 1.0, h0)
    h0 = np.where(active, np.clip(np.nan_to_num(h0, posinf=np.inf), lower, upper), 1.0)
    # Criteria are compared to twelve digits of the target's scale, so that rounding
    # (the order of the rows, repeated rows versus weights) does not steer the search.
    size = scale if 0 < scale < math.inf else 1.0
    quantum = 10.0 ** math.floor(math.log10(RESOLUTION * size))

    n_active = int(active.sum())
    common = n_active > 1 and math.log(n_active) >= log_n

    def smoothed(h: np.ndarray) -> np.ndarray:
        """Continuous features on their upper bound, where the search means ``h = inf``.

        Not for a common factor: its upper end is where the first feature
        reaches its bound, no feature's own choice.
        """
        return ~discrete & (h >= upper * (1.0 - 1e-12)) & (smooth_out and not common)

    def full(h: np.ndarray) -> float:
        value = objective(np.where(active & ~smoothed(h), h, np.inf))
        steps = value / quantum
        return round(steps) * quantum if math.isfinite(steps) else value

    budget = EVALUATIONS * (1 if common else max(n_active, 1))
    if start is None:
        result = coordinate_search(full, h0, lower, upper, active, xtol=xtol,
                                   n_starts=min(3, n_active), common=common,
                                   max_evaluations=budget)
    else:
        result = coordinate_search(full, h0, lower, upper, active, xtol=xtol, refine=True,
                                   step=0.05, common=common, max_evaluations=budget)
    for f in np.flatnonzero(discrete & active):
        # the ends of lambda (each level alone; smoothed out) where the criterion is flat
        # toward them: the search may stop short of a bound it would not gain from
        for end in (lower[f], upper[f]):
            if result.bandwidth[f] == end or not math.isfinite(result.score):
                continue
            h = result.bandwidth.copy()
            h[f] = end
            value = full(h)
            result.history.append((h, value, int(f)))
            if value <= result.score:
                moved = value < result.score
                result.bandwidth, result.score = h, value
                result.at_bound = sorted(set(result.at_bound) | {int(f)})
                if moved and n_active > 1:
                    # the other bandwidths were chosen for the old lambda: search again
                    result = _again(result, full, lower, upper, active, xtol, common, budget)
    result.smoothed_out = sorted(int(f) for f in np.flatnonzero(
        ~active | (result.bandwidth >= upper * (1.0 - 1e-12))))
    result.bandwidth = np.where(active & ~smoothed(result.bandwidth), result.bandwidth, np.inf)
    for i, (h, value, f) in enumerate(result.history):
        result.history[i] = (np.where(active & ~smoothed(h), h, np.inf), value, f)
    return result


def _again(result: SearchResult, full: Callable[[np.ndarray], float], lower: np.ndarray,
           upper: np.ndarray, active: np.ndarray, xtol: float, common: bool, budget: int
           ) -> SearchResult:
    """Sweep the bandwidths again from ``result`` (a lambda just moved to its end);
    the better of the two, with both histories."""
    again = coordinate_search(full, result.bandwidth, lower, upper, active, xtol=xtol,
                              refine=True, step=0.05, common=common, max_evaluations=budget)
    history = result.history + again.history
    if again.score < result.score:
        result = again
    result.history = history
    return result
