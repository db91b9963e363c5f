"""Resolving an estimator's ``bandwidth=`` into numbers.

Numbers and vectors are checked; ``"scott"`` and ``"silverman"`` are the
rules of :mod:`nadaraya.bandwidth` (with sample weights, computed from the
weighted spread); ``"cv"``, ``"gcv"`` and ``"aicc"`` are searched with
:func:`~nadaraya.estimators._search.coordinate_search` on the criterion.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._errors import NadarayaError
from ._loo import CRITERIA
from ._search import SearchResult, coordinate_search

__all__ = ["RULES", "check_bandwidth", "rule_bandwidth", "search_bandwidth", "weighted_spread"]

RULES = ("scott", "silverman")


def check_bandwidth(bandwidth: Any, n_features: int | None = None) -> Any:
    """Validate ``bandwidth=``; return a criterion/rule name, None, or an ndarray."""
    if bandwidth is None:
        return None
    if isinstance(bandwidth, str):
        name = bandwidth.lower()
        if name not in CRITERIA + RULES:
            raise NadarayaError(
                f"bandwidth {bandwidth!r} is not known; use a positive number, one per "
                f"feature, or one of {', '.join(map(repr, CRITERIA + RULES))}."
            )
        return name
    try:
        h = np.asarray(bandwidth, dtype=float)
    except (TypeError, ValueError):
        raise NadarayaError(
            f"bandwidth must be a positive number, a vector of them or a method name; "
            f"got {bandwidth!r}."
        ) from None
    if h.ndim > 1 or h.size == 0 or np.isnan(h).any() or not (h > 0).all():
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
    """Weighted mean and standard deviation of each feature (``w`` as frequencies)."""
    total = w.sum()
    mean = w @ X / total
    var = w @ (X - mean) ** 2 / max(total - ddof, np.finfo(float).tiny)
    return mean, np.sqrt(var)


def rule_bandwidth(name: str, X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Scott's or Silverman's rule per feature, with frequency weights.

    The rules of :mod:`nadaraya.bandwidth` with the weighted sample standard
    deviation and the total weight for ``n``: integer weights give the rule on
    the repeated rows.
    """
    n, d = X.shape[0], X.shape[1]
    total = float(w.sum())
    _, sd = weighted_spread(X, w, ddof=1.0)
    if n < 2 or (sd <= 0).any():
        cols = np.flatnonzero(sd <= 0).tolist()
        raise NadarayaError(
            f"bandwidth={name!r} needs spread in every feature; feature(s) {cols} of X are "
            "constant (or there is one sample). Give bandwidth as a number instead."
        )
    effective = total * (d + 2) / 4.0 if name == "silverman" else total
    return sd * effective ** (-1.0 / (d + 4))


def _min_gap(x: np.ndarray) -> float:
    u = np.unique(x)
    return float(np.diff(u).min()) if u.size > 1 else 0.0


#: Criterion values are compared on a grid of this size relative to the target's variance.
RESOLUTION = 1e-12

#: Above this many samples the search first runs on a subsample of this size.
SUBSAMPLE = 10_000


def search_bandwidth(objective_for: Callable[[np.ndarray | None], Callable[[np.ndarray], float]],
                     X: np.ndarray, w: np.ndarray, *, scale: float = 1.0, xtol: float = 1e-4,
                     subsample: int = SUBSAMPLE) -> SearchResult:
    """Search the bandwidth minimising a criterion (per feature when X has several).

    The start is ``1.06 sd n^(-1/(d+4))`` per feature (weighted sd, ``n`` the
    total weight); each ``log h`` stays between a quarter of the smallest gap
    between the feature's values and 100 times its range. A constant feature
    gets an infinite bandwidth (it carries no information). ``scale`` is the
    size of the criterion's values (the target's variance, say).

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
    """
    n, d = X.shape
    if n > 2 * subsample:
        rows = np.sort(np.random.RandomState(0).choice(n, subsample, replace=False))
        first = _search(objective_for(rows), X[rows], w[rows], scale=scale, xtol=1e-2)
        factor = (w[rows].sum() / w.sum()) ** (1.0 / (d + 4))
        result = _search(objective_for(None), X, w, scale=scale, xtol=max(xtol, 1e-3),
                         start=first.bandwidth * factor)
        result.history = first.history + result.history
        result.subsample = len(first.history)
        return result
    return _search(objective_for(None), X, w, scale=scale, xtol=xtol)


def _search(objective: Callable[[np.ndarray], float], X: np.ndarray, w: np.ndarray, *,
            scale: float, xtol: float, start: np.ndarray | None = None) -> SearchResult:
    d = X.shape[1]
    _, sd = weighted_spread(X, w)
    total = float(w.sum())
    span = X.max(axis=0) - X.min(axis=0)
    active = span > 0
    gaps = np.array([_min_gap(X[:, f]) for f in range(d)])
    lower = np.where(active, np.maximum(gaps / 4.0, 1e-9 * span), 1.0)
    upper = np.where(active, 100.0 * span, 1.0)
    h0 = 1.06 * sd * total ** (-1.0 / (4 + d)) if start is None else start
    h0 = np.where(active, np.clip(np.nan_to_num(h0, posinf=np.inf), lower, upper), 1.0)
    # Criteria are compared to twelve digits of the target's scale, so that rounding
    # (the order of the rows, repeated rows versus weights) does not steer the search.
    quantum = 10.0 ** math.floor(math.log10(RESOLUTION * (scale if scale > 0 else 1.0)))

    def full(h: np.ndarray) -> float:
        value = objective(np.where(active, h, np.inf))
        return round(value / quantum) * quantum if math.isfinite(value) else value

    if start is None:
        result = coordinate_search(full, h0, lower, upper, active, xtol=xtol,
                                   n_starts=min(3, int(active.sum())))
    else:
        result = coordinate_search(full, h0, lower, upper, active, xtol=xtol, refine=True,
                                   step=0.05)
    result.bandwidth = np.where(active, result.bandwidth, np.inf)
    for i, (h, value, f) in enumerate(result.history):
        result.history[i] = (np.where(active, h, np.inf), value, f)
    return result
