"""Local polynomial fits solved from each query's kernel weights, for the rows moments cannot fix.

The moment solve of :class:`._design.LocalDesign` works on normal equations,
which square the conditioning of the local problem (an eigenvalue ``r
lambda_max`` of the local covariance is known to about ``eps / r`` of itself)
and, about a distant centre, lose ``eps tr E[z z^T]`` more to cancellation.
:meth:`LocalDesign.solve_checked <._design.LocalDesign.solve_checked>` flags
the rows where that matters; here each of them is solved again as the weighted
least-squares problem itself:

* its kernel weights ``K(x0, x_j) w_j`` come from :func:`nadaraya.weights`
  (one row per query, in blocks within the working-memory budget);
* the weighted, centred monomials ``sqrt(p_j) (phi(u_j) - E_p[phi])`` are
  factorized by Householder QR with the rows sorted by decreasing weight
  (row-wise backward stable, so neighbours of negligible weight cost no
  accuracy), then by an SVD of the small triangular factor;
* the singular values squared are the eigenvalues of the local covariance, and
  the slopes get the estimator's filter (:func:`._design.filter_factors` at
  :func:`._design.cutoff`; the rounding of this solve is far below it): the same
  estimator as the moment solve, to the conditioning of the weighted design
  rather than of its square, and without the floor of moments about a distant
  centre.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._config import get_config
from ._design import LocalDesign, _powers, cutoff, filter_factors

__all__ = ["DirectRows", "LocalRows", "solve_direct", "solve_exact", "solve_rows"]


@dataclass
class LocalRows:
    """The data a direct solve needs besides the design.

    Attributes
    ----------
    keys : ndarray of shape (n, n_features)
    targets : ndarray of shape (n, p)
    weights : callable
        ``weights(rows)`` with ``rows`` query indices ``(k,)`` returns the
        weight of every key at those queries, ``(k, n)``: kernel times sample
        weight, in the scale of the means (NaN rows: no visible key).
    sample_weight : ndarray of shape (n,) or None
        The sample weights of the keys, for the variance of the fit.
    """

    keys: np.ndarray
    targets: np.ndarray
    weights: Callable[[np.ndarray], np.ndarray]
    sample_weight: np.ndarray | None = None


@dataclass
class DirectRows:
    """Rows solved directly, with ``sum_j S_qj^2 / w_j`` (the variance factor of the fit).

    Attributes
    ----------
    index : ndarray of shape (k,), int
    variance : ndarray of shape (k,)
    """

    index: np.ndarray
    variance: np.ndarray


def solve_direct(design: LocalDesign, P: np.ndarray, keys: np.ndarray, targets: np.ndarray,
                 Xq: np.ndarray, sample_weight: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Local polynomial fits at a few queries by least squares on their weighted keys.

    Parameters
    ----------
    design : LocalDesign
        Degree 1 or more.
    P : ndarray of shape (k, n)
        Weight of every key at each query (kernel times sample weight), each
        row with a positive sum.
    keys : ndarray of shape (n, n_features)
    targets : ndarray of shape (n, p)
    Xq : ndarray of shape (k, n_features)
    sample_weight : ndarray of shape (n,) or None
        For the variance factor only (``None``: unit weights).

    Returns
    -------
    fitted : ndarray of shape (k, p)
    c : ndarray of shape (k, q)
        As in :meth:`LocalDesign.solve`: the smoother row is
        ``p_j phi(u_j)^T c / sum_j p_j``.
    mu0 : ndarray of shape (k,)
        ``sum_j P_qj``, the scale of the means when ``P`` is in it.
    variance : ndarray of shape (k,)
        ``sum_j S_qj^2 / w_j``.
    """
    k, n = P.shape
    q = design.n_basis
    mu0 = P.sum(axis=1)
    pn = P / mu0[:, None]
    # rows by decreasing weight: Householder QR is then accurate row by row
    order = np.argsort(-pn, axis=1, kind="stable")
    ps = np.take_along_axis(pn, order, axis=1)
    ys = targets[order]
    mean_y = np.einsum("kn,knp->kp", ps, ys)
    # keys without weight take no part: their offsets (beyond the float range in bandwidths,
    # for a tiny bandwidth) are set to zero
    seen = (ps > 0)[:, :, None]
    if design.degree == 1:
        # offsets from the heaviest key, then centred on their weighted mean: the rounding of
        # the design is that of the keys' differences, however far the query and however
        # small the bandwidth (a mean formed in the data's units would carry eps |x| / h)
        anchor = keys[order[:, 0]]
        with np.errstate(over="ignore", invalid="ignore"):
            u = np.where(seen, (keys[order] - anchor[:, None, :]) / design.scale, 0.0)
        mean_u = np.einsum("kn,knd->kd", ps, u)
        centred = np.where(seen, u - mean_u[:, None, :], 0.0)
        mean_phi = mean_u + (anchor - Xq) / design.scale
    else:
        with np.errstate(over="ignore"):
            u = np.where(seen, (keys[order] - Xq[:, None, :]) / design.scale, 0.0)
        phi = _powers(u.reshape(k * n, -1), design.basis[1:]).reshape(k, n, q - 1)
        mean_phi = np.einsum("kn,knj->kj", ps, phi)
        centred = phi - mean_phi[:, None, :]
    root = np.sqrt(ps)[:, :, None]
    Q, R = np.linalg.qr(root * centred)
    U, s, Vt = np.linalg.svd(R, full_matrices=False)
    lam = s**2
    kept = filter_factors(lam, cutoff(lam[:, 0]))
    positive = np.where(lam > 0, lam, 1.0)
    gains = np.where(lam > 0, kept / (positive + design.ridge), 0.0)
    V = np.swapaxes(Vt, 1, 2)
    # slopes C^+ cy, C = V diag(s^2) V^T and cy = R^T Q^T (sqrt(p) (y - mean y))
    rhs = np.swapaxes(U, 1, 2) @ (np.swapaxes(Q, 1, 2) @ (root * (ys - mean_y[:, None, :])))
    slopes = V @ ((gains * s)[:, :, None] * rhs)
    fitted = mean_y - np.einsum("kj,kjp->kp", mean_phi, slopes)
    along = Vt @ mean_phi[:, :, None]
    cb = -(V @ (gains[:, :, None] * along))[..., 0]
    c0 = 1.0 - np.einsum("kj,kj->k", mean_phi, cb)
    # smoother row p_j (1 - (phi_j - m)^T C^+ m) = p_j - sqrt(p_j) (A C^+ m)_j, A = Q R: through
    # the orthogonal factors, not the coefficients c (huge where the query extrapolates)
    rows = ps - root[..., 0] * (Q @ (U @ ((gains * s)[:, :, None] * along)))[..., 0]
    omega = np.ones(n) if sample_weight is None else sample_weight
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = np.where(ps > 0, rows**2 / omega[order], 0.0).sum(axis=1)
    return fitted, np.concatenate([c0[:, None], cb], axis=1), mu0, variance


def _block(design: LocalDesign, n: int, d: int, p: int) -> int:
    """Queries per direct-solve block: ``(k, n)`` arrays of ``d + 2q + p`` columns in budget."""
    per_query = 8.0 * n * (d + 2 * design.n_basis + p + 4)
    return max(1, int(get_config().working_memory * 2**20 // per_query))


def solve_rows(design: LocalDesign, local: LocalRows, Xq: np.ndarray, rows: np.ndarray,
               n_outputs: int) -> tuple[DirectRows, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`solve_direct` at the queries ``Xq[rows]``, in blocks within the memory budget.

    Rows whose weights are NaN or all zero (no visible key) are left out.

    Returns
    -------
    direct : DirectRows
        The rows solved and their variance factors.
    fitted : ndarray of shape (k, n_outputs)
    c : ndarray of shape (k, q)
    mu0 : ndarray of shape (k,)
    """
    n, d = local.keys.shape
    step = _block(design, n, d, n_outputs)
    parts = []
    for start in range(0, rows.size, step):
        idx = rows[start:start + step]
        P = local.weights(idx)
        ok = np.isfinite(P).all(axis=1) & (P.sum(axis=1) > 0)
        if ok.any():
            parts.append((idx[ok], *solve_direct(design, P[ok], local.keys, local.targets,
                                                  Xq[idx[ok]], local.sample_weight)))
    if not parts:
        q = design.n_basis
        return (DirectRows(np.zeros(0, int), np.zeros(0)), np.zeros((0, n_outputs)),
                np.zeros((0, q)), np.zeros(0))
    index, fitted, c, mu0, variance = (np.concatenate(a) for a in zip(*parts, strict=True))
    return DirectRows(index, variance), fitted, c, mu0


def solve_exact(design: LocalDesign, means: np.ndarray, Xq: np.ndarray, n_outputs: int,
                local: LocalRows | None, *, coef: bool = False
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, DirectRows]:
    """:meth:`LocalDesign.solve`, solving the rows it flags directly (:func:`solve_direct`).

    Parameters
    ----------
    design : LocalDesign
    means : ndarray of shape (m, P)
        Kernel-weighted means of ``design.values(...)`` at the queries ``Xq``.
    Xq : ndarray of shape (m, n_features)
    n_outputs : int
    local : LocalRows or None
        The keys, targets and weight rows of the same fit; ``None``: no direct
        solve (the moment solve stands).
    coef : bool
        As in :meth:`LocalDesign.solve`.

    Returns
    -------
    fitted, c, mu0
        As in :meth:`LocalDesign.solve`, the flagged rows solved directly.
    direct : DirectRows
        The rows solved directly and their variance factors.
    """
    fitted, c, mu0, inexact = design.solve_checked(means, Xq, n_outputs, coef=coef)
    rows = np.flatnonzero(inexact)
    if local is None or not rows.size:
        return fitted, c, mu0, DirectRows(np.zeros(0, int), np.zeros(0))
    direct, f, ci, m0 = solve_rows(design, local, Xq, rows, n_outputs)
    fitted[direct.index], mu0[direct.index] = f, m0
    if c is not None:
        c[direct.index] = ci
    return fitted, c, mu0, direct
