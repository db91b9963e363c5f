"""Conditional densities, distribution functions and quantiles as ratios of kernel sums.

With the dependent variables ``y`` first and the conditioning ones ``x``
after (statsmodels' ``KDEMultivariateConditional`` order) on ``z = [y, x]``:

    f(y | x) = f(x, y) / f(x)
    F(y | x) = sum_j w_j G(y; y_j) K_x(x, x_j) / sum_j w_j K_x(x, x_j)

``G`` is the product of the dependent variables' CDF kernels:
``Phi((y - y_j) / h)`` for a continuous one (Gaussian kernel), and for a
categorical one the kernel's weights summed over the observed levels up to
``y`` (statsmodels' ``cdf``). The continuous ``y`` and ``x`` get a radial kernel
each, so ``f(y | x)`` integrates to one in ``y`` for every kernel.

A quantile ``F(y | x) = q`` (np's ``npqreg``) of one continuous ``y`` is a root
of a mixture of normal CDFs with the weights ``w_j K_x(x, x_j)`` of the query
(rows of the engine's :func:`~nadaraya.weights`, a block of queries at a
time), found by :func:`scipy.optimize.brentq` per query; for a categorical
``y`` it is the first observed level whose ``F`` reaches ``q``.

The bandwidth criteria: :func:`conditional_cv_ml` here (likelihood), and
least squares in :mod:`._conditional_cv`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr

from .._errors import NadarayaError
from ..engine import weights
from ..kernels import Kernel
from ._density_cv import log_kernel_sums, loo_log_density
from ._density_kernel import DensityKernel, log_ndtr_kernel, table_kernel

__all__ = ["ConditionalModel", "conditional_cv_ml"]

#: Queries per block of weight rows in the quantile solve.
_BLOCK = 256


class ConditionalModel:
    """The joint kernel on ``z = [y, x]`` and the marginal kernel on ``x``, at one bandwidth.

    Parameters
    ----------
    joint : DensityKernel
        On all columns of ``z`` (radial blocks: the continuous ``y``, the continuous ``x``).
    k_dep : int
        Number of dependent variables (the first columns of ``z``).
    """

    def __init__(self, joint: DensityKernel, k_dep: int) -> None:
        self.joint = joint
        self.k_dep = k_dep
        types = joint.types[k_dep:]
        self.marginal = DensityKernel(joint.name, types, joint.bandwidth[k_dep:],
                                      joint.levels[k_dep:], joint.ukernel, joint.okernel)
        self.shifted = DensityKernel(joint.name, types, joint.bandwidth[k_dep:],
                                     joint.levels[k_dep:], joint.ukernel, joint.okernel,
                                     offset=k_dep)

    def _logw(self, model: DensityKernel, Z: np.ndarray, w: np.ndarray) -> np.ndarray:
        logw = np.log(w)
        extra = model.key_log_weights(Z)
        return logw if extra is None else logw + extra

    def log_pdf(self, Q: np.ndarray, Z: np.ndarray, w: np.ndarray,
                tolerance: float | None) -> np.ndarray:
        """``log f(y | x)`` at the rows ``Q = [y, x]``; ``-inf`` where ``f(x, y) = 0``; no NaN."""
        k = self.k_dep
        out = np.full(Q.shape[0], -np.inf)
        near = ~self.joint.beyond_support(Q, Z)
        if not near.any():
            return out
        Q = Q[near]
        num = log_kernel_sums(Q, Z, self.joint.kernel(), self._logw(self.joint, Z, w),
                              tolerance=tolerance) + self.joint.log_norm()
        den = log_kernel_sums(Q[:, k:], Z[:, k:], self.marginal.kernel(),
                              self._logw(self.marginal, Z[:, k:], w),
                              tolerance=tolerance) + self.marginal.log_norm()
        out[near] = np.where(np.isfinite(den) & np.isfinite(num), num - den, -np.inf)
        return out

    def _cdf_kernel(self, Q: np.ndarray) -> tuple[Kernel, np.ndarray, np.ndarray]:
        """The kernel ``G * K_x``, the queries with categorical ``y`` snapped, and rows with F=0."""
        joint = self.joint
        k = self.k_dep
        Q = Q.copy()
        zero = np.zeros(Q.shape[0], dtype=bool)
        parts: list[Kernel] = []
        for j in range(k):
            if joint.types[j] == "c":
                _require_gaussian(joint.name)
                parts.append(log_ndtr_kernel(float(joint.bandwidth[j])).on([j]))
                continue
            lev = joint.levels[j]
            pos = np.searchsorted(lev, Q[:, j], side="right") - 1
            zero |= pos < 0
            Q[:, j] = lev[np.maximum(pos, 0)]
            cum = np.cumsum(joint.level_table(j), axis=1)
            parts.append(table_kernel(cum, lev).on([j]))
        parts.append(self.shifted.kernel())
        kernel = parts[0]
        for part in parts[1:]:
            kernel = kernel * part
        return kernel, Q, zero

    def cdf(self, Q: np.ndarray, Z: np.ndarray, w: np.ndarray,
            tolerance: float | None) -> np.ndarray:
        """``F(y | x)`` at the rows ``Q = [y, x]``; NaN where ``f(x) = 0``."""
        k = self.k_dep
        out = np.full(Q.shape[0], np.nan)
        near = ~self.marginal.beyond_support(Q[:, k:], Z[:, k:])
        if not near.any():
            return out
        out[near] = self._cdf_near(Q[near], Z, w, tolerance)
        return out

    def _cdf_near(self, Q: np.ndarray, Z: np.ndarray, w: np.ndarray,
                  tolerance: float | None) -> np.ndarray:
        k = self.k_dep
        kernel, Qs, zero = self._cdf_kernel(Q)
        logw = self._logw(self.marginal, Z[:, k:], w)
        num = log_kernel_sums(Qs, Z, kernel, logw, tolerance=tolerance)
        den = log_kernel_sums(Q[:, k:], Z[:, k:], self.marginal.kernel(), logw,
                              tolerance=tolerance)
        with np.errstate(invalid="ignore"):
            out = np.exp(np.minimum(num - den, 0.0))
        out = np.where(np.isfinite(den), out, np.nan)
        return np.where(zero & np.isfinite(den), 0.0, out)

    def quantile(self, X: np.ndarray, q: float, Z: np.ndarray, w: np.ndarray,
                 tolerance: float | None) -> np.ndarray:
        """The ``q`` quantile of one dependent variable given each row of ``X``."""
        joint = self.joint
        if self.k_dep != 1:
            raise NadarayaError(
                f"quantiles are defined for one dependent variable; this fit has {self.k_dep}."
                " Fit a ConditionalDensity on one column of y."
            )
        if joint.types[0] != "c":
            lev = joint.levels[0]
            F = np.column_stack([
                self.cdf(np.column_stack([np.full(X.shape[0], level), X]), Z, w, tolerance)
                for level in lev])
            hit = F >= q * (1.0 - 1e-12)
            first = np.argmax(hit, axis=1)
            out = np.where(hit.any(axis=1), lev[first], lev[-1])
            return np.where(np.isnan(F).any(axis=1), np.nan, out)
        _require_gaussian(joint.name)
        h = float(joint.bandwidth[0])
        y = Z[:, 0]
        xk = self.marginal.kernel()
        kw = np.exp(self._logw(self.marginal, Z[:, 1:], w))
        lo, hi = float(y.min()) - 40.0 * h, float(y.max()) + 40.0 * h
        out = np.empty(X.shape[0])
        for start in range(0, X.shape[0], _BLOCK):
            rows = np.asarray(weights(X[start:start + _BLOCK], Z[:, 1:], xk, empty="nan"))
            rows = rows * kw[None, :]
            for i, a in enumerate(rows):
                total = a.sum()
                if not (np.isfinite(total) and total > 0):
                    out[start + i] = np.nan
                    continue
                keep = a > 0
                out[start + i] = _mixture_root(a[keep] / total, y[keep], h, q, lo, hi)
        return out


def _require_gaussian(name: str) -> None:
    if name != "gaussian":
        raise NadarayaError(
            "the conditional CDF and quantiles of a continuous dependent variable need "
            f"kernel='gaussian' (its CDF is known); got kernel={name!r}."
        )


def _mixture_root(a: np.ndarray, y: np.ndarray, h: float, q: float, lo: float,
                  hi: float) -> float:
    """The ``t`` where ``sum_j a_j Phi((t - y_j) / h) = q`` (``a`` sums to one)."""
    return float(brentq(lambda t: float(a @ ndtr((t - y) / h)) - q, lo, hi,
                        xtol=1e-12 * max(h, abs(lo), abs(hi)), rtol=1e-14))


def conditional_cv_ml(make: object, k_dep: int, Z: np.ndarray, w: np.ndarray,
                      tolerance: float | None) -> object:
    """``h -> -sum_i w_i log f_{-i}(y_i | x_i) / W`` (``inf`` where a term is not finite)."""
    total = w.sum()

    def objective(h: np.ndarray) -> float:
        model = ConditionalModel(make(h), k_dep)
        joint = loo_log_density(model.joint, Z, w, tolerance)
        marginal = loo_log_density(model.marginal, Z[:, k_dep:], w, tolerance)
        s = joint - marginal
        if not np.isfinite(s).all():
            return math.inf
        return float(-(w @ s) / total)

    return objective
