"""Pointwise standard errors, confidence bands and the wild bootstrap of a linear smoother.

A kernel smoother's prediction is linear in the targets, ``yhat(x) = sum_j
S_xj y_j``. With independent noise of variance ``sigma^2 / w_j``,

    Var yhat(x) = sigma^2 sum_j S_xj^2 / w_j,

and ``sum_j S_xj^2 / w_j`` is a smoothing pass with the squared kernel
``K^2`` (see :meth:`LocalDesign.variance_factor`), so it costs one more pass
of the engine and never an ``m x n`` matrix. ``sigma^2`` is estimated by
``RSS / (n - trace S)``.

What the band means: it describes the *variability* of the estimate, the
spread of ``yhat(x)`` over new noise at the same design points and the same
bandwidth. It is centred on the estimate, which is biased (peaks are
flattened, and Nadaraya-Watson is pulled inward at the boundaries), so it is
not a band for the true regression function; it is pointwise, not
simultaneous; and it does not count the variability of a data-driven
bandwidth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .._config import get_config
from .._errors import NadarayaError
from ..engine import weights
from ._direct import solve_exact

__all__ = [
    "bootstrap_deviations",
    "check_level",
    "interval",
    "pointwise_variance",
    "residual_variance",
    "weight_variance",
]

#: Largest rounding of ``log(sum K^2 / (sum K)^2)`` from the engine's log-sums (a relative
#: error of the variance factor) before the row is computed from its kernel weights.
_LOG_ROUNDING = 1e-8


def residual_variance(Y: np.ndarray, fitted: np.ndarray, diag: np.ndarray,
                      w: np.ndarray | None, unit: float = 1.0) -> np.ndarray:
    """``sigma^2`` per output: weighted RSS over ``sum(w) - trace(S)``, shape ``(p,)``.

    ``unit`` is the weight one in the frame of ``w`` (see :mod:`._frame`): RSS
    and degrees of freedom are both taken in that frame, so their ratio is
    the caller's. NaN where ``sum(w) <= trace(S)``.
    """
    omega = np.ones(Y.shape[0]) if w is None else w
    with np.errstate(invalid="ignore"):
        dof = float(omega.sum() - unit * np.sum(diag))
    rss = omega @ (Y - fitted) ** 2
    if not dof > 0:
        return np.full(Y.shape[1], np.nan)
    return rss / dof


def pointwise_variance(est: Any, X: np.ndarray, lse: np.ndarray, c: np.ndarray,
                       mu0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j S_xj^2 / w_j`` at the queries ``X`` of a fitted smoother, shape ``(m,)``.

    ``lse``, ``c`` and ``mu0`` come from the prediction pass at ``X``; the
    weights ``w_j`` are those of the fit's frame (times ``est._w_unit`` in the
    caller's units). Also returns the rows whose moments cancel too much for
    it (see :meth:`LocalDesign.variance_factor`), or whose log-sums are too
    large to give ``sum K^2 / (sum K)^2`` (queries thousands of bandwidths from
    every key), shape ``(m,)``, bool.
    """
    design = est._design_
    if design.degree > 0:
        values = est._values[:, : len(design.gram_exps)]
    elif design.weighted:
        values = est._values[:, -1:]
    else:
        values = np.ones((est.X_fit_.shape[0], 1))
    squared = est._spec.squared()
    sq_means, lse2 = est._means(X, return_lse=True, values=values, spec=squared, empty="nan")
    with np.errstate(invalid="ignore"):
        # log(sum K^2 / (sum K)^2) <= 0 is the difference of two log-sums, rounded to eps
        # times their size: for a query thousands of bandwidths from every key that
        # rounding swamps it, and the row is computed from its kernel weights instead
        log_ratio = lse2 - 2.0 * lse
        rounding = np.finfo(float).eps * (np.abs(lse2) + 2.0 * np.abs(lse))
        v, inexact = design.variance_factor(sq_means, X, c, mu0, np.minimum(log_ratio, 0.0))
        inexact |= rounding > _LOG_ROUNDING
    seen = np.isfinite(lse)
    # a query that saw no key and took its nearest key's value: one observation's variance
    return np.where(seen, v, 1.0 if est.empty == "nearest" else np.nan), inexact & seen


def weight_variance(est: Any, X: np.ndarray) -> np.ndarray:
    """``sum_j S_xj^2 / w_j`` of a Nadaraya-Watson fit from the kernel weights, shape ``(m,)``.

    The rows of ``S`` come from :func:`nadaraya.weights` (the engine's
    normalized kernel weights, exact however far the queries), in blocks
    within the working-memory budget; not with a user ``mask`` (its meaning
    may depend on the query's index). NaN for a query that sees no key.
    """
    spec = est._spec
    n = est.X_fit_.shape[0]
    omega = np.ones(n) if est._omega is None else est._omega
    step = max(1, int(get_config().working_memory * 2**20 // (8.0 * 3 * n)))
    out = np.empty(X.shape[0])
    for start in range(0, X.shape[0], step):
        W = weights(X[start:start + step], est.X_fit_, spec.kernel, bandwidth=spec.bandwidth,
                    empty="nan")
        P = W * omega
        with np.errstate(invalid="ignore", divide="ignore"):
            S = P / P.sum(axis=1, keepdims=True)
            out[start:start + step] = (S**2 / omega).sum(axis=1)
    return out


def bootstrap_deviations(est: Any, X: np.ndarray, n_resamples: int, random_state: Any,
                         chunk: int = 64) -> np.ndarray:
    """Wild-bootstrap deviations ``yhat*(x) - yhat(x)``, shape ``(n_resamples, m, p)``.

    In the targets' frame of the fit (see :mod:`._frame`).

    The residuals ``r_i / sqrt(1 - S_ii)`` are multiplied by independent
    random signs (Rademacher), so heteroscedastic noise is respected; the
    smoother is linear, so a batch of resamples is one engine pass with one
    value column per resample.
    """
    if not (isinstance(n_resamples, int | np.integer) and n_resamples >= 1):
        raise NadarayaError(f"n_resamples must be a positive integer; got {n_resamples!r}.")
    rng = check_random_state(random_state)
    fit = est._loo_fit
    Y = est._y_train
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = (Y - fit.fitted) / np.sqrt(np.clip(1.0 - fit.diag, 1e-12, None))[:, None]
    n, p = Y.shape
    wv = est._omega
    local = est._local_rows(X)
    out = np.empty((n_resamples, X.shape[0], p))
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n, b))
        noise = (signs[:, :, None] * scaled[:, None, :]).reshape(n, b * p)
        values = est._design_.values(est.X_fit_, noise, wv)
        means = est._means(X, values=values)
        # the rows the fit solves from their kernel weights, solved the same way
        rows = None if local is None else replace(local, targets=noise)
        dev = solve_exact(est._design_, means, X, b * p, rows)[0]
        out[start:start + b] = dev.reshape(X.shape[0], b, p).transpose(1, 0, 2)
    return out


def check_level(level: Any) -> None:
    """Raise unless ``0 < level < 1``."""
    if not (isinstance(level, float | int) and not isinstance(level, bool) and 0 < level < 1):
        raise NadarayaError(f"level must be between 0 and 1 (e.g. 0.95); got {level!r}.")


def interval(fitted: np.ndarray, spread: np.ndarray, level: float, method: str
             ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of a pointwise band.

    ``method="normal"``: ``fitted -/+ z std`` with ``spread`` the standard
    errors. ``method="bootstrap"``: the basic bootstrap interval with
    ``spread`` the deviations ``(B, m, p)``.
    """
    check_level(level)
    alpha = 1.0 - float(level)
    if method == "normal":
        from scipy.special import ndtri

        z = float(ndtri(1.0 - alpha / 2.0))
        return fitted - z * spread, fitted + z * spread
    lo = np.quantile(spread, alpha / 2.0, axis=0)
    hi = np.quantile(spread, 1.0 - alpha / 2.0, axis=0)
    return fitted - hi, fitted - lo
