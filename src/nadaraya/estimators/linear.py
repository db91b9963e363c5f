"""Ordinary least squares as a smoother: ``y_hat = X (X^T X)^+ X^T y``.

Linear regression is the smoothing of ``y`` with the signed linear kernel
``K(x, x_j) = 1 / n + (x - c)^T S^+ (x_j - c)``, ``S`` the scatter matrix of
the centred training inputs (the intercept comes from centring). So it has a
smoother matrix like every other smoother of this library: its diagonal
holds the leverages, its trace the effective degrees of freedom (the rank),
and the leave-one-out residuals follow from the diagonal without refitting.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import get_config
from .._errors import NadarayaError
from ..engine import smooth
from ..kernels.linear import LinearKernel
from ..masks import Window

__all__ = ["LinearSmoother"]


class LinearSmoother(RegressorMixin, BaseEstimator):
    """Least-squares linear regression, computed as a kernel smoother.

    Predictions are :func:`nadaraya.smooth` of the training targets with the
    linear kernel ``M = (X^T X)^+`` (pseudo-inverse: rank-deficient ``X`` and
    ``n_samples < n_features`` are fine), so they equal scikit-learn's
    ``LinearRegression`` and the smoother matrix is the OLS hat matrix.

    Parameters
    ----------
    fit_intercept : bool, default True
        Fit an intercept (by centring on the training mean).
    engine : str, default "auto"
        Passed to :func:`nadaraya.smooth` (``"streamed"`` or ``"dense"``).

    Attributes
    ----------
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training inputs (the keys).
    kernel_ : LinearKernel
        ``LinearKernel("whitened", intercept=fit_intercept)``.
    rank_ : int
        Rank of the design (the centred inputs, plus one for the intercept).
    leverage_ : ndarray of shape (n_samples,)
        Diagonal of the smoother (hat) matrix, ``S_ii`` (also :meth:`smoother_diagonal`).
    effective_dof_ : float
        ``trace(S)``, equal to ``rank_`` up to rounding.
    residual_variance_ : float or ndarray of shape (n_outputs,)
        ``RSS / (n - trace(S))`` (NaN when ``n <= rank``).
    fitted_ : ndarray, shape of ``y``
        In-sample predictions ``S y``.
    residuals_ : ndarray, shape of ``y``
        ``y - S y``.
    loo_residuals_ : ndarray, shape of ``y``
        Leave-one-out residuals ``(y_i - y_hat_i) / (1 - S_ii)``; NaN (with a
        warning) where ``S_ii = 1``, where the point alone decides its fit.
    press_ : float
        Sum of squared leave-one-out residuals (NaN where any is undefined).
    cv_score_ : float
        Leave-one-out mean squared error, ``press_ / (n * n_outputs)``.
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
        Slopes of the fitted linear function (the minimum-norm ones).
    intercept_ : float or ndarray of shape (n_outputs,)
        Its value at the origin.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators.linear import LinearSmoother
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3)); y = X @ [1.0, 2.0, -1.0] + 0.5
    >>> model = LinearSmoother().fit(X, y)
    >>> round(model.effective_dof_, 6), np.allclose(model.predict(X), y)
    (4.0, True)
    """

    def __init__(self, *, fit_intercept: bool = True, engine: str = "auto") -> None:
        self.fit_intercept = fit_intercept
        self.engine = engine

    def _smooth(self, X: np.ndarray, values: np.ndarray, mask: Any = None) -> np.ndarray:
        return smooth(X, self.X_fit_, values, self.kernel_, mask, engine=self.engine,
                      normalize=False)

    def fit(self, X: Any, y: Any) -> LinearSmoother:
        """Store the training data and compute leverages and leave-one-out residuals.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise NadarayaError(f"fit_intercept must be True or False; got "
                                f"{self.fit_intercept!r}.")
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True,
                             dtype=np.float64)
        self.X_fit_, self._y_fit = X, y
        self.kernel_ = LinearKernel("whitened", intercept=bool(self.fit_intercept))
        t = torch.tensor(X)
        self.rank_ = int(self.kernel_.bind(t, t).k.shape[1])
        n = X.shape[0]
        self.leverage_ = self._smooth(X, np.ones(n), Window(0))
        self.effective_dof_ = float(self.leverage_.sum())
        self.fitted_ = self._smooth(X, y)
        self.residuals_ = y - self.fitted_
        keep = 1.0 - self.leverage_
        undefined = keep <= 1e3 * np.finfo(float).eps * max(n, 1)
        if undefined.any():
            warnings.warn(
                f"{int(undefined.sum())} training point(s) have leverage 1 (the point alone "
                "decides its fit, e.g. n_samples <= rank): their leave-one-out residuals are "
                "undefined and set to NaN.", RuntimeWarning, stacklevel=2)
        share = np.where(undefined, np.nan, keep)
        self.loo_residuals_ = self.residuals_ / (share if y.ndim == 1 else share[:, None])
        self.press_ = float(np.sum(self.loo_residuals_ ** 2))
        self.cv_score_ = self.press_ / self.loo_residuals_.size
        rss = np.sum(self.residuals_ ** 2, axis=0)
        dof = n - self.effective_dof_
        self.residual_variance_ = rss / dof if dof > 0.5 else np.full_like(rss, np.nan)
        if y.ndim == 1:
            self.residual_variance_ = float(self.residual_variance_)
        d = X.shape[1]
        basis = np.vstack([np.zeros((1, d)), np.eye(d)])
        at = self._smooth(basis, y)
        self.intercept_ = at[0] if y.ndim > 1 else float(at[0])
        self.coef_ = (at[1:] - at[0]).T if y.ndim > 1 else at[1:] - at[0]
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predictions ``sum_j K(x, x_j) y_j`` for new inputs.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_outputs)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._smooth(X, self._y_fit)

    def smoother_matrix(self, X: Any = None) -> np.ndarray:
        """Rows of the smoother matrix: ``S[i, j]`` is training point ``j``'s weight at ``x_i``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), optional
            Where to evaluate; the training inputs by default (the hat matrix).

        Returns
        -------
        ndarray of shape (n_queries, n_samples)
            Signed weights; with an intercept each row sums to one.
        """
        check_is_fitted(self)
        X = self.X_fit_ if X is None else validate_data(self, X, reset=False,
                                                         dtype=np.float64)
        n = self.X_fit_.shape[0]
        need = X.shape[0] * n * 8 / 2**20
        budget = get_config().working_memory
        if need > budget:
            raise NadarayaError(
                f"smoother_matrix would be ({X.shape[0]}, {n}), {need:.0f} MiB, over the "
                f"working-memory budget of {budget:.0f} MiB. Raise it with "
                f"nadaraya.config_context(working_memory={int(need) + 1}), ask for fewer rows, "
                "or use leverage_ for the diagonal."
            )
        return self._smooth(X, np.eye(n))

    def smoother_diagonal(self) -> np.ndarray:
        """Diagonal ``S_ii`` of the smoother matrix at the training points (the leverages).

        Computed during :meth:`fit` with a diagonal mask, without the ``n x n`` matrix.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self.leverage_.copy()

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
