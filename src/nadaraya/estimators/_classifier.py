"""Kernel classification: attention over one-hot labels."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._errors import NadarayaError
from . import _dask
from ._base import KernelSmoother
from ._mixed import check_var_types
from ._regression import _KernelRegressor

__all__ = ["KernelClassifier"]


class KernelClassifier(ClassifierMixin, KernelSmoother):
    """Class probabilities as the kernel-weighted average of one-hot labels.

    ``P(class c | x) = sum_j K(x, x_j) w_j [y_j = c] / sum_j K(x, x_j) w_j``:
    Nadaraya-Watson on the indicator of each class, i.e. attention whose
    values are the labels. ``bandwidth="cv"`` minimises the leave-one-out
    Brier score (squared error of the probabilities), computed exactly in one
    engine pass per bandwidth.

    Parameters
    ----------
    kernel, bandwidth, mask, engine, empty, tolerance, var_types, ukernel, okernel
        As in :class:`~nadaraya.estimators.NadarayaWatsonRegressor`: mixed
        data through ``var_types`` (``'c'``, ``'u'``, ``'o'`` per feature) or
        a DataFrame's dtypes, whose categories are coded at ``fit`` and
        ``predict`` alike.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    bandwidth_, cv_results_, effective_dof_, X_fit_, n_features_in_, feature_names_in_
        As in :class:`~nadaraya.estimators.NadarayaWatsonRegressor`.
    cv_score_ : float
        Leave-one-out Brier score at ``bandwidth_`` (mean over classes).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import KernelClassifier
    >>> X = np.r_[np.zeros((5, 1)), np.ones((5, 1))]; y = np.r_[[0] * 5, [1] * 5]
    >>> KernelClassifier(bandwidth=0.2).fit(X, y).predict([[0.1], [0.9]]).tolist()
    [0, 1]

    Mixed data from a DataFrame:

    >>> import pandas as pd
    >>> df = pd.DataFrame({"x": [0.0, 0.1, 0.2, 0.0, 0.1, 0.2],
    ...                    "g": pd.Categorical(list("aaabbb"))})
    >>> clf = KernelClassifier(bandwidth=[0.1, 0.0]).fit(df, [0, 0, 0, 1, 1, 1])
    >>> clf.predict(df.iloc[[0, 3]]).tolist()
    [0, 1]
    """

    def __init__(self, kernel: Any = "gaussian", bandwidth: Any = "cv", *, mask: Any = None,
                 engine: str = "auto", empty: str = "raise",
                 tolerance: float | None = None, var_types: str | None = None,
                 ukernel: str = "aitchison-aitken", okernel: str = "li-racine") -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.mask = mask
        self.engine = engine
        self.empty = empty
        self.tolerance = tolerance
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel

    # DataFrames and var_types as in the regressors
    _validate_X = _KernelRegressor._validate_X
    _code = _KernelRegressor._code

    def fit(self, X: Any, y: Any, sample_weight: Any = None, *,
            persist: bool = False) -> KernelClassifier:
        """Store the training points and labels; choose the bandwidth if asked to.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            A DataFrame's categorical columns are categorical features (see
            ``var_types``). Or a Dask array or DataFrame, as in
            :meth:`NadarayaWatsonRegressor.fit <nadaraya.estimators.NadarayaWatsonRegressor.fit>`.
        y : array-like of shape (n_samples,)
            Class labels (any hashable type); or a Dask array or Series.
        sample_weight : array-like of shape (n_samples,), optional
        persist : bool, default False
            With Dask inputs: keep the training data in the cluster's memory.

        Returns
        -------
        self
        """
        if _dask.any_dask(X, y, sample_weight):
            if self.var_types is not None and set(str(self.var_types)) - {"c"}:
                raise NadarayaError(
                    f"var_types={self.var_types!r}: categorical features are not available "
                    "with Dask inputs; compute the data into memory (e.g. X.compute()) or "
                    "give every feature 'c'."
                )
            self._types = self._mixed = self._coding = None
            return _dask.fit_classifier(self, X, y, sample_weight, persist)
        X = self._code(X)
        X, y = validate_data(self, X, y, dtype=np.float64)
        self._types = check_var_types(self._types, X.shape[1])
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        codes = encoder.transform(y)
        onehot = np.zeros((y.shape[0], self.classes_.shape[0]))
        onehot[np.arange(y.shape[0]), codes] = 1.0
        self._n_outputs = onehot.shape[1]
        self._fit_smoother(X, onehot, sample_weight)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities at ``X``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            Rows sum to one; columns follow :attr:`classes_`. A Dask array for
            Dask queries.
        """
        check_is_fitted(self)
        if _dask.involved(self, X):
            return _dask.predict_proba(self, X)
        X = self._validate_X(X)
        proba, _, _ = self._solve(self._means(X), X)
        return np.clip(self._out(proba), 0.0, 1.0)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Mean accuracy at ``X`` (a lazy Dask scalar when ``X`` or ``y`` is a Dask collection)."""
        if _dask.any_dask(X, y, sample_weight):
            check_is_fitted(self)
            return _dask.score_classifier(self, X, y, sample_weight)
        return super().score(X, y, sample_weight)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (``-inf`` for probability zero)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class at each query, shape ``(n_queries,)`` (Dask for Dask queries)."""
        check_is_fitted(self)
        if _dask.involved(self, X):
            return _dask.predict_classes(self, X)
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
