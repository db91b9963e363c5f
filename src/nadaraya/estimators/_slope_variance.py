"""Variance of a local polynomial's slopes from engine passes (no kernel-weight rows).

The slope along feature ``d`` at ``x0`` is linear in the targets,
``b_d = sum_j a_j y_j`` with ``a_j = p_j v^T (phi_j - E_p phi) / frame_d``
(``p_j`` the normalized kernel weights, ``phi`` the monomials of
``u = z - z0``, ``v`` the row of the filtered inverse local covariance for the
monomial ``u_d``). That is a smoother row ``K_j w_j phi(u_j)^T c / sum K w``
with ``c = [-v^T E_p phi, v] / frame_d``, whose ``sum_j a_j^2 / w_j``
:meth:`LocalDesign.variance_factor <._design.LocalDesign.variance_factor>`
gives from one pass with the squared kernel ``K^2``, as for the fitted value.
Rows whose quadratic form cancels, or whose log-sums are too large to give
``sum K^2 / (sum K)^2``, are left to the kernel-weight rows
(:func:`._gradient.linear_weights`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._gradient import local_inverse

__all__ = ["slope_variance"]

#: Largest rounding of ``log(sum K^2 / (sum K)^2)`` from the log-sums before a row is redone.
_LOG_ROUNDING = 1e-8


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
    sq_means, lse2 = est._means(X, return_lse=True, values=est._values[:, :len(design.gram_exps)],
                                spec=est._spec.squared(), empty="nan")
    with np.errstate(invalid="ignore"):
        log_ratio = lse2 - 2.0 * lse
        redo = inexact | (np.finfo(float).eps * (np.abs(lse2) + 2.0 * np.abs(lse))
                          > _LOG_ROUNDING)
    log_ratio = np.minimum(np.nan_to_num(log_ratio, nan=0.0), 0.0)
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
