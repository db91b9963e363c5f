"""What every kernel smoother estimator shares: fitting, bandwidth choice, the smoother matrix.

A fitted smoother stores its training points, the augmented values of its
local polynomial design (see :mod:`._design`) and the chosen bandwidth;
predicting is one call of :func:`nadaraya.smooth` plus a per-query solve
(and, for the queries whose local problem the moments cannot fix to
rounding, a least-squares solve from their kernel weights: see
:func:`._direct.solve_exact`; not with a user ``mask``, whose meaning may
depend on the query's index).
Fitting always ends with one leave-one-out pass at the chosen bandwidth,
which gives the leave-one-out score, the smoother diagonal and the effective
degrees of freedom ``trace(S)`` at no extra cost.

Targets and sample weights are stored and used in a power-of-two frame (see
:mod:`._frame`); outputs in the targets' units go back through
:meth:`KernelSmoother._out`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._errors import NadarayaError
from ..engine import EMPTY_POLICIES, smooth, weights
from ..engine.certified import check_tolerance
from . import _dask, _frame
from ._bandwidth import (
    PLUGINS,
    RULES,
    check_bandwidth,
    rule_bandwidth,
    search_bandwidth,
    weighted_spread,
)
from ._cells import cell_objective
from ._design import LocalDesign, _powers, moment_bits, moment_shift
from ._direct import DirectRows, LocalRows, solve_exact
from ._kernel import KernelSpec, check_kernel, is_named_radial, make_spec
from ._loo import CRITERIA, LooFit, criterion_value, loo_fit
from ._mixed import MixedTypes, mixed_types
from ._plugin import dpi_bandwidth

__all__ = ["KernelSmoother", "query_rows"]

# Beyond this many exact kernel evaluations a fit warns that it has no tolerance: at the
# exact engines' rate on a few cores (about 1e9 per second) it is an hour or more.
_EXACT_PAIRS = 4e12
# Criterion evaluations a typical bandwidth search makes on the full data.
_SEARCH_EVALUATIONS = 20


def query_rows(X: np.ndarray, keys: np.ndarray, targets: np.ndarray, omega: np.ndarray | None,
               spec: KernelSpec) -> LocalRows:
    """Kernel-weight rows of the queries ``X`` against in-memory training data (direct solves).

    ``omega`` are the keys' sample weights in their frame (None: unweighted).
    """
    w = np.ones(keys.shape[0]) if omega is None else omega

    def rows(idx: np.ndarray) -> np.ndarray:
        return weights(X[idx], keys, spec.kernel, bandwidth=spec.bandwidth, empty="nan") * w

    return LocalRows(keys, targets, rows, omega)


class KernelSmoother(BaseEstimator):
    """Base class of the kernel smoothers (not for direct use)."""

    #: Feature types given at fit (a string of 'c', 'u', 'o'; None: all continuous) ...
    _types: str | None = None
    #: ... and, with categorical features, their kernels and levels (see :mod:`._mixed`).
    _mixed: MixedTypes | None = None

    def _degree(self) -> int:
        return 0

    def _ridge(self) -> float:
        return 0.0

    def _tolerance(self) -> float | None:
        return check_tolerance(getattr(self, "tolerance", None))

    def _analytic(self) -> bool:
        """Whether ``weight_type`` is ``"analytic"`` (checked; estimators without it: no)."""
        return _frame.is_analytic(getattr(self, "weight_type", "frequency"))

    def _warn_scale(self, n: int, search: bool) -> None:
        """Warn, naming ``tolerance``, when exact sums would take hours for this fit."""
        pairs = float(n) ** 2 * (_SEARCH_EVALUATIONS if search else 1)
        if self._tolerance() is None and pairs >= _EXACT_PAIRS:
            warnings.warn(
                f"this fit sums about {pairs:.1e} kernel weights exactly ({n} samples"
                f"{', times a bandwidth search' if search else ''}), hours on a CPU. Pass "
                "tolerance=1e-8 (or looser) to let certified fast transforms compute each "
                "sum in O(n) within a proven bound, or fix the bandwidth.",
                UserWarning, stacklevel=4)

    # -- parameters ------------------------------------------------------
    def _check_params(self, n_features: int) -> Any:
        check_kernel(self.kernel)
        if self.empty not in EMPTY_POLICIES:
            raise NadarayaError(
                f"empty must be one of {', '.join(map(repr, EMPTY_POLICIES))}; "
                f"got {self.empty!r}."
            )
        discrete = self._types is not None and set(self._types) - {"c"}
        h = check_bandwidth(self.bandwidth, n_features, allow_zero=bool(discrete))
        if discrete:
            return h  # checked per feature against the fitted levels (_mixed)
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
        top = np.abs(X - centre).max(axis=0)

        def extent(frame: np.ndarray) -> float:
            return float((((X - centre) / frame) ** 2).sum(axis=1).max())

        return self._design_from(centre, spread, top, h, extent)

    def _design_from(self, centre: np.ndarray, spread: np.ndarray, top: np.ndarray,
                     h: np.ndarray | None, extent: Any) -> LocalDesign:
        """The design from the data's weighted centre and spread and largest ``|x - centre|``.

        ``extent(frame)`` gives the largest ``|(x - centre) / frame|^2`` of the keys.
        """
        degree = self._degree()
        spread = np.where(spread > 0, spread, 1.0)
        scale = spread if h is None else np.where(np.isfinite(h), np.minimum(h, spread), spread)
        if self._mixed is not None:
            # categorical features enter the kernel only (local constant in them, Li and
            # Racine 2004): an infinite scale puts them at z = 0 in every monomial
            discrete = self._mixed.discrete
            top = np.where(discrete, 0.0, top)
            scale = np.where(discrete, np.inf, scale)
        shift = moment_shift(top[None, :], np.where(np.isfinite(scale), scale, 1.0), degree)
        if shift and self.mask is not None:
            least = float(np.max(top / np.ldexp(1.0, moment_bits(degree))))
            raise NadarayaError(
                f"bandwidth={self.bandwidth!r} is too small for a local polynomial of degree "
                f"{degree} with a mask: the training points lie more than "
                f"2^{moment_bits(degree)} bandwidths from their centre, beyond what the "
                "moments of the fit can hold, and a mask rules out the solve from the kernel "
                f"weights. Give a bandwidth of at least {least:.3g}, or mask=None."
            )
        # the moments hold no coordinates at degree 0; above, the frame keeps them in range
        frame = np.ldexp(scale, shift)
        return LocalDesign(degree, centre, scale, self._ridge(), self._weighted,
                           0.0 if degree == 0 else extent(frame), shift=shift)

    def _loo(self, X: np.ndarray, Y: np.ndarray, w: np.ndarray, h: np.ndarray | None,
             full: bool = True) -> tuple[LooFit, LocalDesign, np.ndarray]:
        """A leave-one-out pass on targets ``Y`` and weights ``w`` in their frames."""
        spec = make_spec(self.kernel, h, X.shape[1], self._mixed)
        design = self._design(X, w, h)
        wv = w if self._weighted else None
        values = design.values(X, Y, wv)
        fit = loo_fit(spec, design, X, Y, wv, values=values, mask=self.mask,
                      engine=self.engine, full=full, unit=self._loo_unit,
                      tolerance=self._tolerance())
        return fit, design, values

    def _fit_smoother(self, X: np.ndarray, Y: np.ndarray, sample_weight: Any) -> None:
        """Choose the bandwidth, run the final leave-one-out pass, store the fit."""
        h_param = self._check_params(X.shape[1])
        analytic = self._analytic()
        w, keep = _frame.positive_weights(sample_weight, X)
        self._weighted = sample_weight is not None
        X, Y, w = X[keep], Y[keep], w[keep]
        self._mixed = mixed_types(self._types, getattr(self, "ukernel", "aitchison-aitken"),
                                  getattr(self, "okernel", "li-racine"), X)
        if self._mixed is not None:
            h_param = self._mixed.check_bandwidth(h_param, self.bandwidth, self.kernel)
        self._warn_scale(X.shape[0], isinstance(h_param, str) and h_param in CRITERIA)
        d = X.shape[1]
        # targets and weights in their power-of-two frames (exact; see ._frame)
        self._y_exp = _frame.exponent(Y)
        Y = _frame.to_frame(Y, self._y_exp)
        w_exp = _frame.exponent(w) if self._weighted else 0
        omega = _frame.to_frame(w, w_exp)
        # the weights as numbers of samples (search start, rules), the weight one in
        # their frame, and what leaving a row out removes
        counts, self._w_unit, self._loo_unit = _frame.units(w, omega, w_exp,
                                                            analytic and self._weighted)
        self.cv_results_ = None
        kept: dict[str, Any] = {}  # the best full-data pass of a search, reused at the end
        smoothed: list[int] = []  # features a search left at their upper bound
        if isinstance(h_param, str) and h_param in CRITERIA:
            if X.shape[0] < 2:
                raise NadarayaError(
                    f"bandwidth={h_param!r} needs at least 2 samples with positive weight; "
                    f"got {X.shape[0]} sample. Give a numeric bandwidth or more data."
                )
            name = h_param

            mixed = self._mixed

            def objective_for(rows: np.ndarray | None) -> Any:
                # mixed data: the criterion summed once per cell of levels, where it applies
                cells = None if mixed is None else cell_objective(
                    self, name, X if rows is None else X[rows], Y if rows is None else Y[rows])
                if cells is not None:
                    return lambda s: cells(mixed.from_search(s))
                if rows is None:
                    objective = self._objective(name, X, Y, omega, kept)
                else:
                    objective = self._objective(name, X[rows], Y[rows], omega[rows])
                if mixed is None:
                    return objective
                return lambda s: objective(mixed.from_search(s))

            # criteria are compared on the targets' frame, where they never overflow
            _, spread = weighted_spread(Y, w)
            scale = 1.0 if name == "aicc" else float(np.mean(spread**2))
            result = search_bandwidth(objective_for, X, counts, scale=scale,
                                      discrete=None if mixed is None else mixed.discrete)
            if mixed is not None:
                result.bandwidth = mixed.from_search(result.bandwidth)
                result.history = [(mixed.from_search(b), v, f) for b, v, f in result.history]
            h = result.bandwidth
            smoothed = result.smoothed_out
            self._record_search(result, name, d)
        elif isinstance(h_param, str) and h_param in RULES:
            h = rule_bandwidth(h_param, X, counts)
        elif isinstance(h_param, str) and h_param in PLUGINS:
            h = dpi_bandwidth(X, Y, w if self._weighted else None, degree=self._degree(),
                              kernel=self.kernel, categorical=self._mixed is not None,
                              analytic=analytic)
        elif h_param is None:
            h = None if not is_named_radial(self.kernel) else np.ones(d)
        else:
            h = np.broadcast_to(h_param, (d,)).astype(float)
        if h is not None and "h" in kept and np.array_equal(kept["h"], h):
            fit, design, values = kept["loo"]
            fit.complete()
        else:
            fit, design, values = self._loo(X, Y, omega, h)
        self.X_fit_ = X
        self._y_train = Y  # in the frame of 2^self._y_exp
        self.sample_weight_ = w if self._weighted else None
        self._omega = omega if self._weighted else None  # in the frame where 1 is _w_unit
        self._values = values
        self._design_ = design
        self._spec = make_spec(self.kernel, h, d, self._mixed)
        self._loo_fit = fit
        scalar = h is not None and (d == 1 or (not isinstance(h_param, str)
                                                and np.ndim(h_param) == 0))
        self.bandwidth_ = None if h is None else (float(h[0]) if scalar else h.copy())
        self.irrelevant_ = self._irrelevant(h, smoothed, d)
        self.effective_dof_ = float(np.sum(fit.diag))
        cv = criterion_value("cv", fit, Y, self._omega, unit=self._w_unit)
        self.cv_score_ = float(self._out(cv, power=2))

    def _irrelevant(self, h: np.ndarray | None, smoothed: list[int], d: int) -> np.ndarray:
        """Names of the features smoothed out (Hall, Li and Racine 2007), shape ``(k,)``.

        An infinite bandwidth (a search reports ``inf`` for a continuous
        feature it leaves at its upper bound, where it evaluates the criterion
        with ``h = inf``), or a categorical feature's lambda at the upper end
        of its range.
        """
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.array([f"x{j}" for j in range(d)], dtype=object)
        if h is None:
            return names[:0].copy()
        out = ~np.isfinite(h)
        out[list(smoothed)] = True
        if self._mixed is not None:
            out |= self._mixed.smoothed_out(h)
        return names[out].copy()

    def _objective(self, name: str, X: np.ndarray, Y: np.ndarray, omega: np.ndarray,
                   kept: dict[str, Any] | None = None) -> Any:
        """The criterion ``name`` as a function of the bandwidth, on in-memory rows.

        With ``kept``, the best pass so far is kept there (``value``, ``h``, ``loo``).
        """
        weighted = self._weighted

        def objective(h: np.ndarray) -> float:
            loo = self._loo(X, Y, omega, h, full=False)
            value = criterion_value(name, loo[0], Y, omega if weighted else None,
                                    unit=self._w_unit)
            if kept is not None and not value >= kept.get("value", np.inf):
                kept.update(value=value, h=h.copy(), loo=loo)
            return value

        return objective

    def _record_search(self, result: Any, name: str, d: int) -> None:
        """Set :attr:`cv_results_` from a search; warn if it did not settle."""
        sub = result.subsample
        scores = np.array([r[1] for r in result.history[sub:]])
        self.cv_results_ = {
            "bandwidth": np.array([r[0] for r in result.history[sub:]]),
            "score": (scores + 2 * self._y_exp * np.log(2.0) if name == "aicc"
                      else self._out(scores, power=2)),
            "feature": np.array([r[2] for r in result.history[sub:]], dtype=int),
            "criterion": name,
            "at_bound": list(result.at_bound),
            "subsample_evaluations": sub,
            "converged": result.converged,
        }
        if not result.converged:
            warnings.warn(
                f"bandwidth={name!r}: the search stopped after "
                f"{len(result.history)} evaluations of the criterion before it settled "
                f"({d} features); bandwidth_ is the best bandwidth evaluated. Pass "
                "bandwidth as a number, one per feature, or 'scott' to skip the search.",
                ConvergenceWarning, stacklevel=4)

    def _out(self, a: Any, power: int = 1) -> Any:
        """``a`` (in the targets' frame, raised to ``power``) in the targets' units."""
        return _frame.from_frame(a, self._y_exp, power)

    # -- predicting ------------------------------------------------------
    def _means(self, X: np.ndarray, *, return_lse: bool = False, values: Any = None,
               spec: KernelSpec | None = None, empty: str | None = None) -> Any:
        spec = self._spec if spec is None else spec
        return smooth(X, self.X_fit_, self._values if values is None else values,
                      spec.kernel, self.mask, bandwidth=spec.bandwidth, engine=self.engine,
                      return_lse=return_lse, empty=self.empty if empty is None else empty,
                      tolerance=self._tolerance())

    def _solve(self, means: np.ndarray, X: np.ndarray, *, coef: bool = False) -> Any:
        """Fitted values, ``c`` and ``mu0`` at ``X`` from ``means = self._means(X)``."""
        return self._solve_exact(means, X, coef=coef)[:3]

    def _solve_exact(self, means: np.ndarray, X: np.ndarray, *, coef: bool = False
                        ) -> tuple[np.ndarray, Any, np.ndarray, DirectRows]:
        """:meth:`_solve`, also returning the rows solved from their kernel weights."""
        return solve_exact(self._design_, means, X, self._n_outputs, self._local_rows(X),
                           coef=coef)

    def _local_rows(self, X: np.ndarray) -> LocalRows | None:
        """Kernel-weight rows of the queries ``X`` for a direct solve (None: not available).

        Not with a user ``mask`` (its meaning may depend on the query's index), nor
        for degree 0 (nothing to solve).
        """
        if self.mask is not None or self._design_.degree == 0:
            return None
        return query_rows(X, self.X_fit_, self._y_train, self._omega, self._spec)

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
        if _dask.involved(self, X):
            raise _dask.unavailable("smoother_matrix")
        return self._smoother_rows(self.X_fit_ if X is None else self._validate_X(X))

    def _smoother_rows(self, Xq: np.ndarray) -> np.ndarray:
        """:meth:`smoother_matrix` at validated queries ``Xq``, shape ``(m, n_train)``."""
        spec = self._spec
        W = weights(Xq, self.X_fit_, spec.kernel, self.mask, bandwidth=spec.bandwidth,
                    empty=self.empty)
        omega = np.ones(self.X_fit_.shape[0]) if self._omega is None else self._omega
        design = self._design_
        if design.degree == 0:
            S = W * omega[None, :]
            return S / S.sum(axis=1, keepdims=True)
        means = self._means(Xq, empty="nan")
        _, c, mu0 = self._solve(means, Xq, coef=True)
        S = np.empty_like(W)
        for i in range(Xq.shape[0]):
            # offsets in bandwidths, the frame of c; keys without weight add nothing
            seen = W[i] != 0
            with np.errstate(over="ignore", invalid="ignore"):
                u = np.where(seen[:, None], self.X_fit_ - Xq[i], 0.0) / design.scale
                phi = _powers(u, design.basis)
                S[i] = np.where(seen, W[i] * omega * (phi @ c[i]) / mu0[i], 0.0)
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
