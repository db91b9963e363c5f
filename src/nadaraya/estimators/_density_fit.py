"""Choosing the bandwidth of a density: numbers, rules, the plug-in and the CV searches.

``bandwidth=`` of :class:`~nadaraya.estimators.KernelDensity` and
:class:`~nadaraya.estimators.ConditionalDensity` is one value per feature
(``h`` of a continuous feature, ``lambda`` of a categorical one; a single
number for all-continuous data), a rule (``"scott"``, ``"silverman"``:
continuous features only), the plug-in (``"sheather-jones"`` or ``"sj"``:
Sheather-Jones for one continuous feature, the diagonal plug-in of
:mod:`._plugin_diag` for 2 to 6, the categorical ones cross-validated) or a
cross-validation criterion (``"cv_ml"``, ``"cv_ls"``), searched
by :func:`~nadaraya.estimators._bandwidth.search_bandwidth` on ``log h`` and,
for categorical features, on ``logit(lambda / upper)`` (:mod:`._mixed`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data

from .._errors import NadarayaError
from ..engine.certified import check_tolerance
from ._bandwidth import rule_bandwidth, search_bandwidth, weighted_spread
from ._density_kernel import (
    DENSITY_OKERNELS,
    DENSITY_UKERNELS,
    DensityKernel,
    check_radial_name,
)
from ._mixed import MixedTypes, check_var_types
from ._plugin_density import sheather_jones
from ._plugin_diag import plugin_diagonal

__all__ = [
    "METHODS",
    "check_method",
    "check_names",
    "levels_of",
    "numeric_bandwidth",
    "plugin_bandwidth",
    "plugin_continuous",
    "rule_or_plugin",
    "search_density_bandwidth",
    "start_fit",
]

METHODS = ("cv_ml", "cv_ls", "sheather-jones", "sj", "scott", "silverman")


def check_names(ukernel: Any, okernel: Any) -> None:
    """Refuse unknown categorical kernel names."""
    for value, allowed, param in ((ukernel, DENSITY_UKERNELS, "ukernel"),
                                  (okernel, DENSITY_OKERNELS, "okernel")):
        if value not in allowed:
            raise NadarayaError(
                f"{param} must be one of {', '.join(map(repr, allowed))}; got {value!r}."
            )


def start_fit(est: Any, X: Any, var_types: str | None
              ) -> tuple[str, float | None, np.ndarray, str]:
    """The checks a density estimator's ``fit`` starts with.

    Parameters
    ----------
    est : KernelDensity or ConditionalDensity
        Its ``kernel``, ``ukernel``, ``okernel`` and ``tolerance`` are checked.
    X : array-like of shape (n_samples, n_features)
        Numeric (categorical columns already coded).
    var_types : str or None
        One letter per column of ``X`` (None: all continuous).

    Returns
    -------
    name : str
        The radial kernel's name.
    tolerance : float or None
    X : ndarray of shape (n_samples, n_features)
        Validated, float64 (sets ``n_features_in_``).
    types : str
        One letter per feature.
    """
    name = check_radial_name(est.kernel)
    check_names(est.ukernel, est.okernel)
    tol = check_tolerance(est.tolerance)
    X = validate_data(est, X, dtype=np.float64)
    types = check_var_types(var_types, X.shape[1]) or "c" * X.shape[1]
    return name, tol, X, types


def check_method(bandwidth: Any, allowed: tuple[str, ...] = METHODS) -> str | None:
    """The method name of ``bandwidth=`` (None when it is numeric)."""
    if not isinstance(bandwidth, str):
        return None
    name = bandwidth.lower()
    if name not in allowed:
        raise NadarayaError(
            f"bandwidth {bandwidth!r} is not known; use one of "
            f"{', '.join(map(repr, allowed))}, a positive number or one value per feature."
        )
    return "sheather-jones" if name == "sj" else name


def levels_of(X: np.ndarray, types: str) -> list[np.ndarray | None]:
    """Sorted distinct codes of each categorical column (None for continuous ones)."""
    return [np.unique(X[:, j]) if t != "c" else None for j, t in enumerate(types)]


def _upper(types: str, j: int, c: int, ukernel: str) -> tuple[float, bool]:
    """Largest lambda of feature ``j`` and whether it is allowed (closed range)."""
    if types[j] == "u" and ukernel == "aitchison-aitken":
        return ((c - 1) / c if c >= 2 else 1.0), True
    if types[j] == "o":
        return 1.0, False
    return 1.0, True


def numeric_bandwidth(bandwidth: Any, types: str, levels: list[np.ndarray | None],
                      ukernel: str, okernel: str) -> np.ndarray:
    """Check a numeric ``bandwidth=`` against the features; shape ``(n_features,)``."""
    d = len(types)
    try:
        h = np.asarray(bandwidth, dtype=float)
    except (TypeError, ValueError):
        raise NadarayaError(
            f"bandwidth must be a method name, a positive number or one value per feature; "
            f"got {bandwidth!r}."
        ) from None
    if h.ndim > 1 or h.size not in (1, d) or (h.size == 1 < d and set(types) - {"c"}):
        raise NadarayaError(
            f"bandwidth has shape {h.shape} but X has {d} feature(s) of types {types!r}; give "
            "one value per feature (h for continuous features, lambda for categorical ones)"
            + ("" if set(types) - {"c"} else ", or a single number") + "."
        )
    h = np.broadcast_to(h.ravel(), (d,)).astype(float)
    for j, t in enumerate(types):
        if t == "c":
            if not (np.isfinite(h[j]) and h[j] > 0):
                raise NadarayaError(
                    f"bandwidth[{j}] is the bandwidth of continuous feature {j} and must be "
                    f"a finite number > 0; got {h[j]!r}. Pass e.g. bandwidth=0.3 or "
                    "bandwidth='cv_ml'."
                )
            continue
        c = levels[j].size
        upper, closed = _upper(types, j, c, ukernel)
        if okernel == "li-racine" and t == "o":
            closed = True
        inside = 0 <= h[j] <= upper if closed else 0 <= h[j] < upper
        if not inside:
            raise NadarayaError(
                f"bandwidth[{j}] is the lambda of categorical feature {j} ({t!r}) and must be "
                f"in [0, {upper:g}{']' if closed else ')'}; got {h[j]!r}."
            )
    return h


def rule_or_plugin(name: str, X: np.ndarray, w: np.ndarray, types: str) -> np.ndarray:
    """Scott's or Silverman's rule, or Sheather-Jones, for continuous features."""
    if set(types) - {"c"}:
        raise NadarayaError(
            f"bandwidth={name!r} is a rule for continuous features, and var_types={types!r} "
            "has categorical ones; use bandwidth='cv_ml' (or 'cv_ls', or 'sheather-jones', "
            "which cross-validates the categorical ones), or one value per feature."
        )
    if name == "sheather-jones":
        return plugin_continuous(X, w)
    return rule_bandwidth(name, X, w)


def plugin_continuous(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Sheather-Jones for one continuous column, the diagonal plug-in for 2 to 6 of them."""
    if X.shape[1] == 1:
        return np.array([sheather_jones(X[:, 0], w)])
    return plugin_diagonal(X, w)


def plugin_bandwidth(
        X: np.ndarray, w: np.ndarray, types: str, ukernel: str, okernel: str,
        build: Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], float]]
) -> tuple[np.ndarray, Any]:
    """``bandwidth="sheather-jones"`` for mixed data: plug-in ``h``, cross-validated ``lambda``.

    The continuous columns get :func:`plugin_continuous` (on those columns
    alone); the ``lambda`` of the categorical ones minimize ``build(X, w)``'s
    criterion (likelihood cross-validation) with the continuous bandwidths held
    there. Returns the bandwidth and the search result (None without
    categorical features).
    """
    cont = [j for j, t in enumerate(types) if t == "c"]
    cat = [j for j, t in enumerate(types) if t != "c"]
    if not cont:
        raise NadarayaError(
            f"bandwidth='sheather-jones' is a plug-in for continuous features, and "
            f"var_types={types!r} has none; use bandwidth='cv_ml' or one lambda per feature."
        )
    h = np.zeros(len(types))
    h[cont] = plugin_continuous(X[:, cont], w)
    if not cat:
        return h, None
    sub = "".join(types[j] for j in cat)
    levels = levels_of(X[:, cat], sub)
    mixed = MixedTypes(sub, ukernel, okernel, np.array([lev.size for lev in levels]))

    def objective_for(rows: np.ndarray | None) -> Callable[[np.ndarray], float]:
        objective = build(X, w) if rows is None else build(X[rows], w[rows])

        def at(s: np.ndarray) -> float:
            full = h.copy()
            full[cat] = mixed.from_search(s)
            return objective(full)
        return at

    result = search_bandwidth(objective_for, X[:, cat], w, discrete=np.ones(len(cat), bool),
                              smooth_out=False)
    lam = np.asarray(mixed.from_search(result.bandwidth), dtype=float)
    lam[[i for i, lev in enumerate(levels) if lev.size < 2]] = 0.0
    h[cat] = lam
    return h, result


def check_spread(X: np.ndarray, types: str, name: str) -> None:
    """Refuse a data-driven bandwidth when a continuous feature has no spread."""
    if X.shape[0] < 2:
        raise NadarayaError(
            f"bandwidth={name!r} needs at least 2 samples with positive weight; got "
            f"n_samples={X.shape[0]}. Give the bandwidth as a number, or more data."
        )
    flat = [j for j, t in enumerate(types) if t == "c" and np.ptp(X[:, j]) == 0]
    if flat:
        raise NadarayaError(
            f"bandwidth={name!r} needs spread in every continuous feature; feature(s) {flat} "
            "of X are constant, and the density of a constant is a point mass. Drop those "
            "columns (or declare them categorical in var_types), or give the bandwidth as "
            "numbers."
        )


def search_density_bandwidth(
        build: Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], float]],
        X: np.ndarray, w: np.ndarray, types: str, ukernel: str, okernel: str,
        scale: float = 1.0) -> tuple[np.ndarray, Any]:
    """Search the bandwidth minimising ``build(X_rows, w_rows)``'s criterion.

    Returns the bandwidth (``h`` and ``lambda`` per feature; 0 for a
    categorical feature with one level) and the search result.
    """
    levels = levels_of(X, types)
    discrete = np.array([t != "c" for t in types])
    mixed = None
    if discrete.any():
        counts = np.array([0 if lev is None else lev.size for lev in levels])
        mixed = MixedTypes(types, ukernel, okernel, counts)

    def objective_for(rows: np.ndarray | None) -> Callable[[np.ndarray], float]:
        objective = build(X, w) if rows is None else build(X[rows], w[rows])
        if mixed is None:
            return objective
        return lambda s: objective(mixed.from_search(s))

    result = search_bandwidth(objective_for, X, w, scale=scale,
                              discrete=None if mixed is None else discrete, smooth_out=False)
    h = result.bandwidth if mixed is None else mixed.from_search(result.bandwidth)
    single = [j for j, lev in enumerate(levels) if lev is not None and lev.size < 2]
    h = np.asarray(h, dtype=float).copy()
    h[single] = 0.0
    return h, result


def density_model(name: str, types: str, levels: list[np.ndarray | None], ukernel: str,
                  okernel: str, blocks: list[list[int]] | None = None
                  ) -> Callable[[np.ndarray], DensityKernel]:
    """``h -> DensityKernel`` for fixed features (``inf`` lambdas of one-level features ok)."""
    def make(h: np.ndarray) -> DensityKernel:
        return DensityKernel(name, types, np.asarray(h, dtype=float), levels, ukernel,
                             okernel, blocks)
    return make


def spread_scale(X: np.ndarray, w: np.ndarray, types: str) -> float:
    """``1 / prod(sd)`` of the continuous features: the size of a density's values."""
    cont = [j for j, t in enumerate(types) if t == "c"]
    if not cont:
        return 1.0
    _, sd = weighted_spread(X[:, cont], w)
    return float(np.exp(-np.sum(np.log(sd))))


def warn_unsettled(result: Any, name: str) -> None:
    """Warn when a bandwidth search stopped before it settled."""
    if not result.converged:
        warnings.warn(
            f"bandwidth={name!r}: the search stopped after {len(result.history)} evaluations "
            "before it settled; bandwidth_ is the best bandwidth evaluated. Pass the "
            "bandwidth as numbers to skip the search.", ConvergenceWarning, stacklevel=4)
