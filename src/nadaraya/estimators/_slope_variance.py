"""Variances of the derivatives from engine passes (no kernel-weight rows).

The slope along feature ``d`` at ``x0`` is linear in the targets,
``b_d = sum_j a_j y_j`` with ``a_j = p_j v^T (phi_j - E_p phi) / frame_d``
(``p_j`` the normalized kernel weights, ``phi`` the monomials of
``u = z - z0``, ``v`` the row of the filtered inverse local covariance for the
monomial ``u_d``). That is a smoother row ``K_j w_j phi(u_j)^T c / sum K w``
with ``c = [-v^T E_p phi, v] / frame_d``, whose ``sum_j a_j^2 / w_j``
:meth:`LocalDesign.variance_factor <._design.LocalDesign.variance_factor>`
gives from one pass with the squared kernel ``K^2``, as for the fitted value.
The Gaussian Nadaraya-Watson derivative has the same form: its linear
weights are ``a_j = p_j (u_jd - E_p u_d) scale_d / h_d^2``, the smoother row
of a local-linear design with ``c = [-E_p u_d, e_d] scale_d / h_d^2``
(:func:`nw_gaussian_variance`). Rows whose quadratic form cancels, or whose
log-sums are too large to give ``sum K^2 / (sum K)^2``, are left to the
kernel-weight rows (:func:`._gradient.linear_weights`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._design import LocalDesign
from ._gradient import local_inverse

__all__ = ["nw_gaussian_variance", "slope_variance"]

#: Largest rounding of ``log(sum K^2 / (sum K)^2)`` from the log-sums before a row is redone.
_LOG_ROUNDING = 1e-8


def _squared_pass(est: Any, X: np.ndarray, values: np.ndarray, lse: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means of ``values`` under ``K^2``, ``log(sum K^2 / (sum K)^2)`` and rows it cannot give."""
    sq_means, lse2 = est._means(X, return_lse=True, values=values, spec=est._spec.squared(),
                                empty="nan")
    with np.errstate(invalid="ignore"):
        log_ratio = lse2 - 2.0 * lse
        rough = np.finfo(float).eps * (np.abs(lse2) + 2.0 * np.abs(lse)) > _LOG_ROUNDING
    return sq_means, np.minimum(np.nan_to_num(log_ratio, nan=0.0), 0.0), rough


def nw_gaussian_variance(est: Any, X: np.ndarray, features: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j a_xj^2 / w_j`` of a Gaussian Nadaraya-Watson fit's derivatives, ``(m, k)``.

    Also returns the rows to compute from their kernel weights instead, shape ``(r,)``.
    """
    design = est._design_
    d = X.shape[1]
    lin = LocalDesign(1, design.centre, design.scale, 0.0, design.weighted)
    gram = lin.values(est.X_fit_, None, est._omega)
    first = lin._pair_index[0]  # the columns of w and w z_j, in the order of lin.basis
    means, lse = est._means(X, return_lse=True, values=gram[:, first])
    sq_means, log_ratio, redo = _squared_pass(est, X, gram, lse)
    mu0 = means[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_u = means[:, 1:] / mu0[:, None] - lin.z(X)
    h = np.broadcast_to(np.asarray(est.bandwidth_, float), (d,))
    position = {e.index(1): i for i, e in enumerate(lin.basis[1:])}
    out = np.full((X.shape[0], int(features.sum())), np.nan)
    for k, j in enumerate(np.flatnonzero(features)):
        i = position[j]
        c = np.zeros((X.shape[0], d + 1))
        c[:, 0] = -mean_u[:, i]
        c[:, 1 + i] = 1.0
        var, cancels = lin.variance_factor(sq_means, X, c * (design.scale[j] / h[j] ** 2),
                                           mu0, log_ratio)
        out[:, k] = var
        redo |= cancels
    seen = np.isfinite(lse) & (mu0 > 0)
    out[~seen] = np.nan
    return out, np.flatnonzero(redo & seen)


def slope_variance(est: Any, X: np.ndarray, features: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j a_xj^2 / w_j`` of the slopes along ``features`` at ``X``, shape ``(m, k)``.

    Also returns the rows to compute from their kernel weights instead, shape ``(r,)``.
    """
    design = est._design_
    p = est._n_outputs
    means, lse = est._means(X, return_lse=True)
    Cinv, mean_u, _, bad, inexact = local_inverse(design, means, X, p)
    mu0 = means[:, 0]
    sq_means, log_ratio, rough = _squared_pass(est, X, est._values[:, :len(design.gram_exps)],
                                               lse)
    redo = inexact | rough
    positions = {e.index(1): i for i, e in enumerate(design.basis[1:]) if sum(e) == 1}
    out = np.full((X.shape[0], int(features.sum())), np.nan)
    for k, j in enumerate(np.flatnonzero(features)):
        v = Cinv[:, positions[j], :]
        c = np.concatenate([-np.einsum("mi,mi->m", v, np.nan_to_num(mean_u))[:, None], v],
                           axis=1) / design.frame[j]
        var, cancels = design.variance_factor(sq_means, X, c, mu0, log_ratio)
        out[:, k] = var
        redo |= cancels
    out[bad] = np.nan
    seen = np.isfinite(lse) & ~bad
    return out, np.flatnonzero(redo & seen)
