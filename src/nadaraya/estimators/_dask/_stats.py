"""Summaries of Dask training data, computed on the cluster to a few numbers each.

The in-memory fit reads its data's spread, range and power-of-two frames from
NumPy arrays (:func:`.._bandwidth.weighted_spread`, :mod:`.._frame`); these
are the same quantities as Dask reductions, each pass over the data ending
in a small array on the client. The weighted spread takes three passes (the
range, then the weighted mean, then the variance about it in each feature's
frame), as the in-memory one does in one; the smallest gap between a
feature's distinct values (the lower end of the bandwidth search) is a
distributed sort of that column.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _frame
from .._bandwidth import DataSummary, rule_from
from ._inputs import dask_array

__all__ = ["exponents", "log_sum", "rule_bandwidth", "search_summary", "weighted_spread"]


def _compute(*arrays: Any) -> tuple[Any, ...]:
    import dask

    return tuple(np.asarray(a) for a in dask.compute(*arrays))


def _exponent(top: float) -> int:
    return int(np.frexp(top)[1]) if top > 0 else 0


def exponents(*arrays: Any) -> list[int]:
    """:func:`.._frame.exponent` of finite Dask arrays, in one pass over all of them."""
    da = dask_array()
    tops = _compute(*(da.abs(a).max() for a in arrays))
    return [_exponent(float(t)) for t in tops]


def log_sum(w: Any) -> float:
    """:func:`.._frame.log_sum` of positive Dask weights."""
    with np.errstate(over="ignore"):
        (total,) = _compute(w.sum())
    total = float(total)
    if np.finfo(float).tiny <= total < np.inf:
        return math.log(total)
    (e,) = exponents(w)
    (framed,) = _compute(_frame.to_frame(w, e).sum())
    return math.log(float(framed)) + e * math.log(2.0)


def _range(X: Any, w: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per-feature minimum and maximum, the first row, and the weights' exponent."""
    da = dask_array()
    lo, hi, first, wtop = _compute(X.min(axis=0), X.max(axis=0), X[0], da.abs(w).max())
    return lo, hi, first, _exponent(float(wtop))


def weighted_spread(X: Any, w: Any, ddof: float = 0.0, *, ranges: Any = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.._bandwidth.weighted_spread` of Dask data: weighted mean and standard deviation.

    ``ranges`` is the result of :func:`_range` when already computed.
    """
    lo, hi, first, e = _range(X, w) if ranges is None else ranges
    constant = lo == hi
    wf = _frame.to_frame(w, e)
    total, wsum = _compute(wf.sum(), wf @ X)
    total = float(total)
    mean = np.where(constant, first, wsum / total)
    # the largest |x - mean| of a feature is at its minimum or maximum (rounding is monotone)
    top = np.maximum(np.abs(hi - mean), np.abs(lo - mean))
    shifts = np.array([_exponent(float(t)) for t in top], dtype=int)
    dof = total - ddof * _frame.unit(e) if ddof else total
    (sq,) = _compute(wf @ _frame.to_frame(X - mean, shifts) ** 2)
    var = sq / (dof if dof > 0 else np.finfo(float).tiny)
    sd = _frame.from_frame(np.sqrt(var), shifts)
    return mean, np.where(constant, 0.0, sd)


def _min_gap(column: Any) -> float:
    """Smallest gap between distinct values of a Dask column (a distributed sort)."""
    import dask.dataframe as dd

    frame = dd.from_dask_array(column, columns=["x"])
    diffs = frame.sort_values("x")["x"].diff()
    (gap,) = _compute(diffs[diffs > 0].min())
    gap = float(gap)
    return gap if math.isfinite(gap) else 0.0


def search_summary(X: Any, w: Any) -> DataSummary:
    """:class:`.._bandwidth.DataSummary` of Dask data (spread, range, gaps, total weight)."""
    ranges = _range(X, w)
    _, sd = weighted_spread(X, w, ranges=ranges)
    lo, hi = ranges[0], ranges[1]
    span = hi - lo
    gaps = np.array([_min_gap(X[:, f]) if span[f] > 0 else 0.0 for f in range(X.shape[1])])
    return DataSummary(sd=sd, log_n=log_sum(w), span=span, gaps=gaps)


def rule_bandwidth(name: str, X: Any, w: Any) -> np.ndarray:
    """:func:`.._bandwidth.rule_bandwidth` (Scott's or Silverman's rule) of Dask data."""
    return rule_from(name, X.shape, log_sum(w), lambda: weighted_spread(X, w, ddof=1.0)[1])
