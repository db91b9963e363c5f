"""Pointwise standard errors, confidence and prediction bands and the wild bootstrap.

A kernel smoother's prediction is linear in the targets, ``yhat(x) = sum_j
S_xj y_j``, so with independent noise of variance ``sigma_j^2``

    Var yhat(x) = sum_j S_xj^2 sigma_j^2.

Homoscedastic noise (``sigma_j^2 = sigma^2 / w_j``, :func:`pointwise_variance`):
``sum_j S_xj^2 / w_j`` is a smoothing pass with the squared kernel ``K^2`` (see
:meth:`LocalDesign.variance_factor`), so it costs one more pass of the engine
and never an ``m x n`` matrix; ``sigma^2`` is ``RSS / (n - trace S)``.
Heteroscedastic noise (:func:`robust_variance`): ``sigma_j^2`` is replaced by
the squared leverage-corrected residual ``e_j^2 = r_j^2 / (1 - S_jj)`` (HC2),
in the same single ``K^2`` pass; it is exactly the variance of the wild
bootstrap (:func:`bootstrap_deviations`), which resamples ``e_j`` times random
multipliers of mean 0 and variance 1. A prediction interval for a new
observation adds its noise variance: ``sigma^2`` or the local variance
:func:`local_noise` (a kernel smooth of ``w_j e_j^2``).

What a confidence band means: it describes the *variability* of the estimate,
the spread of ``yhat(x)`` over new noise at the same design points and the
same bandwidth. It is centred on the estimate, which is biased (peaks are
flattened, and Nadaraya-Watson is pulled inward at the boundaries), so it is
a band for the smoothed mean ``E[yhat(x)] = sum_j S_xj m(x_j)``, not for the
true regression function ``m``; it does not count the variability of a
data-driven bandwidth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .._config import get_config
from .._errors import NadarayaError
from ..engine import weights
from ._direct import solve_exact, solve_rows

__all__ = [
    "MULTIPLIERS",
    "bootstrap_deviations",
    "check_interval",
    "check_level",
    "check_resamples",
    "interval",
    "leverage_residuals",
    "local_noise",
    "multipliers",
    "pointwise_variance",
    "residual_variance",
    "robust_variance",
    "sup_band",
    "weight_variance",
]

#: Distributions of the wild bootstrap's multipliers (mean 0, variance 1).
MULTIPLIERS = ("rademacher", "mammen")

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


def weight_variance(est: Any, X: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
    """``sum_j S_xj^2 / w_j`` of a Nadaraya-Watson fit from the kernel weights, shape ``(m,)``.

    The rows of ``S`` come from :func:`nadaraya.weights` (the engine's
    normalized kernel weights, exact however far the queries), in blocks
    within the working-memory budget; not with a user ``mask`` (its meaning
    may depend on the query's index). NaN for a query that sees no key.
    With ``noise`` of shape ``(n, p)`` (a variance per key and output):
    ``sum_j S_xj^2 noise_jk`` instead, shape ``(m, p)``.
    """
    spec = est._spec
    n = est.X_fit_.shape[0]
    omega = np.ones(n) if est._omega is None else est._omega
    step = max(1, int(get_config().working_memory * 2**20 // (8.0 * 3 * n)))
    out = np.empty(X.shape[0] if noise is None else (X.shape[0], noise.shape[1]))
    for start in range(0, X.shape[0], step):
        W = weights(X[start:start + step], est.X_fit_, spec.kernel, bandwidth=spec.bandwidth,
                    empty="nan")
        P = W * omega
        with np.errstate(invalid="ignore", divide="ignore"):
            S = P / P.sum(axis=1, keepdims=True)
            out[start:start + step] = ((S**2 / omega).sum(axis=1) if noise is None
                                       else S**2 @ noise)
    return out


def leverage_residuals(est: Any) -> np.ndarray:
    """Residuals ``r_j / sqrt(1 - S_jj)`` of the fit, shape ``(n, p)``, in the targets' frame.

    Dividing by ``sqrt(1 - S_jj)`` undoes the shrinkage of a residual by its
    own point's weight in the fit (MacKinnon and White's HC2), so that
    ``e_j^2`` estimates the noise variance at ``x_j``.
    """
    fit = est._loo_fit
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(np.clip(1.0 - fit.diag, 1e-12, None))
        return (est._y_train - fit.fitted) / root[:, None]


def robust_variance(est: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit and heteroscedasticity-consistent variance ``sum_j S_xj^2 e_j^2`` at ``X``.

    ``e_j`` are the :func:`leverage_residuals`; both outputs have shape
    ``(m, p)``, in the targets' frame (the variance squared). The sum is one
    engine pass with the squared kernel ``K^2`` over the columns
    ``w_j^2 e_j^2 z_j^a`` (the same quadratic form as
    :func:`pointwise_variance`, with ``w_j^2 e_j^2`` for ``w_j``); rows whose
    moments cannot give it to rounding are computed from their kernel weights.
    It is the variance, given the data, of the wild bootstrap's fits. NaN
    where the fit has no residual degrees of freedom (``n <= trace S``).
    """
    means, lse = est._means(X, return_lse=True)
    fitted, c, mu0, direct = est._solve_exact(means, X, coef=True)
    design = est._design_
    e2 = leverage_residuals(est) ** 2
    n, p = e2.shape
    omega = np.ones(n) if est._omega is None else est._omega
    u = omega[:, None] ** 2 * e2
    if design.degree == 0:
        values = u
    else:
        values = np.concatenate([design.values(est.X_fit_, None, u[:, k]) for k in range(p)],
                                axis=1)
    sq_means, lse2 = est._means(X, return_lse=True, values=values, spec=est._spec.squared(),
                                empty="nan")
    v = np.empty((X.shape[0], p))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        log_ratio = np.minimum(lse2 - 2.0 * lse, 0.0)
        inexact = np.finfo(float).eps * (np.abs(lse2) + 2.0 * np.abs(lse)) > _LOG_ROUNDING
        step = values.shape[1] // p
        for k in range(p):
            block = sq_means[:, k * step:(k + 1) * step]
            if design.degree == 0:
                v[:, k] = np.exp(log_ratio) * block[:, 0] / mu0**2
            else:
                v[:, k], flagged = design.variance_factor(block, X, c, mu0, log_ratio)
                inexact |= flagged
    seen = np.isfinite(lse)
    v[~seen] = np.nan
    rows = np.union1d(direct.index, np.flatnonzero(inexact & seen))
    local = est._local_rows(X)
    if local is not None and rows.size:
        with np.errstate(divide="ignore"):
            for k in range(p):
                # solve_direct's variance is sum_j S_qj^2 / w_j: 1 / e_j^2 for w_j gives HC
                again = solve_rows(design, replace(local, sample_weight=1.0 / e2[:, k]),
                                   X, rows, p)[0]
                v[again.index, k] = again.variance
    elif design.degree == 0 and est.mask is None and rows.size:
        v[rows] = weight_variance(est, X[rows], noise=e2)
    # no residual degrees of freedom (n <= trace S): the residuals say nothing of the noise
    v[:, ~np.isfinite(est._sigma2)] = np.nan
    return fitted, v


def local_noise(est: Any, X: np.ndarray) -> np.ndarray:
    """Noise variance of one new observation (unit weight) at ``X``, shape ``(m, p)``.

    The Nadaraya-Watson smooth, with the fit's kernel and bandwidth, of
    ``w_j e_j^2`` (:func:`leverage_residuals`; ``w_j`` the sample weight): a
    local variance that follows heteroscedastic noise. In the targets'
    frame, squared. NaN where the fit has no residual degrees of freedom.
    """
    e2 = leverage_residuals(est) ** 2
    if est._omega is None:
        out = est._means(X, values=e2, empty="nan")
    else:
        w = est.sample_weight_[:, None]
        means = est._means(X, values=np.c_[est._omega[:, None] * w * e2, est._omega],
                           empty="nan")
        with np.errstate(invalid="ignore", divide="ignore"):
            out = means[:, :-1] / means[:, -1:]
    out[:, ~np.isfinite(est._sigma2)] = np.nan
    return out


def multipliers(rng: np.random.RandomState, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """Wild-bootstrap multipliers of mean 0 and variance 1, ``shape``.

    ``"rademacher"``: -1 or 1 with equal chance. ``"mammen"``: Mammen's
    (1993) two-point law, ``-(sqrt 5 - 1) / 2`` with probability
    ``(sqrt 5 + 1) / (2 sqrt 5)``, else ``(sqrt 5 + 1) / 2`` (third moment 1 too).
    """
    if kind == "rademacher":
        return rng.choice(np.array([-1.0, 1.0]), size=shape)
    if kind == "mammen":
        root5 = np.sqrt(5.0)
        low = rng.random_sample(shape) < (root5 + 1.0) / (2.0 * root5)
        return np.where(low, -(root5 - 1.0) / 2.0, (root5 + 1.0) / 2.0)
    raise NadarayaError(
        f"multiplier must be one of {', '.join(map(repr, MULTIPLIERS))}; got {kind!r}."
    )


def bootstrap_deviations(est: Any, X: np.ndarray, n_resamples: int, random_state: Any,
                         chunk: int = 64, multiplier: str = "rademacher") -> np.ndarray:
    """Wild-bootstrap deviations ``yhat*(x) - yhat(x)``, shape ``(n_resamples, m, p)``.

    In the targets' frame of the fit (see :mod:`._frame`).

    The residuals ``r_i / sqrt(1 - S_ii)`` are multiplied by independent
    random :func:`multipliers` (random signs by default), so heteroscedastic
    noise is respected; the smoother is linear, so a batch of resamples is
    one engine pass with one value column per resample.
    """
    check_resamples(n_resamples)
    rng = check_random_state(random_state)
    scaled = leverage_residuals(est)
    n, p = scaled.shape
    wv = est._omega
    local = est._local_rows(X)
    out = np.empty((n_resamples, X.shape[0], p))
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        signs = multipliers(rng, (n, b), multiplier)
        noise = (signs[:, :, None] * scaled[:, None, :]).reshape(n, b * p)
        values = est._design_.values(est.X_fit_, noise, wv)
        means = est._means(X, values=values)
        # the rows the fit solves from their kernel weights, solved the same way
        rows = None if local is None else replace(local, targets=noise)
        dev = solve_exact(est._design_, means, X, b * p, rows)[0]
        out[start:start + b] = dev.reshape(X.shape[0], b, p).transpose(1, 0, 2)
    return out


def check_resamples(n_resamples: Any) -> None:
    """Raise unless ``n_resamples`` is a positive integer."""
    if not (isinstance(n_resamples, int | np.integer) and not isinstance(n_resamples, bool)
            and n_resamples >= 1):
        raise NadarayaError(
            f"n_resamples must be a positive integer (e.g. 999); got {n_resamples!r}."
        )


def check_interval(kind: Any, method: Any, simultaneous: Any, multiplier: Any) -> None:
    """Raise unless the options of ``predict_interval`` go together."""
    if kind not in ("confidence", "prediction"):
        raise NadarayaError(
            f"kind must be 'confidence' (band for the mean) or 'prediction' (interval "
            f"for a new observation); got {kind!r}."
        )
    if method not in ("hc", "normal", "bootstrap"):
        raise NadarayaError(f"method must be 'hc', 'normal' or 'bootstrap'; got {method!r}.")
    if multiplier not in MULTIPLIERS:
        raise NadarayaError(
            f"multiplier must be one of {', '.join(map(repr, MULTIPLIERS))}; got {multiplier!r}."
        )
    if simultaneous and (method != "bootstrap" or kind != "confidence"):
        raise NadarayaError(
            f"simultaneous=True needs method='bootstrap' and kind='confidence'; got "
            f"method={method!r}, kind={kind!r}. Pass method='bootstrap' for a "
            "simultaneous band for the mean, or simultaneous=False."
        )


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


def sup_band(fitted: np.ndarray, dev: np.ndarray, level: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """Simultaneous (sup-t) band from bootstrap deviations ``dev`` of shape ``(B, m, p)``.

    ``fitted -/+ c se`` per output, with ``se`` the deviations' standard
    deviation at each query and ``c`` the ``level`` quantile over the
    resamples of ``max_x |dev(x)| / se(x)`` (queries with ``se = 0`` left out
    of the maximum; their band is the point itself).
    """
    check_level(level)
    se = dev.std(axis=0, ddof=1) if dev.shape[0] > 1 else np.zeros(dev.shape[1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se > 0, np.abs(dev) / se, 0.0)
    c = np.quantile(np.nanmax(t, axis=1), float(level), axis=0)
    return fitted - c * se, fitted + c * se
