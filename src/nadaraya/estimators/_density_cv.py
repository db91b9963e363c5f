"""Log kernel sums through the engine, and the cross-validation criteria of a density.

Every quantity of a kernel density is a log kernel sum
``log sum_j exp(s(q, x_j) + a_j)`` with per-key log-weights ``a_j``
(:func:`log_kernel_sums`): the engine's ``lse`` plus the log of the weighted
mean of ``exp(a_j - max a)``, so no sum underflows.

* CV maximum likelihood (np's default, statsmodels' ``cv_ml``): minimize
  ``-sum_i w_i log f_{-i}(x_i) / W``, ``f_{-i}`` the estimate without row ``i``
  (the engine's leave-one-out mask).
* CV least squares (``cv_ls``): minimize ``int f^2 - 2 sum_i w_i f_{-i}(x_i) / W``;
  ``int f^2 = sum_ij w_i w_j Kbar(x_i, x_j) / W^2`` with the convolution kernel
  ``Kbar = K * K``: for the Gaussian of bandwidth ``h`` the Gaussian of ``sqrt(2) h``;
  for a categorical factor ``sum_l P(l | a) P(l | b)`` over the observed levels
  (statsmodels' ``imse``). Only the Gaussian has its convolution here in
  closed form, so ``cv_ls`` takes ``kernel="gaussian"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .._errors import NadarayaError
from ..engine import smooth
from ..kernels import Gaussian, Kernel
from ._density_kernel import DensityKernel, radial_log_mass, table_kernel

__all__ = ["CV_CRITERIA", "cv_ls_objective", "cv_ml_objective", "log_kernel_sums"]

CV_CRITERIA = ("cv_ml", "cv_ls")


def log_kernel_sums(Q: np.ndarray, X: np.ndarray, kernel: Kernel, logw: np.ndarray | None, *,
                    loo: bool = False, tolerance: float | None = None) -> np.ndarray:
    """``log sum_j exp(s(q, x_j) + logw_j)`` for each query, shape ``(m,)``.

    ``-inf`` where no key has weight (outside a compact kernel's support, a
    level of weight zero); never NaN. ``loo``: queries are the keys and key
    ``i`` is left out of query ``i``'s sum.
    """
    top = 0.0
    values = None
    if logw is not None and logw.size and np.ptp(logw) > 0:
        top = float(np.max(logw))
        values = np.exp(logw - top)[:, None]
    elif logw is not None and logw.size:
        top = float(logw[0])
    out, lse = smooth(Q, X, values, kernel, "leave-one-out" if loo else None,
                      return_lse=True, empty="nan", tolerance=tolerance)
    lse = np.asarray(lse, dtype=float)
    seen = np.isfinite(lse)
    if values is None:
        return np.where(seen, lse + top, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.log(np.asarray(out, dtype=float)[:, 0])
    return np.where(seen & np.isfinite(mean), lse + mean + top, -np.inf)


def loo_log_density(model: DensityKernel, X: np.ndarray, w: np.ndarray,
                    tolerance: float | None = None) -> np.ndarray:
    """``log f_{-i}(x_i)`` of each training row, shape ``(n,)``."""
    logw = np.log(w)
    extra = model.key_log_weights(X)
    if extra is not None:
        logw = logw + extra
    sums = log_kernel_sums(X, X, model.kernel(), logw, loo=True, tolerance=tolerance)
    total = w.sum()
    with np.errstate(divide="ignore"):
        rest = np.log(np.maximum(total - w, 0.0))
    return sums + model.log_norm() - rest


def cv_ml_objective(make: Callable[[np.ndarray], DensityKernel], X: np.ndarray, w: np.ndarray,
                    tolerance: float | None = None) -> Callable[[np.ndarray], float]:
    """``h -> -sum_i w_i log f_{-i}(x_i) / W`` (``inf`` where some ``f_{-i}(x_i)`` is zero)."""
    total = w.sum()

    def objective(h: np.ndarray) -> float:
        s = loo_log_density(make(h), X, w, tolerance)
        if not np.isfinite(s).all():
            return math.inf
        return float(-(w @ s) / total)

    return objective


def _convolution(model: DensityKernel) -> tuple[Kernel, float]:
    """The convolution kernel ``K * K`` of a Gaussian density kernel, and its ``-log C``."""
    parts: list[Kernel] = []
    cont = model.continuous
    log_norm = 0.0
    if cont:
        hc = math.sqrt(2.0) * model.bandwidth[cont]
        parts.append(Gaussian(hc).on(cont))
        log_norm = -float(np.sum(np.log(hc))) - radial_log_mass("gaussian", len(cont))
    for j, t in enumerate(model.types):
        if t != "c":
            P = model.level_table(j)
            parts.append(table_kernel(P @ P.T, model.levels[j]).on([j]))
    kernel = parts[0]
    for part in parts[1:]:
        kernel = kernel * part
    return kernel, log_norm


def integral_of_square(model: DensityKernel, X: np.ndarray, w: np.ndarray,
                       tolerance: float | None = None) -> float:
    """``int f^2`` of the estimate (sums over the observed levels of categorical features)."""
    check_cv_ls(model.name)
    kernel, log_norm = _convolution(model)
    logw = np.log(w)
    sums = log_kernel_sums(X, X, kernel, logw, tolerance=tolerance)
    log_total = math.log(w.sum())
    return math.exp(float(logsumexp(sums + logw)) - 2.0 * log_total + log_norm)


def check_cv_ls(name: str) -> None:
    """Refuse ``cv_ls`` for a kernel without its convolution in closed form."""
    if name != "gaussian":
        raise NadarayaError(
            f"bandwidth='cv_ls' needs the convolution K * K of the kernel in closed form, "
            f"which this package has for kernel='gaussian' only; got kernel={name!r}. Use "
            "kernel='gaussian', or bandwidth='cv_ml' (any kernel)."
        )


def cv_ls_objective(make: Callable[[np.ndarray], DensityKernel], X: np.ndarray, w: np.ndarray,
                    tolerance: float | None = None) -> Callable[[np.ndarray], float]:
    """``h -> int f^2 - 2 sum_i w_i f_{-i}(x_i) / W``."""
    total = w.sum()

    def objective(h: np.ndarray) -> float:
        model = make(h)
        square = integral_of_square(model, X, w, tolerance)
        loo = np.exp(loo_log_density(model, X, w, tolerance))
        return float(square - 2.0 * (w @ loo) / total)

    return objective


def objective_for(name: str, make: Callable[[np.ndarray], DensityKernel], X: np.ndarray,
                  w: np.ndarray, tolerance: float | None = None) -> Any:
    """The criterion ``name`` (``"cv_ml"`` or ``"cv_ls"``) on rows ``X`` with weights ``w``."""
    build = cv_ml_objective if name == "cv_ml" else cv_ls_objective
    return build(make, X, w, tolerance)
