"""Kernel regression estimators: Nadaraya-Watson and local polynomial."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._errors import NadarayaError
from . import _dask
from ._base import KernelSmoother
from ._direct import solve_rows
from ._intervals import IntervalsMixin
from ._marginal import MarginalEffectsMixin
from ._mixed import check_var_types
from ._summary import SummaryMixin
from ._tabular import all_numeric, code_fit, code_predict, frame_types, is_frame
from ._uncertainty import (
    pointwise_variance,
    residual_variance,
    weight_variance,
)

__all__ = ["LocalPolynomialRegressor", "NadarayaWatsonRegressor"]


class _KernelRegressor(MarginalEffectsMixin, SummaryMixin, IntervalsMixin, RegressorMixin,
                       KernelSmoother):
    """Fit, predict, standard errors and bands shared by the regressors."""

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _validate_X(self, X: Any) -> np.ndarray:
        coding = getattr(self, "_coding", None)
        if coding is not None and is_frame(X):
            X = code_predict(X, coding)
        return validate_data(self, X, reset=False, dtype=np.float64)

    def _code(self, X: Any) -> Any:
        """``X`` with categorical columns as codes; sets ``_types`` and ``_coding``."""
        self._coding = None
        if is_frame(X):
            types = check_var_types(self.var_types, X.shape[1]) or frame_types(X)
            if set(types) - {"c"} or not all_numeric(X):
                X, self._coding = code_fit(X, types)
        else:
            types = self.var_types
        self._types = types
        return X

    def fit(self, X: Any, y: Any, sample_weight: Any = None, *, persist: bool = False) -> Any:
        """Choose the bandwidth (if asked to) and store the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Or a Dask array or Dask DataFrame (numeric columns): then the fit
            runs on the cluster and the training data stay there (see
            :mod:`nadaraya.estimators`).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Or a Dask array, Series or DataFrame.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights, read as ``weight_type`` says. Frequency
            weights (the default): an integer weight acts as that many copies
            of the row, in the fit, in leave-one-out cross-validation (leaving
            a row out removes one copy) and in the sample size of the rules
            and criteria. Analytic weights: proportional to each row's
            precision; only their ratios matter. Or a Dask array or Series
            (frequency weights only).
        persist : bool, default False
            With Dask inputs: keep the training data in the cluster's memory
            (``dask.persist``) rather than recompute them from their source
            (files, say) at each pass.

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
            self = _dask.fit_regressor(self, X, y, sample_weight, persist)
            h = self.bandwidth_
            self.irrelevant_ = self._irrelevant(
                None if h is None else np.broadcast_to(h, (self.n_features_in_,)).copy(), [],
                self.n_features_in_)
            return self
        X = self._code(X)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        self._types = check_var_types(self._types, X.shape[1])
        self._y_1d = y.ndim == 1
        Y = y[:, None] if self._y_1d else y
        self._n_outputs = Y.shape[1]
        self._fit_smoother(X, Y, sample_weight)
        # sigma^2 in the targets' frame, for the standard errors
        self._sigma2 = residual_variance(self._y_train, self._loo_fit.fitted,
                                         self._loo_fit.diag, self._omega, self._w_unit)
        sigma2 = self._out(self._sigma2, power=2)
        self.residual_variance_ = float(sigma2[0]) if self._y_1d else sigma2
        return self

    def _shape(self, a: np.ndarray) -> np.ndarray:
        return a[..., 0] if self._y_1d else a

    def predict(self, X: Any, return_std: bool = False) -> Any:
        """Predict at ``X``; optionally with pointwise standard errors.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        return_std : bool, default False
            Also return the standard error of each prediction,
            ``sigma sqrt(sum_j S_xj^2 / w_j)`` (the variability of the
            estimate, not its bias; see :meth:`predict_interval`).

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            A Dask array for Dask queries (lazy); an ndarray for in-memory
            queries, also after a fit on Dask data.
        y_std : ndarray of the same shape
            Only with ``return_std=True`` (not with Dask).
        """
        check_is_fitted(self)
        if _dask.involved(self, X):
            if return_std:
                raise _dask.unavailable("predict(return_std=True)")
            return _dask.predict(self, X)
        X = self._validate_X(X)
        if not return_std:
            fitted, _, _ = self._solve(self._means(X), X)
            return self._shape(self._out(fitted))
        means, lse = self._means(X, return_lse=True)
        fitted, c, mu0, direct = self._solve_exact(means, X, coef=True)
        v, inexact = pointwise_variance(self, X, lse, c, mu0)
        v[direct.index] = direct.variance
        inexact[direct.index] = False
        local = self._local_rows(X)
        rows = np.flatnonzero(inexact)
        if local is not None and rows.size:
            # the squared-kernel moments cancel: the variance from the kernel weights
            again = solve_rows(self._design_, local, X, rows, self._n_outputs)[0]
            v[again.index] = again.variance
        elif self._design_.degree == 0 and self.mask is None and rows.size:
            v[rows] = weight_variance(self, X[rows])
        # the variance factor is in the weights' frame, sigma^2 in the targets'
        with np.errstate(invalid="ignore", over="ignore"):
            std = np.sqrt(v[:, None] * self._w_unit * self._sigma2[None, :])
        return self._shape(self._out(fitted)), self._shape(self._out(std))

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """``R^2`` of the predictions at ``X`` (see :meth:`sklearn.base.RegressorMixin.score`).

        A lazy Dask scalar when ``X`` or ``y`` is a Dask collection.
        """
        if _dask.any_dask(X, y, sample_weight):
            check_is_fitted(self)
            return _dask.score_regressor(self, X, y, sample_weight)
        return super().score(X, y, sample_weight)


class NadarayaWatsonRegressor(_KernelRegressor):
    """Nadaraya-Watson kernel regression: the kernel-weighted mean of the targets.

    ``yhat(x) = sum_j K(x, x_j) w_j y_j / sum_j K(x, x_j) w_j``, computed by
    :func:`nadaraya.smooth` (exact, in bounded memory). The local-constant
    estimator of statsmodels' ``KernelReg(reg_type="lc")``.

    Parameters
    ----------
    kernel : str, Kernel or callable, default "gaussian"
        A radial kernel name (``"gaussian"``, ``"epanechnikov"``, ``"tricube"``,
        ``"uniform"``, ``"laplacian"``, ``"cauchy"``) whose scale is
        ``bandwidth``; or any kernel object of :mod:`nadaraya.kernels`
        (then ``bandwidth=None``).
    bandwidth : float, array of shape (n_features,), str or None, default "cv"
        A number, one per feature (``inf`` smooths a feature out),
        ``"scott"``, ``"silverman"``, ``"dpi"`` (local linear only, see
        :class:`LocalPolynomialRegressor`), or a criterion minimised by a bracketed
        search on ``log h`` (per feature when there are several; with at least
        as many features as samples, or total sample weight, too few to fix
        one bandwidth each, on one factor of the features' rule-of-thumb
        bandwidths):
        ``"cv"`` (exact leave-one-out squared error), ``"gcv"``, ``"aicc"``.
    mask : Mask or None, default None
        Visible set of each query (e.g. ``KNearest(k)``), as in :func:`nadaraya.smooth`.
    engine : str, default "auto"
        Engine of :func:`nadaraya.smooth`.
    empty : {"raise", "nan", "nearest"}, default "raise"
        What to do for a query that no training point weighs (compact kernels).
    tolerance : float in (0, 1) or None, default None
        Passed to :func:`nadaraya.smooth` in the bandwidth search, the
        leave-one-out pass (and so the smoother diagonal) and prediction:
        each kernel-weighted mean of the fit's moments ends within
        ``tolerance`` times the largest moment of its column, by a proven
        bound (the fast Gauss transform or binned sums: O(n) rather than
        O(n^2) per evaluation). None: exact sums; a fit far beyond the
        exact engines' reach then warns, naming this parameter.
    var_types : str or None, default None
        The type of each feature, one letter each as in statsmodels'
        ``var_type``: ``'c'`` continuous, ``'u'`` unordered categorical,
        ``'o'`` ordered categorical (integer ranks). None: every feature is
        continuous, or, for a pandas DataFrame, the types its dtypes give
        (``category`` unordered, ordered categorical ordered, bool unordered,
        numbers continuous; object and string columns are refused: say
        ``astype("category")``). Categorical features enter the kernel only,
        through ``ukernel`` or ``okernel``; their entry of ``bandwidth`` is the
        smoothing parameter ``lambda`` (0: each level on its own; the upper end of
        its range: the feature is smoothed out). See Notes.
    ukernel : {"aitchison-aitken", "li-racine"}, default "aitchison-aitken"
        Kernel of the unordered features (R np's ``ukertype``, whose default
        this is): :class:`~nadaraya.kernels.AitchisonAitken` (``lambda`` in
        ``[0, (c - 1) / c]``, ``c`` levels among the training rows) or
        :class:`~nadaraya.kernels.LiRacine` (``lambda`` in ``[0, 1]``). Both
        give a regression the same family of fits (a level apart weighs
        ``lambda / ((c - 1)(1 - lambda))`` or ``lambda`` of the query's own); only
        the scale of ``lambda`` differs.
    okernel : {"li-racine", "wang-van-ryzin"}, default "li-racine"
        Kernel of the ordered features (R np's ``okertype``, whose default this
        is for regression): :class:`~nadaraya.kernels.LiRacineOrdered`
        (``lambda ** |gap|``, ``lambda`` in ``[0, 1]``) or
        :class:`~nadaraya.kernels.WangVanRyzin` (``lambda`` in ``[0, 1)``; it
        cannot smooth a feature out).
    weight_type : {"frequency", "analytic"}, default "frequency"
        What ``sample_weight`` means. ``"frequency"``: counts, an integer
        weight is that many copies of the row (R's ``npreg`` and Stata's
        ``fweight``); their total is the sample size, and leaving a row out
        in cross-validation removes one copy, so weights scaled by 1000 act
        as 1000 copies of the data and the CV bandwidth shrinks.
        ``"analytic"``: weights proportional to the precision (inverse
        variance) of each row's target (Stata's ``aweight``): the sample
        size is the number of rows, leaving a row out removes all of its
        weight, and the noise variance of a row is ``residual_variance_``
        times the mean weight over its weight. Scaling every weight by the
        same factor changes nothing.

    Attributes
    ----------
    bandwidth_ : float or ndarray of shape (n_features,)
        The bandwidth used: ``h`` of each continuous feature, ``lambda`` of each
        categorical one.
    cv_results_ : dict or None
        Every evaluation of the bandwidth search: ``"bandwidth"``,
        ``"score"``, ``"feature"`` (searched feature; -1 for a move of all of
        them), ``"criterion"``, ``"at_bound"`` and ``"converged"``: False
        when the search ran out of its budget (500 evaluations per searched
        bandwidth) and stopped, with a ``ConvergenceWarning``, at the best
        bandwidth it evaluated.
    cv_score_ : float
        Leave-one-out mean squared error at ``bandwidth_``.
    effective_dof_ : float
        ``trace(S)``, the effective degrees of freedom.
    residual_variance_ : float or ndarray of shape (n_outputs,)
        ``RSS / (n - trace(S))`` (NaN when ``trace(S) >= n``).
    X_fit_ : ndarray of shape (n_train, n_features)
        Training points (rows with zero weight dropped); categorical features
        as codes.
    irrelevant_ : ndarray of str, shape (n_irrelevant,)
        Features smoothed out of the fit (Hall, Li and Racine 2007): an
        infinite bandwidth (given, or chosen by the search, whose upper end,
        100 times the feature's range, stands for ``inf``: the criterion is
        evaluated there with the feature smoothed out, and for local linear
        fits that is a global linear term in it), or a categorical ``lambda``
        at the upper end of its range. Named by ``feature_names_in_`` (else
        ``x0``, ``x1``, ...).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only for a DataFrame whose column names are strings.

    Notes
    -----
    Mixed data (``var_types``, or a DataFrame with categorical columns): the
    kernel is the product of the continuous kernel on the continuous features
    and Li and Racine's categorical kernels on the others, as in R's
    ``npreg`` and statsmodels' ``KernelReg``; ``bandwidth="cv"`` searches every
    ``h`` and ``lambda`` jointly (``lambda`` on ``logit(lambda / upper)``, its ends
    reached exactly), and a ``lambda`` at its upper end reports the feature in
    :attr:`irrelevant_`. A DataFrame's categories are coded at ``fit`` and
    ``predict`` codes its queries with the same levels, by value; a level
    ``predict`` sees that the column did not have at ``fit`` is refused by
    column and level (a level among the column's categories at ``fit`` but
    absent from its rows gets its weight from ``lambda`` alone, as does a code
    unseen at ``fit`` in a numeric array), and so are missing values in a
    categorical column. Local polynomial fits are polynomial in the
    continuous features only (local constant in the categorical ones, Li and
    Racine 2004).

    Targets of any magnitude give the fit of their rescaled copies: the fit
    works on them divided by a power of two, and so it does on the sample
    weights, whose scale changes no prediction. A squared quantity beyond the
    float range (``cv_score_``, ``residual_variance_`` or a score in
    ``cv_results_`` for targets beyond about ``1e154``) is reported as
    ``inf``; predictions and standard errors are formed in that frame, with no
    overflow on the way.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import NadarayaWatsonRegressor
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 6, (200, 1)); y = 2 * np.sin(x[:, 0]) + rng.normal(size=200)
    >>> model = NadarayaWatsonRegressor().fit(x, y)
    >>> 0.1 < model.bandwidth_ < 1.0
    True

    Mixed data from a DataFrame (a ``category`` column is unordered):

    >>> import pandas as pd
    >>> df = pd.DataFrame({"x": x[:, 0], "shop": pd.Categorical(rng.choice(["a", "b"], 200))})
    >>> model = NadarayaWatsonRegressor().fit(df, y + (df["shop"] == "a"))
    >>> model.feature_names_in_.tolist(), list(model.irrelevant_)
    (['x', 'shop'], [])
    """

    def __init__(self, kernel: Any = "gaussian", bandwidth: Any = "cv", *, mask: Any = None,
                 engine: str = "auto", empty: str = "raise",
                 tolerance: float | None = None, var_types: str | None = None,
                 ukernel: str = "aitchison-aitken", okernel: str = "li-racine",
                 weight_type: str = "frequency") -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.mask = mask
        self.engine = engine
        self.empty = empty
        self.tolerance = tolerance
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel
        self.weight_type = weight_type


class LocalPolynomialRegressor(_KernelRegressor):
    """Local polynomial regression (local linear by default).

    At each query ``x0`` a polynomial of degree ``degree`` in ``x - x0`` is
    fitted by kernel-weighted least squares and its value at ``x0`` is the
    prediction. Degree 1 removes the boundary bias of Nadaraya-Watson (degree
    0). The weighted sums of ``1, x, x x^T, y, x y`` come from one engine
    pass on augmented values; a small solve per query follows. Queries whose
    local problem those sums cannot fix to rounding (an ill-conditioned or
    nearly rank-deficient local covariance, or a query far from the data's
    centre on a tiny local spread) are solved again by least squares from
    their kernel weights (not with a user ``mask``). Matches statsmodels'
    ``KernelReg(reg_type="ll")`` for degree 1.

    Directions the local data cannot fix: where a query's kernel-weighted
    neighbours spread in fewer directions than the polynomial has slopes
    (fewer distinct points than it needs, or points of negligible kernel
    weight), the local covariance of the monomials is rank-deficient or
    nearly so. The slope along each of its eigen-directions, of eigenvalue
    ``lambda``, is multiplied by ``x^8 / (1 + x^8)`` with ``x = lambda / tau``
    and ``tau = 1e-10 max(lambda_max, 1)`` in coordinates scaled by the
    bandwidth (or by a feature's spread where that is smaller): kept where
    the neighbours spread by more than about ``1e-5`` of their widest spread
    and ``1e-5`` bandwidths, dropped below, so the fit is the local mean along
    such directions. The factor is continuous, so rounding moves the fit in
    proportion and never switches a direction on or off: integer sample
    weights and repeated rows give the same fit to rounding, in any row order.

    Parameters
    ----------
    degree : int, default 1
        Degree of the local polynomial (0 is Nadaraya-Watson).
    kernel, bandwidth, mask, engine, empty, tolerance, var_types, ukernel, okernel, weight_type
        As in :class:`NadarayaWatsonRegressor`; ``bandwidth="dpi"`` (or
        ``"plug-in"``), for ``degree=1`` on one feature with the Gaussian
        kernel, is Ruppert, Sheather and Wand's (1995) direct plug-in, the
        value of R's ``KernSmooth::dpill``. Categorical features enter the
        kernel only: the polynomial is in the continuous features (Li and
        Racine 2004; statsmodels' ``KernelReg`` puts the categorical codes in it
        too).
    ridge : float, default 0.0
        Tikhonov term added to the local covariance of the monomials, in
        coordinates scaled by the bandwidth (slopes only, never the
        intercept). Whatever its value, directions the local data cannot fix
        are filtered out as described above.

    Attributes
    ----------
    bandwidth_, cv_results_, cv_score_, effective_dof_, residual_variance_, X_fit_
        As in :class:`NadarayaWatsonRegressor`.
    irrelevant_, n_features_in_, feature_names_in_
        As in :class:`NadarayaWatsonRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import LocalPolynomialRegressor
    >>> x = np.linspace(0, 1, 50)[:, None]; y = 3 * x[:, 0] + 1
    >>> model = LocalPolynomialRegressor(bandwidth=0.1).fit(x, y)
    >>> bool(np.allclose(model.predict(x), y))
    True
    """

    def __init__(self, degree: int = 1, kernel: Any = "gaussian", bandwidth: Any = "cv", *,
                 ridge: float = 0.0, mask: Any = None, engine: str = "auto",
                 empty: str = "raise", tolerance: float | None = None,
                 var_types: str | None = None, ukernel: str = "aitchison-aitken",
                 okernel: str = "li-racine", weight_type: str = "frequency") -> None:
        self.degree = degree
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.ridge = ridge
        self.mask = mask
        self.engine = engine
        self.empty = empty
        self.tolerance = tolerance
        self.var_types = var_types
        self.ukernel = ukernel
        self.okernel = okernel
        self.weight_type = weight_type

    def _degree(self) -> int:
        if not (isinstance(self.degree, int | np.integer) and not isinstance(self.degree, bool)
                and 0 <= self.degree <= 6):
            raise NadarayaError(
                f"degree must be an integer from 0 to 6; got {self.degree!r}."
            )
        return int(self.degree)

    def _ridge(self) -> float:
        if not (isinstance(self.ridge, int | float) and np.isfinite(self.ridge)
                and self.ridge >= 0):
            raise NadarayaError(f"ridge must be a finite number >= 0; got {self.ridge!r}.")
        return float(self.ridge)
