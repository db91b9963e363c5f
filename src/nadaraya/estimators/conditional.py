"""Conditional density ``f(y | x)``, its CDF and quantiles for mixed data (np's npcdens, npqreg)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._errors import NadarayaError
from ..engine.certified import check_tolerance
from . import _frame
from ._bandwidth import rule_bandwidth
from ._conditional import ConditionalModel, conditional_cv_ml
from ._conditional_cv import conditional_cv_ls
from ._density_cv import check_cv_ls
from ._density_fit import (
    check_method,
    check_spread,
    density_model,
    levels_of,
    numeric_bandwidth,
    search_density_bandwidth,
    spread_scale,
    start_fit,
    warn_unsettled,
)
from ._density_kernel import DensityKernel
from ._mixed import check_var_types

__all__ = ["ConditionalDensity", "ConditionalQuantileRegressor"]

_METHODS = ("cv_ml", "cv_ls", "scott", "silverman")


class ConditionalDensity(BaseEstimator):
    """Kernel estimate of the density of ``y`` given ``x``, its CDF and quantiles.

    ``f(y | x) = f(x, y) / f(x)`` with the normalized product kernels of
    :class:`KernelDensity` (statsmodels' ``KDEMultivariateConditional``, R's
    ``npcdens``); ``F(y | x)`` with the CDF kernels of ``y``
    (:meth:`cdf`) and its inverse for one dependent variable
    (:meth:`predict_quantile`, R's ``npqreg``).

    Parameters
    ----------
    kernel : str, default "gaussian"
        Radial kernel of the continuous features; the continuous ``y`` and the
        continuous ``x`` each get one. The CDF and quantiles of a continuous
        ``y`` need ``"gaussian"``.
    bandwidth : {"cv_ml", "cv_ls", "scott", "silverman"} or array of shape \
(k_dep + k_indep,), default "cv_ml"
        Bandwidths of ``y``'s variables first, then ``x``'s (statsmodels'
        order): ``h`` of continuous ones, ``lambda`` of categorical ones.
        ``"cv_ml"``: leave-one-out conditional likelihood (np's default).
        ``"cv_ls"``: least-squares cross-validation (Hall, Racine and Li
        2004; statsmodels' ``bw="cv_ls"``, np's ``bwmethod="cv.ls"``), for
        ``kernel="gaussian"``; its sums are exact (``tolerance`` is not used
        in the search) and cost ``O(n^3)`` per evaluation.
        ``"scott"``, ``"silverman"``: rules, continuous variables only.
    dep_types, var_types : str, optional
        Types (``'c'``, ``'u'``, ``'o'``) of ``y``'s and ``X``'s columns; default all
        continuous.
    ukernel : {"aitchison-aitken", "li-racine"}, default "aitchison-aitken"
    okernel : {"wang-van-ryzin", "li-racine"}, default "wang-van-ryzin"
    tolerance : float, optional
        Certified fast sums within this relative bound; default exact.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (k_dep + k_indep,)
    cv_score_ : float or None
        The criterion at ``bandwidth_`` when searched: ``-sum_i w_i log f_{-i}(y_i | x_i) / W``
        for ``"cv_ml"``; for ``"cv_ls"``
        ``sum_i w_i [G_{-i}(x_i) / mu_{-i}(x_i)^2 - 2 f_{-i}(x_i, y_i) / mu_{-i}(x_i)] / W``
        (statsmodels' ``imse``; leaving a row out removes one unit of its weight).
    n_features_in_ : int
        Number of columns of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import ConditionalDensity
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 3, (150, 1)); y = np.sin(x[:, 0]) + 0.3 * rng.normal(size=150)
    >>> cd = ConditionalDensity(bandwidth=[0.2, 0.3]).fit(x, y)
    >>> log_f = cd.score_samples([[1.0]], [0.8])
    >>> median = cd.predict_quantile([[1.0]], 0.5)
    """

    def __init__(self, kernel: str = "gaussian", bandwidth: Any = "cv_ml", *,
                 dep_types: str | None = None, var_types: str | None = None,
                 ukernel: str = "aitchison-aitken", okernel: str = "wang-van-ryzin",
                 tolerance: float | None = None) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.dep_types = dep_types
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel
        self.tolerance = tolerance

    def _y(self, y: Any, n: int) -> np.ndarray:
        Y = np.asarray(y, dtype=float)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.ndim != 2 or Y.shape[0] != n or Y.shape[1] == 0:
            raise NadarayaError(
                f"y must have shape (n_samples,) or (n_samples, k_dep) with n_samples = {n}; "
                f"got shape {np.shape(y)}."
            )
        if not np.isfinite(Y).all():
            raise NadarayaError("y holds NaN or infinite values; drop those rows.")
        return Y

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> ConditionalDensity:
        """Choose the bandwidth (if asked to) and store the samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, k_indep)
        y : array-like of shape (n_samples,) or (n_samples, k_dep)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        name, tol, X, xt = start_fit(self, X, self.var_types)
        Y = self._y(y, X.shape[0])
        yt = check_var_types(self.dep_types, Y.shape[1]) or "c" * Y.shape[1]
        w, keep = _frame.positive_weights(sample_weight, X)
        k = Y.shape[1]
        Z = np.column_stack([Y, X])[keep]
        w = w[keep]
        types = yt + xt
        levels = levels_of(Z, types)
        blocks = [[j for j in range(k) if types[j] == "c"],
                  [j for j in range(k, len(types)) if types[j] == "c"]]
        make = density_model(name, types, levels, self.ukernel, self.okernel, blocks)
        method = check_method(self.bandwidth, _METHODS)
        self.cv_score_ = None
        if method in ("cv_ml", "cv_ls"):
            if method == "cv_ls":
                check_cv_ls(name)
            check_spread(Z, types, method)

            def build(Zr: np.ndarray, wr: np.ndarray) -> Any:
                if method == "cv_ml":
                    return conditional_cv_ml(make, k, Zr, wr, tol)
                return conditional_cv_ls(make, k, Zr, wr)

            scale = 1.0 if method == "cv_ml" else spread_scale(Z[:, :k], w, yt)
            h, result = search_density_bandwidth(build, Z, w, types, self.ukernel,
                                                 self.okernel, scale)
            self.cv_score_ = float(build(Z, w)(h))
            warn_unsettled(result, method)
        elif method is not None:
            check_spread(Z, types, method)
            if set(types) - {"c"}:
                raise NadarayaError(
                    f"bandwidth={method!r} is a rule for continuous features; y and X have "
                    f"types {yt!r} and {xt!r}. Use bandwidth='cv_ml' (or 'cv_ls') or one value per "
                    "variable."
                )
            h = rule_bandwidth(method, Z, w)
        else:
            h = numeric_bandwidth(self.bandwidth, types, levels, self.ukernel, self.okernel)
        self.bandwidth_ = np.asarray(h, dtype=float).copy()
        self.dep_types_, self.var_types_ = yt, xt
        self._parts = (name, types, levels, blocks)
        self._Z, self._w = Z, w
        self._k = k
        self._log_total = math.log(float(w.sum()))
        return self

    def _model(self) -> ConditionalModel:
        name, types, levels, blocks = self._parts
        joint = DensityKernel(name, types, self.bandwidth_, levels, self.ukernel, self.okernel,
                              blocks)
        return ConditionalModel(joint, self._k)

    def _queries(self, X: Any, y: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        Y = self._y(y, X.shape[0])
        if Y.shape[1] != self._k:
            raise NadarayaError(
                f"y has {Y.shape[1]} column(s) but the fit had {self._k}; give the same "
                "dependent variables."
            )
        return np.column_stack([Y, X])

    def score_samples(self, X: Any, y: Any) -> np.ndarray:
        """``log f(y | x)`` for each row.

        Parameters
        ----------
        X : array-like of shape (n_queries, k_indep)
        y : array-like of shape (n_queries,) or (n_queries, k_dep)

        Returns
        -------
        ndarray of shape (n_queries,)
            ``-inf`` where the joint estimate is zero or ``x`` has no weight; never NaN.
        """
        Q = self._queries(X, y)
        return self._model().log_pdf(Q, self._Z, self._w, check_tolerance(self.tolerance))

    def score(self, X: Any, y: Any) -> float:
        """Total conditional log-likelihood ``sum log f(y_i | x_i)``.

        Returns
        -------
        float
        """
        return float(np.sum(self.score_samples(X, y)))

    def cdf(self, X: Any, y: Any) -> np.ndarray:
        """Conditional distribution function ``F(y | x)`` for each row.

        Parameters
        ----------
        X : array-like of shape (n_queries, k_indep)
        y : array-like of shape (n_queries,) or (n_queries, k_dep)

        Returns
        -------
        ndarray of shape (n_queries,)
            NaN where ``x`` has no weight (outside a compact kernel's reach).
        """
        Q = self._queries(X, y)
        return self._model().cdf(Q, self._Z, self._w, check_tolerance(self.tolerance))

    def predict_quantile(self, X: Any, q: float = 0.5) -> np.ndarray:
        """The conditional ``q`` quantile of the one dependent variable at each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_queries, k_indep)
        q : float in (0, 1), default 0.5

        Returns
        -------
        ndarray of shape (n_queries,)
            The root of ``F(y | x) = q`` (a level, for a categorical ``y``); NaN
            where ``x`` has no weight.
        """
        check_is_fitted(self)
        if isinstance(q, bool) or not isinstance(q, int | float | np.floating) or \
                not 0.0 < float(q) < 1.0:
            raise NadarayaError(f"q must be a number in (0, 1); got {q!r}.")
        Xq = validate_data(self, X, reset=False, dtype=np.float64)
        return self._model().quantile(Xq, float(q), self._Z, self._w,
                                      check_tolerance(self.tolerance))


class ConditionalQuantileRegressor(RegressorMixin, BaseEstimator):
    """Predict the conditional ``quantile`` of ``y`` given ``x`` (R's ``npqreg``).

    A :class:`ConditionalDensity` of one continuous ``y`` (Gaussian kernel)
    whose ``predict`` is :meth:`ConditionalDensity.predict_quantile`.

    Parameters
    ----------
    quantile : float in (0, 1), default 0.5
    bandwidth : {"cv_ml", "cv_ls", "scott", "silverman"} or array of shape \
(1 + n_features,), default "cv_ml"
        ``y``'s bandwidth first, then ``X``'s; the methods as for
        :class:`ConditionalDensity`.
    var_types : str, optional
        Types of ``X``'s columns (``'c'``, ``'u'``, ``'o'``).
    ukernel, okernel, tolerance
        As for :class:`ConditionalDensity`.

    Attributes
    ----------
    density_ : ConditionalDensity
        The fitted conditional density.
    bandwidth_ : ndarray of shape (1 + n_features,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import ConditionalQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 3, (150, 1)); y = np.sin(x[:, 0]) + 0.3 * rng.normal(size=150)
    >>> upper = ConditionalQuantileRegressor(0.9, bandwidth="scott").fit(x, y).predict(x[:3])
    """

    def __init__(self, quantile: float = 0.5, *, bandwidth: Any = "cv_ml",
                 var_types: str | None = None, ukernel: str = "aitchison-aitken",
                 okernel: str = "wang-van-ryzin", tolerance: float | None = None) -> None:
        self.quantile = quantile
        self.bandwidth = bandwidth
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel
        self.tolerance = tolerance

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> ConditionalQuantileRegressor:
        """Fit the conditional density of ``y`` given ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        q = self.quantile
        if isinstance(q, bool) or not isinstance(q, int | float | np.floating) or \
                not 0.0 < float(q) < 1.0:
            raise NadarayaError(f"quantile must be a number in (0, 1); got {q!r}.")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        self.density_ = ConditionalDensity(
            "gaussian", self.bandwidth, dep_types="c", var_types=self.var_types,
            ukernel=self.ukernel, okernel=self.okernel, tolerance=self.tolerance,
        ).fit(X, y, sample_weight)
        self.bandwidth_ = self.density_.bandwidth_
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The conditional ``quantile`` at each row of ``X``, shape ``(n_queries,)``.

        NaN where ``x`` has no weight.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.density_.predict_quantile(X, float(self.quantile))
