"""Härdle and Mammen's test of a parametric regression against the kernel fit.

The hypothesis is ``E[y | x] = f(x, theta)`` for some ``theta``: a parametric
model (a linear regression by default) is right. Härdle and Mammen (1993)
compare the kernel fit with the kernel-smoothed parametric fit, the same
smoother applied to both so that their smoothing biases cancel:

    T = h^(d/2) sum_i (yhat(x_i) - (S f_theta)(x_i))^2
      = h^(d/2) sum_i ((S u)_i)^2,        u = y - f(x, theta_hat),

the squared smooth of the parametric residuals at the data (the integral of
their paper against the design's own distribution; ``h^(d/2)`` is the product
of the square roots of the continuous bandwidths). Where the parametric model
is wrong its residuals keep a trend, which the smoother sees, and ``T`` is
large; the test is consistent against any smooth alternative.

Its null distribution comes from Härdle and Mammen's wild bootstrap:
``y* = f(x, theta_hat) + u * V`` with independent multipliers ``V`` of mean 0
and variance 1 (Mammen's two-point law by default), ``theta*`` refitted on
``y*`` and ``T*`` computed as ``T`` was. The smoother is linear, so a batch of
resamples is one engine pass with one value column per resample.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .._errors import NadarayaError
from ._significance import BootstrapTest, check_model, fitted_for
from ._uncertainty import MULTIPLIERS, check_resamples, multipliers

__all__ = ["specification_test"]

#: Resamples per engine pass.
_CHUNK = 64


def _dummies(X: np.ndarray, types: str) -> np.ndarray:
    """``[1, continuous columns, one indicator per categorical level but the first]``."""
    cols = [np.ones((X.shape[0], 1))]
    for k, t in enumerate(types):
        if t == "c":
            cols.append(X[:, k:k + 1])
        else:
            levels = np.unique(X[:, k])
            cols.append((X[:, k:k + 1] == levels[None, 1:]).astype(float))
    return np.concatenate(cols, axis=1)


def _projection(Z: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Least-squares fitted values ``Z (Z^T Z)^+ Z^T Y`` (orthonormal basis of ``Z``'s span)."""
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    rank = int(np.sum(s > s[0] * max(Z.shape) * np.finfo(float).eps)) if s.size else 0
    Q = U[:, :rank]
    return lambda Y: Q @ (Q.T @ Y)


def _parametric(model: Any, parametric: Any) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """Parametric fitted values as a function of targets ``(n, b)``, and a description."""
    X = model.X_fit_
    n = X.shape[0]
    if isinstance(parametric, str):
        if parametric == "linear":
            Z = _dummies(X, model._types or "c" * X.shape[1])
        elif parametric == "constant":
            Z = np.ones((n, 1))
        else:
            raise NadarayaError(
                f"parametric must be 'linear', 'constant', a design matrix of shape ({n}, k) "
                f"or a callable f(X, y) returning fitted values; got {parametric!r}."
            )
        return _projection(Z), parametric
    if callable(parametric):
        def fit(Y: np.ndarray) -> np.ndarray:
            out = np.empty_like(Y)
            for b in range(Y.shape[1]):
                f = np.asarray(parametric(X, Y[:, b]), dtype=float)
                if f.shape not in ((n,), (n, 1)) or not np.isfinite(f).all():
                    raise NadarayaError(
                        f"parametric: the callable must return {n} finite fitted values "
                        f"(one per training row); got shape {f.shape}"
                        f"{'' if np.isfinite(f).all() else ' with non-finite values'}."
                    )
                out[:, b] = f.reshape(n)
            return out

        return fit, getattr(parametric, "__name__", type(parametric).__name__)
    Z = np.asarray(parametric, dtype=float)
    Z = Z[:, None] if Z.ndim == 1 else Z
    if Z.ndim != 2 or Z.shape[0] != n or Z.shape[1] < 1 or not np.isfinite(Z).all():
        raise NadarayaError(
            f"parametric: a design matrix must be finite, of shape ({n}, k) with k >= 1 (one "
            f"row per training row); got shape {np.shape(parametric)}. Include a column of "
            "ones for an intercept."
        )
    return _projection(Z), f"design matrix {Z.shape}"


def specification_test(model: Any, parametric: Any = "linear", *, n_resamples: int = 399,
                       random_state: Any = None, multiplier: str = "mammen") -> BootstrapTest:
    """Härdle-Mammen (1993) wild-bootstrap test of a parametric model against the kernel fit.

    Tests ``E[y | x] = f(x, theta)``. The statistic is Härdle and Mammen's
    integrated squared difference between the kernel fit and the kernel
    smooth of the parametric fit, ``T = h^(d/2) sum_i ((S u)_i)^2`` with
    ``u`` the parametric residuals and ``S`` the model's smoother at its
    fitted bandwidth (see :mod:`nadaraya.estimators._specification`); its
    null distribution, their wild bootstrap ``y* = f(x, theta_hat) + u V``
    with the parametric model refitted on each resample. Consistent against
    every smooth alternative; valid under heteroscedastic noise. A small
    p-value says the parametric model misses structure the kernel fit sees.

    Parameters
    ----------
    model : fitted NadarayaWatsonRegressor or LocalPolynomialRegressor
        One target, no sample weights, a kernel given by name; its bandwidth
        is the test's (a smaller one looks for finer departures).
    parametric : "linear", "constant", array-like or callable, default "linear"
        ``"linear"``: least squares on an intercept, the continuous features
        and one indicator per level (but the first) of each categorical one;
        ``"constant"``: the mean. An array of shape (n_train, k): the design
        matrix of a linear model fitted by least squares (no intercept is
        added). A callable ``f(X, y)`` returning the fitted values, shape
        (n_train,), of the parametric model fitted to ``(X, y)`` (``X`` the
        training features, categorical ones as codes); it is called
        ``n_resamples + 1`` times.
    n_resamples : int, default 399
    random_state : int, RandomState or None
    multiplier : {"mammen", "rademacher"}, default "mammen"
        Law of the wild bootstrap's multipliers.

    Returns
    -------
    BootstrapTest
        ``statistic`` (squared target units), ``pvalue``, ``n_resamples``,
        ``null_distribution``, ``bootstrap`` and ``details`` (the parametric model).

    References
    ----------
    Härdle, W. and Mammen, E. (1993). Comparing nonparametric versus
    parametric regression fits. The Annals of Statistics 21, 1926-1947.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import NadarayaWatsonRegressor, specification_test
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, (100, 1))
    >>> y = 1 + 2 * x[:, 0] + 0.2 * rng.normal(size=100)
    >>> model = NadarayaWatsonRegressor(bandwidth=0.1).fit(x, y)
    >>> specification_test(model, "linear", n_resamples=99, random_state=0).pvalue > 0.05
    True
    >>> curved = NadarayaWatsonRegressor(bandwidth=0.1).fit(x, y + np.sin(6 * x[:, 0]))
    >>> specification_test(curved, "linear", n_resamples=99, random_state=0).pvalue
    0.01
    """
    check_model(model, "specification_test")
    check_resamples(n_resamples)
    if multiplier not in MULTIPLIERS:
        raise NadarayaError(
            f"multiplier must be one of {', '.join(map(repr, MULTIPLIERS))}; got {multiplier!r}."
        )
    fit, description = _parametric(model, parametric)
    X, y = model.X_fit_, model._y_train  # targets in their frame, (n, 1)
    types = model._types or "c" * X.shape[1]
    h = np.broadcast_to(np.asarray(model.bandwidth_, float), (X.shape[1],))
    cont = h[[t == "c" for t in types]]
    factor = float(np.prod(np.sqrt(cont[np.isfinite(cont)])))

    def statistic(Y: np.ndarray) -> np.ndarray:
        smoothed = fitted_for(model, X, Y - fit(Y))
        return factor * np.sum(smoothed**2, axis=0)

    f0 = fit(y)[:, 0]
    u = y[:, 0] - f0
    rng = check_random_state(random_state)
    n = y.shape[0]
    null = np.empty(n_resamples)
    observed = np.nan
    for start in range(0, n_resamples, _CHUNK):
        b = min(_CHUNK, n_resamples - start)
        draws = f0[:, None] + u[:, None] * multipliers(rng, (n, b), multiplier)
        if start == 0:  # the data's statistic rides along with the first batch
            values = statistic(np.concatenate([y, draws], axis=1))
            observed, null[:b] = float(values[0]), values[1:]
        else:
            null[start:start + b] = statistic(draws)
    pvalue = (1.0 + np.count_nonzero(null >= observed)) / (n_resamples + 1.0)
    return BootstrapTest("specification", float(model._out(observed, power=2)),
                         float(pvalue), int(n_resamples), model._out(null, power=2),
                         f"wild-{multiplier}", {"parametric": description})
