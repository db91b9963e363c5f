"""Standard errors of the level effects of a categorical feature.

A level effect ``d_c(x) = yhat(x^c) - yhat(x^b)`` (the query ``x`` with the
feature set to level ``c``, and to the base level ``b``) is linear in the
targets, ``d_c(x) = sum_i (S_ci - S_bi) y_i``, with ``S_c`` the smoother row
at ``x^c``. The two fits share the data, so the variance of the difference is
not the sum of theirs: with independent noise of variance ``sigma_i^2``

    Var d_c(x) = sum_i (S_ci - S_bi)^2 sigma_i^2
               = Var yhat(x^c) + Var yhat(x^b) - 2 sum_i S_ci S_bi sigma_i^2.

``"asymptotic"`` (:func:`asymptotic_std`) replaces ``sigma_i^2`` by the
squared leverage-corrected residual ``e_i^2 = r_i^2 / (1 - S_ii)`` (HC2, the
heteroscedasticity-consistent variance of ``predict_interval(method="hc")``),
from the smoother rows of both queries, a block of queries at a time.
``"bootstrap"`` (:func:`bootstrap_std`) is the spread of ``d_c(x)`` over wild
bootstrap refits at the same bandwidth (random signs times ``e_i``, the same
signs for every level); given the data its variance is the asymptotic one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .._config import get_config
from .._errors import NadarayaError
from ._uncertainty import bootstrap_deviations, leverage_residuals

__all__ = ["asymptotic_std", "bootstrap_std"]


def _step(est: Any, m: int) -> int:
    """Queries per block: four ``(block, n)`` arrays within the working-memory budget."""
    n = est.X_fit_.shape[0]
    step = max(1, int(get_config().working_memory * 2**20 // (8.0 * 4 * max(n, 1))))
    if est.mask is not None and step < m:
        raise NadarayaError(
            "standard errors of level effects with a mask need the smoother rows of all "
            f"{m} queries at once, beyond the working-memory budget; raise it with "
            "nadaraya.config_context(working_memory=...) or ask for fewer queries."
        )
    return step


def asymptotic_std(est: Any, queries: list[np.ndarray], base: int) -> np.ndarray:
    """``sqrt(sum_i (S_ci - S_bi)^2 e_i^2)`` for every level ``c``, shape ``(m, L, p)``.

    Parameters
    ----------
    est : fitted kernel regressor
    queries : list of L ndarrays of shape (m, n_features)
        The queries with the feature set to each level.
    base : int
        Position of the base level in ``queries``.

    Returns
    -------
    ndarray of shape (m, L, p)
        In the targets' frame; 0 in the base level's column, NaN where the fit
        has no residual degrees of freedom or a query sees no key.
    """
    e2 = leverage_residuals(est) ** 2
    m = queries[0].shape[0]
    var = np.zeros((m, len(queries), e2.shape[1]))
    step = _step(est, m)
    for start in range(0, m, step):
        rows = slice(start, min(start + step, m))
        Sb = est._smoother_rows(queries[base][rows])
        for c, Xc in enumerate(queries):
            if c != base:
                var[rows, c] = (est._smoother_rows(Xc[rows]) - Sb) ** 2 @ e2
    var[:, :, ~np.isfinite(est._sigma2)] = np.nan
    return np.sqrt(var)


def bootstrap_std(est: Any, queries: list[np.ndarray], base: int, n_resamples: int,
                  random_state: Any) -> np.ndarray:
    """Standard deviation of the effects over wild-bootstrap refits, shape ``(m, L, p)``.

    Every level's fits use the same ``n_resamples`` draws of random signs, so
    each resample is one refit of the whole curve and the effects' shared data
    is kept.
    """
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    at_base = bootstrap_deviations(est, queries[base], n_resamples, seed)
    m, p = at_base.shape[1:]
    std = np.zeros((m, len(queries), p))
    for c, Xc in enumerate(queries):
        if c != base:
            dev = bootstrap_deviations(est, Xc, n_resamples, seed) - at_base
            std[:, c] = dev.std(axis=0, ddof=1)
    return std
