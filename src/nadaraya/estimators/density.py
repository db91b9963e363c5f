"""Kernel density estimation on the engine's unnormalized sums, for continuous and mixed data.

``f(x) = sum_j w_j K_h(x - x_j) / sum_j w_j`` with the normalized product
kernel of :mod:`._density_kernel` (continuous factors normalized by their
bandwidths, categorical factors summing to one over the levels). The sums are
taken in the log domain (the engine's ``lse``), so a tiny density is its
logarithm, not zero.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._errors import NadarayaError
from ..engine.certified import check_tolerance
from . import _frame
from ._density_cv import CV_CRITERIA, check_cv_ls, log_kernel_sums, objective_for
from ._density_fit import (
    check_method,
    check_spread,
    density_model,
    levels_of,
    numeric_bandwidth,
    plugin_bandwidth,
    rule_or_plugin,
    search_density_bandwidth,
    spread_scale,
    start_fit,
    warn_unsettled,
)
from ._density_kernel import DensityKernel
from ._density_sample import sample_rows
from ._mixed import check_var_types
from ._tabular import all_numeric, code_fit, code_predict, frame_types, is_frame

__all__ = ["KernelDensity"]


class KernelDensity(BaseEstimator):
    """Kernel density estimate for continuous, unordered and ordered features.

    Parameters
    ----------
    kernel : str, default "gaussian"
        Radial kernel of the continuous features (``"gaussian"``,
        ``"epanechnikov"``, ``"laplacian"``, ``"tricube"``, ``"uniform"``,
        ``"matern32"``, ``"matern52"``, ``"cauchy"``); several continuous
        features share one radial kernel of ``||(x - x_j) / h||``.
    bandwidth : {"cv_ml", "cv_ls", "sheather-jones", "sj", "scott", "silverman"}, float \
or array of shape (n_features,), default "cv_ml"
        ``"cv_ml"``: leave-one-out likelihood cross-validation (np's
        ``npudensbw`` default); ``"cv_ls"``: least-squares cross-validation
        (Gaussian kernel); ``"sheather-jones"`` (or ``"sj"``): plug-in
        bandwidths of the continuous features, for the Gaussian kernel; one
        continuous feature gets Sheather and Jones' (1991) solve-the-equation
        rule (R's ``bw.SJ``), 2 to 6 get the diagonal direct plug-in of Wand and
        Jones (1994), ``h`` minimizing ``(4 pi)^(-d/2) / (n prod_k h_k) + 1/4
        sum_ij h_i^2 h_j^2 psi_ij`` with the curvature functionals ``psi_ij =
        int f_ii f_jj`` estimated at two-stage normal-reference pilot
        bandwidths (R's ``ks::Hpi.diag``: ``h_k = sqrt(H_kk)``; see
        :mod:`nadaraya.estimators._plugin_diag`); the ``lambda`` of categorical
        features are then chosen by likelihood cross-validation with those
        ``h`` held. ``"scott"``, ``"silverman"``: the rules (all features
        continuous). Numbers: ``h`` per continuous feature and ``lambda`` per
        categorical one (a single number for all-continuous data).
    var_types : str, optional
        One letter per feature: ``'c'`` continuous, ``'u'`` unordered, ``'o'``
        ordered (statsmodels' ``var_type``). Default: a DataFrame's dtypes, else
        all continuous.
    ukernel : {"aitchison-aitken", "li-racine"}, default "aitchison-aitken"
        Kernel of unordered features (Li-Racine divided by ``1 + (c - 1) lambda``).
    okernel : {"wang-van-ryzin", "li-racine"}, default "wang-van-ryzin"
        Kernel of ordered features (Li-Racine divided, per sample, by its sum
        over the observed levels).
    tolerance : float, optional
        Let certified fast sums (fast Gauss transform, binning) compute every
        kernel sum within this relative bound; default exact.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        ``h`` or ``lambda`` per feature.
    var_types_ : str
        The feature types used.
    cv_score_ : float or None
        The criterion at ``bandwidth_`` when it was searched.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only for DataFrames with string column names.

    Notes
    -----
    ``score_samples`` returns ``log f``: ``-inf`` exactly where the estimate is
    zero (outside a compact kernel's reach of every sample, at a level a zero
    ``lambda`` gives no weight, or beyond the float range of the distance);
    never NaN. An unordered feature's code not seen at fit counts as a level
    apart from every sample. Samples of zero weight are dropped.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import KernelDensity
    >>> x = np.random.default_rng(0).normal(size=(200, 1))
    >>> kde = KernelDensity(bandwidth="sheather-jones").fit(x)
    >>> log_f = kde.score_samples([[0.0], [1.0]])
    >>> draws = kde.sample(5, random_state=0)
    """

    def __init__(self, kernel: str = "gaussian", bandwidth: Any = "cv_ml", *,
                 var_types: str | None = None, ukernel: str = "aitchison-aitken",
                 okernel: str = "wang-van-ryzin", tolerance: float | None = None) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel
        self.tolerance = tolerance

    # -- data ----------------------------------------------------------------
    def _code(self, X: Any) -> Any:
        self._coding = None
        if is_frame(X):
            types = check_var_types(self.var_types, X.shape[1]) or frame_types(X)
            if set(types) - {"c"} or not all_numeric(X):
                X, self._coding = code_fit(X, types)
            self._types = types
        else:
            self._types = self.var_types
        return X

    def _validate_X(self, X: Any) -> np.ndarray:
        coding = getattr(self, "_coding", None)
        if coding is not None and is_frame(X):
            X = code_predict(X, coding)
        return validate_data(self, X, reset=False, dtype=np.float64, ensure_min_samples=0)

    def _model(self, h: np.ndarray) -> DensityKernel:
        return density_model(self._name, self.var_types_, self._levels, self.ukernel,
                             self.okernel)(h)

    # -- fitting -------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> KernelDensity:
        """Choose the bandwidth (if asked to) and store the samples.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights (frequencies for the rules and Sheather-Jones).

        Returns
        -------
        self
        """
        X = self._code(X)
        name, tol, X, types = start_fit(self, X, self._types)
        w, keep = _frame.positive_weights(sample_weight, X)
        X, w = X[keep], w[keep]
        levels = levels_of(X, types)
        method = check_method(self.bandwidth)
        make = density_model(name, types, levels, self.ukernel, self.okernel)
        self.cv_score_ = None
        if method in CV_CRITERIA:
            if method == "cv_ls":
                check_cv_ls(name)
            check_spread(X, types, method)
            scale = 1.0 if method == "cv_ml" else spread_scale(X, w, types)
            h, result = search_density_bandwidth(
                lambda Xr, wr: objective_for(method, make, Xr, wr, tol), X, w, types,
                self.ukernel, self.okernel, scale)
            self.cv_score_ = float(objective_for(method, make, X, w, tol)(h))
            warn_unsettled(result, method)
        elif method == "sheather-jones" and set(types) - {"c"}:
            check_spread(X, types, method)
            h, result = plugin_bandwidth(X, w, types, self.ukernel, self.okernel,
                                         lambda Xr, wr: objective_for("cv_ml", make, Xr, wr, tol))
            self.cv_score_ = float(objective_for("cv_ml", make, X, w, tol)(h))
            warn_unsettled(result, method)
        elif method is not None:
            check_spread(X, types, method)
            h = rule_or_plugin(method, X, w, types)
        else:
            h = numeric_bandwidth(self.bandwidth, types, levels, self.ukernel, self.okernel)
        self.var_types_ = types
        self.bandwidth_ = np.asarray(h, dtype=float).copy()
        self._name = name
        self._levels = levels
        self._X = X
        self._w = w
        self._log_total = math.log(float(w.sum()))
        return self

    # -- evaluating ----------------------------------------------------------
    def score_samples(self, X: Any) -> np.ndarray:
        """Log density at each row of ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_queries, n_features)

        Returns
        -------
        ndarray of shape (n_queries,)
            ``log f(x)``; ``-inf`` where the estimate is zero, never NaN.
        """
        check_is_fitted(self)
        Q = self._validate_X(X)
        if Q.shape[0] == 0:
            return np.zeros(0)
        model = self._model(self.bandwidth_)
        logw = np.log(self._w)
        extra = model.key_log_weights(self._X)
        if extra is not None:
            logw = logw + extra
        out = np.full(Q.shape[0], -np.inf)
        near = ~model.beyond_support(Q, self._X)
        if near.any():
            sums = log_kernel_sums(Q[near], self._X, model.kernel(), logw,
                                   tolerance=check_tolerance(self.tolerance))
            out[near] = sums + (model.log_norm() - self._log_total)
        return out

    def score(self, X: Any, y: Any = None) -> float:
        """Total log-likelihood of the rows of ``X`` (``-inf`` if one has density zero).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        y : None
            Ignored.

        Returns
        -------
        float
        """
        return float(np.sum(self.score_samples(X)))

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """Draw samples from the estimate.

        A sample row is drawn with probability ``w_j / sum w``, then each
        continuous block moves by the kernel's noise (Gaussian, Laplacian and
        the compact kernels) and each categorical feature moves to a level
        with the kernel's probabilities.

        Parameters
        ----------
        n_samples : int, default 1
        random_state : int, RandomState or None

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Categorical features as their codes.
        """
        check_is_fitted(self)
        if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) \
                or n_samples < 0:
            raise NadarayaError(f"n_samples must be an integer >= 0; got {n_samples!r}.")
        rng = check_random_state(random_state)
        return sample_rows(self._model(self.bandwidth_), self._X, self._w, int(n_samples), rng)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.estimator_type = "density_estimator"
        return tags
