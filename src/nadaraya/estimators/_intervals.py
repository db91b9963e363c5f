"""Confidence bands, prediction intervals and the wild bootstrap of the kernel regressors."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from . import _dask
from ._uncertainty import (
    bootstrap_deviations,
    check_interval,
    check_level,
    interval,
    local_noise,
    robust_variance,
    sup_band,
)

__all__ = ["IntervalsMixin"]


class IntervalsMixin:
    """``predict_interval`` and ``bootstrap`` of a fitted kernel regressor."""

    def predict_interval(self, X: Any, level: float = 0.95, *, kind: str = "confidence",
                         method: str = "hc", simultaneous: bool = False,
                         multiplier: str = "rademacher", n_resamples: int = 999,
                         random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Confidence band for the mean, or prediction interval for a new observation.

        ``kind="confidence"`` bounds the *smoothed mean* ``E[yhat(x)]``: it
        covers the variability of the estimate over new noise at the same
        design points and the same (fixed) bandwidth, not its bias. Kernel
        estimates flatten peaks and valleys (and Nadaraya-Watson bends toward
        the inside at the boundaries), so the band is for
        ``sum_j S_xj m(x_j)``, not for the true curve ``m(x)``, and a
        bandwidth chosen from the data adds variability it does not count.
        ``kind="prediction"`` bounds one new observation ``y`` at ``x`` (unit
        sample weight): the variance of the estimate plus the noise variance,
        with normal noise. Both hold at each point separately unless
        ``simultaneous=True``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        level : float in (0, 1), default 0.95
        kind : {"confidence", "prediction"}, default "confidence"
        method : {"hc", "normal", "bootstrap"}, default "hc"
            The noise model and how the band is formed.

            - ``"hc"`` (default): heteroscedasticity-consistent. The variance
              of the estimate is ``sum_j S_xj^2 e_j^2`` with the
              leverage-corrected residuals ``e_j = r_j / sqrt(1 - S_jj)``
              (HC2), the band is ``yhat -/+ z se``; the noise of a new
              observation is the local variance, a kernel smooth of
              ``w_j e_j^2`` at the fit's bandwidth, so the interval widens
              where the data spread widely. Valid for constant noise too,
              and the variance of the wild bootstrap exactly, without its
              resampling error: the default for data whose spread may change.
            - ``"normal"``: homoscedastic noise, ``sigma^2 sum_j S_xj^2 / w_j``
              (the standard errors of ``predict(return_std=True)``) and
              ``sigma^2`` = :attr:`residual_variance_` for a new observation.
              Misleading where the spread changes (narrow where the data
              spread widely).
            - ``"bootstrap"``: a wild bootstrap at the same bandwidth
              (``e_j`` times random ``multiplier`` draws, refitted). The
              confidence band is the basic bootstrap interval; the prediction
              interval adds the local noise variance to the bootstrap
              variance of the estimate (normal quantile).
        simultaneous : bool, default False
            Only with ``method="bootstrap"`` and ``kind="confidence"``: a band
            that holds at all queries of ``X`` at once with probability
            ``level`` (sup-t: ``yhat -/+ c se`` with ``se`` the bootstrap
            standard deviation and ``c`` the ``level`` quantile of
            ``max_x |yhat* - yhat| / se`` over the resamples). It is wider than
            the pointwise band and covers the smoothed mean on the query
            points given, not between them.
        multiplier : {"rademacher", "mammen"}, default "rademacher"
            Law of the wild bootstrap's multipliers (random signs, or
            Mammen's two-point law).
        n_resamples : int, default 999
            Bootstrap resamples (``method="bootstrap"``).
        random_state : int, RandomState or None
            Seed of the bootstrap.

        Returns
        -------
        lower, upper : ndarray of shape (n_queries,) or (n_queries, n_outputs)

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya.estimators import LocalPolynomialRegressor
        >>> rng = np.random.default_rng(0)
        >>> x = rng.uniform(0, 6, (200, 1))
        >>> y = np.sin(x[:, 0]) + 0.1 * (1 + x[:, 0]) * rng.normal(size=200)
        >>> model = LocalPolynomialRegressor(bandwidth=0.5).fit(x, y)
        >>> lo, hi = model.predict_interval([[1.0], [5.0]])
        >>> plo, phi = model.predict_interval([[1.0], [5.0]], kind="prediction")
        >>> bool(np.all(phi - plo > hi - lo))
        True
        """
        check_interval(kind, method, simultaneous, multiplier)
        check_level(level)
        check_is_fitted(self)
        if _dask.involved(self, X):
            raise _dask.unavailable("predict_interval")
        if method == "normal":
            fitted, std = self.predict(X, return_std=True)
            if kind == "prediction":
                std = np.sqrt(std**2 + self.residual_variance_)
            return interval(fitted, std, level, "normal")
        Xv = self._validate_X(X)
        if method == "hc":
            fitted, var = robust_variance(self, Xv)
        else:
            fitted, _, _ = self._solve(self._means(Xv), Xv)
            dev = bootstrap_deviations(self, Xv, n_resamples, random_state,
                                       multiplier=multiplier)
            if kind == "confidence":
                lo, hi = (sup_band(fitted, dev, level) if simultaneous
                          else interval(fitted, dev, level, "bootstrap"))
                return self._shape(self._out(lo)), self._shape(self._out(hi))
            var = dev.var(axis=0, ddof=1) if n_resamples > 1 else np.zeros_like(fitted)
        if kind == "prediction":
            var = var + local_noise(self, Xv)
        lo, hi = interval(fitted, np.sqrt(var), level, "normal")
        return self._shape(self._out(lo)), self._shape(self._out(hi))

    def bootstrap(self, X: Any, n_resamples: int = 200, random_state: Any = None
                  ) -> np.ndarray:
        """Wild-bootstrap predictions at ``X`` (same bandwidth), for custom bands.

        Returns
        -------
        ndarray of shape (n_resamples, n_queries) or (n_resamples, n_queries, n_outputs)
        """
        check_is_fitted(self)
        if _dask.involved(self, X):
            raise _dask.unavailable("bootstrap")
        Xv = self._validate_X(X)
        fitted, _, _ = self._solve(self._means(Xv), Xv)
        dev = bootstrap_deviations(self, Xv, n_resamples, random_state)
        return self._shape(self._out(fitted[None] + dev))
