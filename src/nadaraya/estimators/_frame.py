"""Targets and sample weights in a power-of-two frame, so no product the fit forms leaves range.

A kernel smoother is equivariant in its targets (scaling ``y`` scales the
fit) and its sample weights enter the fit through their ratios only. The
estimators therefore work on ``y / 2^e`` and ``w / 2^f``, with ``2^e`` and
``2^f`` the powers of two just above the largest magnitudes (:func:`exponent`):
dividing by a power of two is exact, the largest value lies in ``[1/2, 1)``,
and nothing formed from them (targets times kernel weights, sample weights
times monomials, squared residuals) overflows or sinks into the subnormal
range, however large or small the caller's numbers (targets of ``1e308`` or
``1e-314``, weights of ``1e-320``).

Every output in the targets' units is multiplied back by ``2^e`` (exact
too, :func:`from_frame`). An output that lies beyond the float range in
those units (a mean squared error of ``1e600`` for targets near ``1e300``)
is reported as ``inf``.

Weights keep their meaning as frequencies where it matters (leaving a point
out removes one unit of its weight; the total weight is the sample size):
one unit is ``2^-f`` in the frame (:func:`unit`). Analytic weights
(``weight_type="analytic"``: proportional to each row's precision, the
inverse variance of its target) are read in their mean's unit instead, so
the rows count as ``n`` samples whatever the weights' scale, and leaving a
row out removes all of its weight (:func:`units`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import _check_sample_weight

from .._errors import NadarayaError

__all__ = ["WEIGHT_TYPES", "exponent", "from_frame", "is_analytic", "log_sum",
           "positive_weights", "to_frame",
           "unit", "units"]

#: What ``sample_weight`` means (the estimators' ``weight_type``): ``"frequency"``, an integer
#: weight is that many copies of the row; ``"analytic"``, weights proportional to each row's
#: precision (inverse variance), the rows staying ``n`` observations.
WEIGHT_TYPES = ("frequency", "analytic")


def exponent(a: np.ndarray) -> int:
    """``e`` with the largest finite ``|a|`` in ``[2^(e-1), 2^e)``; 0 when it is zero.

    Parameters
    ----------
    a : ndarray of any shape
    """
    finite = np.abs(a[np.isfinite(a)])
    top = float(finite.max()) if finite.size else 0.0
    return int(np.frexp(top)[1]) if top > 0 else 0


def to_frame(a: np.ndarray, e: int | np.ndarray) -> np.ndarray:
    """``a / 2^e``, exact for values whose result is a normal float (``e`` broadcasts)."""
    return np.ldexp(a, -e)


def from_frame(a: np.ndarray | float, e: int | np.ndarray, power: int = 1) -> np.ndarray:
    """``a * 2^(power e)``: an output back in the caller's units (``inf`` beyond range)."""
    with np.errstate(over="ignore"):
        return np.ldexp(a, power * e)


def unit(e: int) -> float:
    """One unit of the caller's weight in the frame of exponent ``e``: ``2^-e``.

    ``inf`` when the weights are so small (subnormal) that one unit is beyond
    the float range in their frame: every weight is then below one.
    """
    with np.errstate(over="ignore"):
        return float(np.ldexp(1.0, -e))


def log_sum(w: np.ndarray) -> float:
    """``log(sum(w))`` of positive weights, finite even where the sum is not.

    The plain sum where it is a normal float (so equal totals give equal
    logs, whatever the weights), else the sum in the weights' frame.
    """
    with np.errstate(over="ignore"):
        total = float(w.sum())
    if np.finfo(float).tiny <= total < np.inf:
        return float(np.log(total))
    e = exponent(w)
    return float(np.log(to_frame(w, e).sum())) + e * float(np.log(2.0))


def is_analytic(kind: object) -> bool:
    """Whether ``weight_type=kind`` is ``"analytic"``; anything but the two names is refused."""
    if not (isinstance(kind, str) and kind in WEIGHT_TYPES):
        raise NadarayaError(
            f"weight_type must be one of {', '.join(map(repr, WEIGHT_TYPES))}; got "
            f"{kind!r}. Use 'frequency' for counts of repeated rows, 'analytic' for "
            "weights proportional to each row's precision (inverse variance)."
        )
    return kind == "analytic"


def units(w: np.ndarray, omega: np.ndarray, e: int, analytic: bool
          ) -> tuple[np.ndarray, float, float]:
    """How a fit reads its weights: ``(counts, unit, left_out)``.

    Parameters
    ----------
    w : ndarray of shape (n,)
        The caller's weights (positive).
    omega : ndarray of shape (n,)
        ``w`` in the frame of exponent ``e``.
    analytic : bool
        Analytic weights (else frequencies).

    Returns
    -------
    counts : ndarray of shape (n,)
        The weights as numbers of samples (for the rules and the search's
        start): ``w``, or ``omega`` over its mean (``n`` in all).
    unit : float
        The weight of one sample in the frame: :func:`unit` of ``e``, or the
        mean of ``omega`` (as Stata's ``aweight``).
    left_out : float
        The weight leaving a row out removes: ``unit``, or ``inf`` (all of it).
    """
    if not analytic:
        one = unit(e)
        return w, one, one
    mean = float(np.mean(omega))
    return omega / mean, mean, np.inf


def positive_weights(sample_weight: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The checked weights ``(n,)`` and the rows that carry weight ``(n,)`` of bool.

    Ones when ``sample_weight`` is None; a weight of zero leaves its row out of
    the fit, and no weight at all is an error.
    """
    w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    keep = w > 0
    if not keep.any():
        raise NadarayaError("sample_weight is zero for every sample; give some samples "
                            "positive weight.")
    return w, keep
