"""Marginal effects of the kernel regressors: gradients, average effects, level effects.

The users of R's ``np`` (``npreg(..., gradients=TRUE)``) and of statsmodels'
``KernelReg`` (``fit()`` returning ``(mean, mfx)``) find here the same
quantities, at the fitted bandwidth:

* :meth:`MarginalEffectsMixin.gradient`: ``d yhat / d x_d`` at each query,
  per continuous feature (see :mod:`._gradient` for how it is computed);
* :meth:`MarginalEffectsMixin.average_marginal_effects`: its mean over the
  training rows (or given rows), with a standard error;
* :meth:`MarginalEffectsMixin.level_effects`: for a categorical feature, the
  change of the fit when the feature is set to each level instead of a base one
  (standard errors in :mod:`._level_variance`).

Standard errors describe the variability of the estimates at the fitted
bandwidth (as :meth:`predict`'s): ``"asymptotic"`` is ``sigma sqrt(sum_j
a_xj^2 / w_j)`` from the derivative's linear weights ``a_xj``;
``"bootstrap"`` the spread of the wild bootstrap (random-sign residuals, as
:meth:`bootstrap`), robust to heteroscedastic noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._errors import NadarayaError
from . import _dask
from ._gradient import continuous, continuous_features, gradient_pass, linear_weights
from ._level_variance import asymptotic_std, bootstrap_std
from ._slope_variance import nw_gaussian_variance, slope_variance

__all__ = ["MarginalEffectsMixin"]

_METHODS = ("asymptotic", "bootstrap")


def _check_method(method: Any, n_resamples: Any) -> None:
    if method not in _METHODS:
        raise NadarayaError(f"method must be 'asymptotic' or 'bootstrap'; got {method!r}.")
    if method == "bootstrap" and not (isinstance(n_resamples, int | np.integer)
                                      and not isinstance(n_resamples, bool) and n_resamples >= 2):
        raise NadarayaError(f"n_resamples must be an integer >= 2; got {n_resamples!r}.")


class MarginalEffectsMixin:
    """Gradients, average marginal effects and level effects of a fitted kernel regressor."""

    # -- inputs ------------------------------------------------------------------
    def _effect_queries(self, X: Any, what: str) -> np.ndarray:
        check_is_fitted(self)
        if _dask.involved(self, X):
            raise _dask.unavailable(what)
        try:
            Xv = self._validate_X(X)
        except NadarayaError:
            raise
        except ValueError as err:
            raise NadarayaError(
                f"X of {what}: {err} Give at least one row of finite numbers, one column per "
                f"feature the model was fitted on ({self.n_features_in_})."
            ) from None
        return Xv

    def _check_differentiable(self) -> None:
        kernel = self.kernel
        if self._design_.degree == 0 and isinstance(kernel, str) and kernel.lower() == "uniform":
            raise NadarayaError(
                "kernel='uniform': a Nadaraya-Watson fit with the box kernel is a step "
                "function, whose derivative is zero wherever it exists. Fit with a smooth "
                "kernel ('gaussian', 'epanechnikov', ...) or a LocalPolynomialRegressor, "
                "whose local slope is defined for any kernel."
            )

    # -- the gradient ---------------------------------------------------------------
    def gradient(self, X: Any, *, return_std: bool = False, method: str = "asymptotic",
                 n_resamples: int = 200, random_state: Any = None) -> Any:
        """Derivatives of the fit with respect to each continuous feature at ``X``.

        Nadaraya-Watson: the derivative of the kernel-weighted mean (the
        ratio's analytic derivative, through the kernel profile's slope; by
        central differences of the kernel weights for a kernel object, whose
        profile is unknown). Local polynomial: the local slope coefficients of
        the fit at ``x`` (statsmodels' ``KernelReg(reg_type="ll")`` marginal
        effects, R np's local-linear gradients).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_queries, n_features)
        return_std : bool, default False
            Also return standard errors of the derivatives (at the fitted
            bandwidth; the variability, not the bias).
        method : {"asymptotic", "bootstrap"}, default "asymptotic"
            ``"asymptotic"``: ``sigma sqrt(sum_j a_xj^2 / w_j)`` from the linear
            weights (``sigma^2`` is :attr:`residual_variance_`); ``"bootstrap"``:
            the standard deviation over ``n_resamples`` wild-bootstrap refits
            at the same bandwidth.
        n_resamples : int, default 200
        random_state : int, Generator or None

        Returns
        -------
        grad : ndarray of shape (n_queries, n_features) or (n_queries, n_features, n_outputs)
            Categorical features are NaN (see :meth:`level_effects`); a continuous
            feature smoothed out (infinite bandwidth) has derivative exactly 0 in
            a Nadaraya-Watson fit, and its global least-squares slope in a local
            polynomial fit (which stays linear in it).
        std : ndarray of the same shape
            Only with ``return_std=True``.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya.estimators import LocalPolynomialRegressor
        >>> x = np.linspace(0, 1, 50)[:, None]; y = 3 * x[:, 0] + 1
        >>> model = LocalPolynomialRegressor(bandwidth=0.2).fit(x, y)
        >>> np.round(model.gradient([[0.5]]), 8).tolist()
        [[3.0]]
        """
        _check_method(method, n_resamples)
        Xv = self._effect_queries(X, "gradient")
        self._check_differentiable()
        grad = gradient_pass(self, Xv, self._y_train)
        if not return_std:
            return self._shape(self._out(grad))
        std = self._gradient_std(Xv, method, n_resamples, random_state)
        std[np.isnan(grad)] = np.nan
        return self._shape(self._out(grad)), self._shape(self._out(std))

    def _gradient_std(self, Xv: np.ndarray, method: str, n_resamples: int,
                      random_state: Any) -> np.ndarray:
        """Standard errors ``(m, d, p)`` in the targets' frame."""
        m, d = Xv.shape
        p = self._n_outputs
        if method == "bootstrap":
            return self._bootstrap_gradients(Xv, n_resamples, random_state)[1]
        std = np.full((m, d, p), np.nan)
        feats = self._se_features()
        if feats.any():
            gaussian = isinstance(self.kernel, str) and self.kernel.lower() == "gaussian"
            engine_pass = (slope_variance if self._design_.degree
                           else nw_gaussian_variance if gaussian else None)
            if engine_pass is not None and self._design_.shift == 0:
                v, redo = engine_pass(self, Xv, feats)
                if redo.size and (self.mask is None or redo.size == m):
                    v[redo] = linear_weights(self, Xv[redo], None, feats)[2]
            else:
                _, _, v = linear_weights(self, Xv, None, feats)
            with np.errstate(invalid="ignore"):
                std[:, feats] = np.sqrt(v[:, :, None] * self._w_unit * self._sigma2)
        if self._design_.degree == 0:
            std[:, continuous_features(self)[1]] = 0.0
        return std

    def _se_features(self) -> np.ndarray:
        return continuous(self) if self._design_.degree else continuous_features(self)[0]

    def _wild_noise(self, rng: Any, b: int) -> np.ndarray:
        """``b`` wild-bootstrap noise targets ``(n, b p)`` (random signs, leverage-corrected)."""
        fit = self._loo_fit
        Y = self._y_train
        with np.errstate(invalid="ignore", divide="ignore"):
            scaled = (Y - fit.fitted) / np.sqrt(np.clip(1.0 - fit.diag, 1e-12, None))[:, None]
        n, p = Y.shape
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n, b))
        return (signs[:, :, None] * scaled[:, None, :]).reshape(n, b * p)

    def _bootstrap_gradients(self, Xv: np.ndarray, n_resamples: int, random_state: Any,
                             w: np.ndarray | None = None, chunk: int = 32
                             ) -> tuple[np.ndarray, np.ndarray]:
        """Mean over the queries ``(B, d, p)`` and pointwise std ``(m, d, p)`` of the resamples."""
        rng = check_random_state(random_state)
        m, d = Xv.shape
        p = self._n_outputs
        total = np.zeros((m, d, p))
        square = np.zeros((m, d, p))
        means = np.empty((n_resamples, d, p))
        for start in range(0, n_resamples, chunk):
            b = min(chunk, n_resamples - start)
            dev = gradient_pass(self, Xv, self._wild_noise(rng, b)).reshape(m, d, b, p)
            total += dev.sum(axis=2)
            square += (dev**2).sum(axis=2)
            means[start:start + b] = self._row_mean(dev.transpose(2, 0, 1, 3), w)
        with np.errstate(invalid="ignore"):
            var = (square - total**2 / n_resamples) / (n_resamples - 1)
        return means, np.sqrt(np.clip(var, 0.0, None))

    def _row_mean(self, a: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        """Mean over axis 1 of ``a (B, m, ...)`` with row weights ``w (m,)``."""
        if w is None:
            return a.mean(axis=1)
        return np.tensordot(a, w / w.sum(), axes=([1], [0]))

    # -- averages ---------------------------------------------------------------------
    def average_marginal_effects(self, X: Any = None, *, method: str = "asymptotic",
                                 n_resamples: int = 200, random_state: Any = None
                                 ) -> tuple[Any, Any]:
        """Mean of :meth:`gradient` over the training rows (or ``X``), with its standard error.

        Over the training rows the mean is weighted by the sample weights (if
        the fit had them). The average is linear in the targets too, so its
        asymptotic variance is ``sigma^2 sum_j abar_j^2 / w_j`` with ``abar``
        the mean of the rows' linear weights (computed in blocks of queries,
        never an ``m x n`` matrix); ``"bootstrap"`` is the spread of the
        average over wild-bootstrap refits.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), optional
        method : {"asymptotic", "bootstrap"}, default "asymptotic"
        n_resamples : int, default 200
        random_state : int, Generator or None

        Returns
        -------
        ame : ndarray of shape (n_features,) or (n_features, n_outputs)
            NaN for categorical features.
        std : ndarray of the same shape

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya.estimators import LocalPolynomialRegressor
        >>> x = np.linspace(0, 1, 40)[:, None]; y = 2 * x[:, 0]
        >>> ame, se = LocalPolynomialRegressor(bandwidth=0.3).fit(x, y).average_marginal_effects()
        >>> round(float(ame[0]), 8)
        2.0
        """
        _check_method(method, n_resamples)
        if X is None:
            check_is_fitted(self)
            if _dask.involved(self, None):
                raise _dask.unavailable("average_marginal_effects")
            Xv, w = self.X_fit_, self.sample_weight_
        else:
            Xv, w = self._effect_queries(X, "average_marginal_effects"), None
        self._check_differentiable()
        grad = gradient_pass(self, Xv, self._y_train)
        ame = self._row_mean(grad[None], w)[0]
        d, p = ame.shape
        if method == "bootstrap":
            means = self._bootstrap_gradients(Xv, n_resamples, random_state, w)[0]
            std = means.std(axis=0, ddof=1)
        else:
            std = np.full((d, p), np.nan)
            feats = self._se_features()
            if feats.any():
                shares = np.full(Xv.shape[0], 1.0 / Xv.shape[0]) if w is None else w / w.sum()
                abar = self._average_weights(Xv, shares, feats)
                omega = np.ones(abar.shape[1]) if self._omega is None else self._omega
                v = (abar**2 / omega).sum(axis=1)
                std[feats] = np.sqrt(v[:, None] * self._w_unit * self._sigma2)
            if self._design_.degree == 0:
                std[continuous_features(self)[1]] = 0.0
        std[np.isnan(ame)] = np.nan
        return self._shape(self._out(ame)), self._shape(self._out(std))

    def _average_weights(self, Xv: np.ndarray, shares: np.ndarray, feats: np.ndarray
                         ) -> np.ndarray:
        """``sum_x share_x a_x`` over the queries, shape ``(k, n)``."""
        out = 0.0
        groups = np.unique(shares)
        for s in groups:  # equal shares (the usual case) in one pass
            rows = np.flatnonzero(shares == s)
            out = out + s * linear_weights(self, Xv[rows], None, feats)[1]
        return np.asarray(out)

    # -- categorical features ------------------------------------------------------------
    def level_effects(self, X: Any, feature: Any, *, base: Any = None,
                      return_std: bool = False, method: str = "asymptotic",
                      n_resamples: int = 200, random_state: Any = None) -> tuple[Any, ...]:
        """Effect of each level of a categorical feature against a base level.

        ``yhat(x with feature = level) - yhat(x with feature = base)`` at every
        query, for each level of the feature among the training rows (the
        discrete analogue of :meth:`gradient`, as R np's effects of factors).

        Both fits are linear in the targets, ``d(x) = sum_i (S_ai - S_bi) y_i``
        with ``S_a``, ``S_b`` the smoother rows of the two queries; they share
        the data, so the variance of the difference keeps their covariance:
        ``sum_i (S_ai - S_bi)^2 sigma_i^2``. The standard errors describe the
        variability at the fitted bandwidth (not the bias), as
        :meth:`predict_interval`'s.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_queries, n_features)
        feature : int or str
            Position or name (``feature_names_in_``) of an unordered or ordered
            feature.
        base : level, optional
            The reference level (a category of the DataFrame column, or a code);
            default the first level.
        return_std : bool, default False
            Also return standard errors of the effects.
        method : {"asymptotic", "bootstrap"}, default "asymptotic"
            ``"asymptotic"``: ``sqrt(sum_i (S_ai - S_bi)^2 e_i^2)`` with the
            leverage-corrected residuals ``e_i = r_i / sqrt(1 - S_ii)``
            (heteroscedasticity-consistent, HC2, as
            ``predict_interval(method="hc")``), from the smoother rows of a
            block of queries at a time; ``"bootstrap"``: the standard deviation
            of the effects over ``n_resamples`` wild-bootstrap refits at the
            same bandwidth (random signs times ``e_i``, as :meth:`gradient`),
            whose variance given the data is the asymptotic one.
        n_resamples : int, default 200
        random_state : int, RandomState or None

        Returns
        -------
        levels : ndarray of shape (n_levels,)
            The levels (the DataFrame's categories, else the codes).
        effects : ndarray of shape (n_queries, n_levels) or (n_queries, n_levels, n_outputs)
            Zero in the base level's column.
        std : ndarray of the same shape as ``effects``
            Only with ``return_std=True``; zero in the base level's column, NaN
            where the effect is NaN or the fit has no residual degrees of
            freedom.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya.estimators import NadarayaWatsonRegressor
        >>> X = np.c_[np.linspace(0, 1, 40), np.arange(40) % 2]
        >>> y = X[:, 0] + 2 * X[:, 1]
        >>> model = NadarayaWatsonRegressor(bandwidth=[0.2, 0.0], var_types="cu").fit(X, y)
        >>> levels, eff = model.level_effects(X[:2], 1)
        >>> levels.tolist(), bool(np.all(eff[:, 0] == 0))
        ([0.0, 1.0], True)
        >>> _, eff, se = model.level_effects(X[:2], 1, return_std=True)
        >>> se.shape
        (2, 2)
        """
        _check_method(method, n_resamples)
        Xv = self._effect_queries(X, "level_effects")
        j = self._feature_index(feature)
        codes = np.unique(self.X_fit_[:, j])
        coding = getattr(self, "_coding", None)
        names = coding.levels[j] if coding is not None else None
        labels = (np.asarray([names[int(c)] for c in codes], dtype=object)
                  if names is not None else codes.copy())
        if base is None:
            b = 0
        else:
            hits = [i for i, lab in enumerate(labels) if lab == base]
            if not hits:
                raise NadarayaError(
                    f"base={base!r} is not a level of feature {feature!r} among the training "
                    f"rows; levels: {labels.tolist()[:10]}. Pass one of them, or None."
                )
            b = hits[0]
        if codes.size < 2:
            raise NadarayaError(
                f"feature {feature!r} has one level among the training rows "
                f"({labels.tolist()[0]!r}); a level effect compares two levels. Pass a "
                "feature whose training rows hold at least two levels."
            )
        queries = []
        for c in codes:
            Xc = Xv.copy()
            Xc[:, j] = c
            queries.append(Xc)
        stacked = np.stack([self._solve(self._means(Xc), Xc)[0] for Xc in queries], axis=1)
        effects = stacked - stacked[:, b:b + 1]  # (m, L, p)
        if not return_std:
            return labels, self._shape(self._out(effects))
        std = (asymptotic_std(self, queries, b) if method == "asymptotic"
               else bootstrap_std(self, queries, b, n_resamples, random_state))
        std[np.isnan(effects)] = np.nan
        return labels, self._shape(self._out(effects)), self._shape(self._out(std))

    def _feature_index(self, feature: Any) -> int:
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        if isinstance(feature, str) and names is not None and feature in list(names):
            j = list(names).index(feature)
        elif isinstance(feature, int | np.integer) and not isinstance(feature, bool) \
                and -d <= feature < d:
            j = int(feature) % d
        else:
            known = list(names) if names is not None else list(range(d))
            raise NadarayaError(
                f"feature must be a position in [0, {d}) or a column name; got {feature!r} "
                f"(features: {known[:10]})."
            )
        if continuous(self)[j]:
            raise NadarayaError(
                f"feature {feature!r} is continuous; level effects are for categorical "
                "features ('u' or 'o' in var_types, or a category column). Use gradient() "
                "for a continuous one."
            )
        return j
