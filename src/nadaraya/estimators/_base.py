"""What every kernel smoother estimator shares: fitting, bandwidth choice, the smoother matrix.

A fitted smoother stores its training points, the augmented values of its
local polynomial design (see :mod:`._design`) and the chosen bandwidth;
predicting is one call of :func:`nadaraya.smooth` plus a per-query solve
(and, for the rare local-linear queries whose moments about the global
centre cancel, one more pass each about their own local mean: see
:func:`._design.solve_exact`; not with a user ``mask``, whose meaning may
depend on the query's index).
Fitting always ends with one leave-one-out pass at the chosen bandwidth,
which gives the leave-one-out score, the smoother diagonal and the effective
degrees of freedom ``trace(S)`` at no extra cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from .._errors import NadarayaError
from ..engine import smooth, weights
from ..engine._empty import EMPTY_POLICIES
from ._bandwidth import RULES, check_bandwidth, rule_bandwidth, search_bandwidth, weighted_spread
from ._design import LocalDesign, _powers, solve_exact
from ._kernel import KernelSpec, check_kernel, is_named_radial, make_spec
from ._loo import CRITERIA, LooFit, criterion_value, loo_fit

__all__ = ["KernelSmoother"]


class KernelSmoother(BaseEstimator):
    """Base class of the kernel smoothers (not for direct use)."""

    def _degree(self) -> int:
        return 0

    def _ridge(self) -> float:
        return 0.0

    # -- parameters ------------------------------------------------------
    def _check_params(self, n_features: int) -> Any:
        check_kernel(self.kernel)
        if self.empty not in EMPTY_POLICIES:
            raise NadarayaError(
                f"empty must be one of {', '.join(map(repr, EMPTY_POLICIES))}; "
                f"got {self.empty!r}."
            )
        h = check_bandwidth(self.bandwidth, n_features)
        if not is_named_radial(self.kernel) and h is not None:
            raise NadarayaError(
                f"bandwidth={self.bandwidth!r} needs a radial kernel given by name "
                f"('gaussian', 'epanechnikov', ...); kernel={self.kernel!r} carries its own "
                "scale. Pass bandwidth=None, or a kernel name."
            )
        return h

    # -- fitting ---------------------------------------------------------
    def _design(self, X: np.ndarray, w: np.ndarray, h: np.ndarray | None) -> LocalDesign:
        centre, spread = weighted_spread(X, w)
        spread = np.where(spread > 0, spread, 1.0)
        scale = spread if h is None else np.where(np.isfinite(h), np.minimum(h, spread), spread)
        extent = float((((X - centre) / scale) ** 2).sum(axis=1).max())
        return LocalDesign(self._degree(), centre, scale, self._ridge(), self._weighted, extent)

    def _loo(self, X: np.ndarray, Y: np.ndarray, w: np.ndarray, h: np.ndarray | None,
             full: bool = True) -> tuple[LooFit, LocalDesign, np.ndarray]:
        spec = make_spec(self.kernel, h, X.shape[1])
        design = self._design(X, w, h)
        wv = w if self._weighted else None
        values = design.values(X, Y, wv)
        fit = loo_fit(spec, design, X, Y, wv, values=values, mask=self.mask,
                      engine=self.engine, full=full)
        return fit, design, values

    def _fit_smoother(self, X: np.ndarray, Y: np.ndarray, sample_weight: Any) -> None:
        """Choose the bandwidth, run the final leave-one-out pass, store the fit."""
        h_param = self._check_params(X.shape[1])
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        keep = w > 0
        if not keep.any():
            raise NadarayaError("sample_weight is zero for every sample; give some samples "
                                "positive weight.")
        self._weighted = sample_weight is not None
        X, Y, w = X[keep], Y[keep], w[keep]
        d = X.shape[1]
        self.cv_results_ = None
        kept: dict[str, Any] = {}  # the best full-data pass of a search, reused at the end
        if isinstance(h_param, str) and h_param in CRITERIA:
            if X.shape[0] < 2:
                raise NadarayaError(
                    f"bandwidth={h_param!r} needs at least 2 samples with positive weight; "
                    f"got {X.shape[0]} sample. Give a numeric bandwidth or more data."
                )
            name = h_param
            weighted = self._weighted

            def objective_for(rows: np.ndarray | None) -> Any:
                Xs, Ys, ws = (X, Y, w) if rows is None else (X[rows], Y[rows], w[rows])

                def objective(h: np.ndarray) -> float:
                    loo = self._loo(Xs, Ys, ws, h, full=False)
                    value = criterion_value(name, loo[0], Ys, ws if weighted else None)
                    if rows is None and not value >= kept.get("value", np.inf):
                        kept.update(value=value, h=h.copy(), loo=loo)
                    return value

                return objective

            _, spread = weighted_spread(Y, w)
            scale = 1.0 if name == "aicc" else float(np.mean(spread**2))
            result = search_bandwidth(objective_for, X, w, scale=scale)
            h = result.bandwidth
            sub = result.subsample
            self.cv_results_ = {
                "bandwidth": np.array([r[0] for r in result.history[sub:]]),
                "score": np.array([r[1] for r in result.history[sub:]]),
                "feature": np.array([r[2] for r in result.history[sub:]], dtype=int),
                "criterion": name,
                "at_bound": list(result.at_bound),
                "subsample_evaluations": sub,
            }
        elif isinstance(h_param, str) and h_param in RULES:
            h = rule_bandwidth(h_param, X, w)
        elif h_param is None:
            h = None if not is_named_radial(self.kernel) else np.ones(d)
        else:
            h = np.broadcast_to(h_param, (d,)).astype(float)
        if h is not None and "h" in kept and np.array_equal(kept["h"], h):
            fit, design, values = kept["loo"]
            fit.complete()
        else:
            fit, design, values = self._loo(X, Y, w, h)
        self.X_fit_ = X
        self._y_train = Y
        self.sample_weight_ = w if self._weighted else None
        self._values = values
        self._design_ = design
        self._spec = make_spec(self.kernel, h, d)
        self._loo_fit = fit
        scalar = h is not None and (d == 1 or (not isinstance(h_param, str)
                                                and np.ndim(h_param) == 0))
        self.bandwidth_ = None if h is None else (float(h[0]) if scalar else h.copy())
        self.effective_dof_ = float(np.sum(fit.diag))
        wv = self.sample_weight_
        self.cv_score_ = criterion_value("cv", fit, Y, wv)

    # -- predicting ------------------------------------------------------
    def _means(self, X: np.ndarray, *, return_lse: bool = False, values: Any = None,
               spec: KernelSpec | None = None, empty: str | None = None) -> Any:
        spec = self._spec if spec is None else spec
        return smooth(X, self.X_fit_, self._values if values is None else values,
                      spec.kernel, self.mask, bandwidth=spec.bandwidth, engine=self.engine,
                      return_lse=return_lse, empty=self.empty if empty is None else empty)

    def _solve(self, means: np.ndarray, X: np.ndarray, *, coef: bool = False) -> Any:
        """Fitted values, ``c`` and ``mu0`` at ``X`` from ``means = self._means(X)``."""
        return self._solve_refitted(means, X, coef=coef)[:3]

    def _solve_refitted(self, means: np.ndarray, X: np.ndarray, *, coef: bool = False
                        ) -> tuple[np.ndarray, Any, np.ndarray, dict[int, LocalDesign]]:
        """:meth:`_solve`, also returning the recentred design of each refitted row."""
        local_means = None
        if self.mask is None and self._design_.degree == 1:
            def local_means(i: int, local: LocalDesign) -> np.ndarray:
                values = local.values(self.X_fit_, self._y_train, self.sample_weight_)
                return self._means(X[i:i + 1], values=values, empty="nan")

        return solve_exact(self._design_, means, X, self._n_outputs, local_means, coef=coef)

    # -- the smoother matrix -----------------------------------------------
    def smoother_matrix(self, X: Any = None) -> np.ndarray:
        """Rows of the smoother matrix ``S``: prediction = ``S @ y_train``.

        For small problems: it is an ``(m, n)`` array (refused beyond the
        working-memory budget, see :func:`nadaraya.config_context`).

        Parameters
        ----------
        X : array-like of shape (m, n_features), optional
            Query points; by default the training points (then ``S`` is square
            and ``trace(S)`` is :attr:`effective_dof_`).

        Returns
        -------
        ndarray of shape (m, n_train)
            Rows sum to one; ``n_train`` counts the samples with positive weight.
        """
        check_is_fitted(self)
        Xq = self.X_fit_ if X is None else self._validate_X(X)
        spec = self._spec
        W = weights(Xq, self.X_fit_, spec.kernel, self.mask, bandwidth=spec.bandwidth,
                    empty=self.empty)
        omega = np.ones(self.X_fit_.shape[0]) if self.sample_weight_ is None \
            else self.sample_weight_
        design = self._design_
        if design.degree == 0:
            S = W * omega[None, :]
            return S / S.sum(axis=1, keepdims=True)
        means = self._means(Xq, empty="nan")
        _, c, mu0 = self._solve(means, Xq, coef=True)
        zq, zk = design.z(Xq), design.z(self.X_fit_)
        S = np.empty_like(W)
        for i in range(Xq.shape[0]):
            phi = _powers(zk - zq[i], design.basis)
            S[i] = W[i] * omega * (phi @ c[i]) / mu0[i]
        return S

    def smoother_diagonal(self) -> np.ndarray:
        """Diagonal ``S_ii`` of the smoother matrix at the training points, any ``n``.

        Computed during :meth:`fit` from the leave-one-out pass, without the
        ``n x n`` matrix. ``(y_i - yhat_i) / (1 - S_ii)`` is the leave-one-out
        residual of a Nadaraya-Watson fit.

        Returns
        -------
        ndarray of shape (n_train,)
        """
        check_is_fitted(self)
        return self._loo_fit.diag.copy()
