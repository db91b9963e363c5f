"""Derivatives of a fitted kernel regression with respect to its continuous features.

Both fits are linear in the targets, and so are their derivatives:
``d yhat(x) / d x_d = sum_j a_xj y_j``. This module computes the derivatives
from engine passes (no ``m x n`` matrix) and, for standard errors and the
rows the passes cannot resolve to rounding, the linear weights ``a_xj``
themselves, from the kernel weights of a block of queries at a time.

Nadaraya-Watson, ``yhat = sum_j K_j w_j y_j / sum_j K_j w_j`` with a radial
kernel ``K = exp(s(r^2))``, ``r^2 = sum_d ((x_d - x_jd) / h_d)^2``: with
``g = -ds/dr^2`` (the profile's slope, :func:`neg_slope`),

    d yhat / d x_d = sum_j K_j g_j w_j (2 (x_jd - x_d) / h_d^2) (y_j - yhat) / sum_j K_j w_j.

``K g`` is a kernel of its own (its score is ``s + log g``), so the sum is one
engine pass with the values ``[w y, w, w z, w z y]`` in the design's centred
coordinates ``z``; for the Gaussian ``g = 1/2`` and the pass is the fit's own.
A row whose terms cancel by more than :data:`_CANCEL` (queries tens of
thousands of bandwidths from the data's centre) is computed from its kernel
weights instead.

Local polynomial: the derivative is the local slope, the coefficient of
``x_d - x0_d`` in the local fit, taken from the same moments and solve as the
fitted value (:class:`._design.LocalDesign`), with the eigen-filter of the
fit; rows the moment solve flags are solved from their kernel weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._config import get_config
from .._errors import NadarayaError
from ..engine import smooth, weights
from ..kernels import RADIAL, CallableKernel
from ._design import _powers, cutoff, filter_factors

__all__ = ["SLOPED", "continuous", "continuous_features", "gradient_pass", "linear_weights",
           "local_inverse", "neg_slope"]

#: Radial kernels with an analytic profile slope (the uniform kernel's fit is a step function).
SLOPED = ("gaussian", "laplacian", "matern32", "matern52", "cauchy", "epanechnikov", "tricube")
#: A row of the Nadaraya-Watson pass is recomputed from its kernel weights when its terms
#: exceed the weighted mean of ``|y|`` by this factor (a rounding above ``1e-11`` of it).
_CANCEL = 5e4


def neg_slope(name: str, r2: torch.Tensor) -> torch.Tensor:
    """``-d log K / d r^2`` of the radial kernel ``name`` at squared scaled distances ``r2``.

    Zero where the kernel vanishes, and at ``r = 0`` for the Laplacian and
    tricube kernels, whose slope there multiplies a zero offset (the
    Laplacian's derivative at a training point is the mean of its one-sided
    ones).
    """
    zero = torch.zeros_like(r2)
    if name == "gaussian":
        return torch.full_like(r2, 0.5)
    if name == "laplacian":
        r = torch.sqrt(r2)
        return torch.where(r > 0, 0.5 / torch.where(r > 0, r, 1.0), zero)
    if name == "matern32":
        return 1.5 / (1.0 + torch.sqrt(3.0 * r2))
    if name == "matern52":
        t = torch.sqrt(5.0 * r2)
        return 5.0 * (1.0 + t) / (6.0 * (1.0 + t + t * t / 3.0))
    if name == "cauchy":
        return 1.0 / (1.0 + r2)
    if name == "epanechnikov":
        inside = r2 < 1.0
        return torch.where(inside, 1.0 / (1.0 - torch.where(inside, r2, 0.0)), zero)
    if name == "tricube":
        r = torch.sqrt(r2)
        inside = r < 1.0
        return torch.where(inside, 4.5 * r / torch.where(inside, 1.0 - r**3, 1.0), zero)
    raise NadarayaError(f"kernel {name!r} has no profile slope; use one of {SLOPED}.")


def continuous(est: Any) -> np.ndarray:
    """Whether each feature is continuous, shape ``(d,)``."""
    types = est._types or "c" * est.n_features_in_
    return np.array([t == "c" for t in types], dtype=bool)


def continuous_features(est: Any) -> tuple[np.ndarray, np.ndarray]:
    """Continuous features in the kernel, and the continuous ones smoothed out (bool ``(d,)``)."""
    cont = continuous(est)
    if est.bandwidth_ is None:
        return cont, np.zeros_like(cont)
    flat = cont & ~np.isfinite(_bandwidths(est))
    return cont & ~flat, flat


def _bandwidths(est: Any) -> np.ndarray:
    d = est.n_features_in_
    return np.broadcast_to(np.asarray(est.bandwidth_, float), (d,)).astype(float)


def _kernel_name(est: Any) -> str | None:
    kernel = est.kernel
    return kernel.lower() if isinstance(kernel, str) and kernel.lower() in RADIAL else None


def _derivative_kernel(est: Any, active: np.ndarray) -> CallableKernel:
    """The kernel ``K g`` (score ``s + log g``) on the active features, times the categorical."""
    name = _kernel_name(est)
    assert name is not None
    cols = torch.as_tensor(np.flatnonzero(active))
    h = torch.as_tensor(_bandwidths(est)[active], dtype=torch.float64)
    profile = RADIAL[name](1.0).profile
    rest = None
    if est._mixed is not None:
        # the categorical factors: the same product with every continuous feature smoothed out
        hcat = np.where(est._mixed.discrete, _bandwidths(est), np.inf)
        rest = est._mixed.kernel_spec(name, hcat).kernel

    def score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        u = (q[:, None, cols] - k[None, :, cols]) / h.to(q)
        r2 = u.square().sum(-1)
        with torch.no_grad():
            out = profile(r2.clone()) + torch.log(neg_slope(name, r2))
        return out if rest is None else out + rest.score(q, k)

    return CallableKernel(score)


def gradient_pass(est: Any, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Derivatives at ``X`` of the fit to targets ``Y`` (frame), shape ``(m, d, p)``.

    Continuous features in the kernel get their derivative, continuous
    features smoothed out 0 for Nadaraya-Watson, categorical features NaN.
    """
    active, flat = continuous_features(est)
    m, d = X.shape
    p = Y.shape[1]
    out = np.full((m, d, p), np.nan)
    if est._design_.degree == 0:
        out[:, flat] = 0.0
        if active.any():
            if _kernel_name(est) in SLOPED:
                grad, again = _nw_pass(est, X, Y, active)
            else:
                grad, again = np.empty((m, int(active.sum()), p)), np.arange(m)
            if _redo(est, again, m):
                grad[again] = linear_weights(est, X[again], Y, active)[0]
            out[:, active] = grad
        return out
    slopes, again = _lp_pass(est, X, Y)
    if _redo(est, again, m):
        slopes[again] = linear_weights(est, X[again], Y, continuous(est))[0]
    cont = continuous(est)
    out[:, cont] = slopes[:, cont]
    return out


def _redo(est: Any, rows: np.ndarray, m: int) -> bool:
    """Whether to recompute ``rows`` of ``m`` queries from their kernel weights.

    Not a strict subset with a user ``mask``, whose meaning may depend on the
    query's index (the moment results stand, as for :meth:`predict`).
    """
    return bool(rows.size) and (est.mask is None or rows.size == m)


def _nw_pass(est: Any, X: np.ndarray, Y: np.ndarray, active: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Nadaraya-Watson derivatives on the active features by engine passes; rows to redo."""
    design, keys = est._design_, est.X_fit_
    n, p = Y.shape
    omega = np.ones(n) if est._omega is None else est._omega
    centre, scale = design.centre[active], design.scale[active]
    z = (keys[:, active] - centre) / scale
    z0 = (X[:, active] - centre) / scale
    c = z.shape[1]
    wz = omega[:, None] * z
    wy = omega[:, None] * Y
    wzy = (wz[:, :, None] * Y[:, None, :]).reshape(n, -1)
    values = np.concatenate([wy, omega[:, None], wz, wzy], axis=1)
    h = _bandwidths(est)[active]
    name = _kernel_name(est)
    if name == "gaussian":
        mG, lse = est._means(X, values=values, return_lse=True)
        mK, ratio, factor = mG[:, :p + 1], np.ones(X.shape[0]), 1.0 / h**2
    else:
        mK, lse = est._means(X, values=values[:, :p + 1], return_lse=True)
        mG, lseG = smooth(X, keys, values, _derivative_kernel(est, active), est.mask,
                          return_lse=True, empty="nan")
        with np.errstate(invalid="ignore", over="ignore"):
            ratio = np.where(np.isfinite(lseG), np.exp(lseG - lse), 0.0)
        mG = np.where(np.isfinite(lseG)[:, None], mG, 0.0)
        factor = 2.0 / h**2
    with np.errstate(invalid="ignore", divide="ignore"):
        yhat = mK[:, :p] / mK[:, p:p + 1]
        Ewy, Ew = mG[:, :p], mG[:, p]
        Ewz, Ewzy = mG[:, p + 1:p + 1 + c], mG[:, p + 1 + c:].reshape(-1, c, p)
        num = (Ewzy - z0[:, :, None] * Ewy[:, None, :]
               - yhat[:, None, :] * (Ewz - z0 * Ew[:, None])[:, :, None])
        size = (np.abs(Ewzy) + np.abs(z0)[:, :, None] * np.abs(Ewy)[:, None, :]
                + np.abs(yhat)[:, None, :] * (np.abs(Ewz) + np.abs(z0) * Ew[:, None])[:, :, None])
        grad = (factor * scale)[None, :, None] * (ratio / mK[:, p])[:, None, None] * num
    top = np.abs(Y).max(axis=0) if n else np.zeros(p)
    again = np.flatnonzero((size > _CANCEL * Ew[:, None, None] * top).any(axis=(1, 2))
                           & np.isfinite(grad).all(axis=(1, 2)))
    if est.empty == "nearest":
        grad[~np.isfinite(lse)] = 0.0  # the nearest key's value: constant near the query
    return grad, again


def _lp_pass(est: Any, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local slopes ``(m, d, p)`` from the moments (NaN off continuous features); rows to redo."""
    design = est._design_
    means = est._means(X, values=design.values(est.X_fit_, Y, est._omega))
    Cinv, _, cy, bad, inexact = local_inverse(design, means, X, Y.shape[1])
    slopes = _linear_terms(design, Cinv @ np.nan_to_num(cy), design.frame)
    slopes[bad] = np.nan
    return slopes, np.flatnonzero(inexact & ~bad)


def local_inverse(design: Any, means: np.ndarray, X: np.ndarray, p: int) -> tuple[np.ndarray, ...]:
    """The moment solve of :meth:`LocalDesign.solve_checked`, keeping what the slopes need.

    Returns
    -------
    Cinv : ndarray of shape (m, q - 1, q - 1)
        Filtered inverse of the local covariance of the monomials.
    mean_u : ndarray of shape (m, q - 1)
        Kernel-weighted mean of the monomials of ``u = z - z0``.
    cy : ndarray of shape (m, q - 1, p)
        Local covariance of the monomials and the targets.
    bad, inexact : ndarray of shape (m,), bool
        Rows without weight; rows the moments cannot fix to rounding.
    """
    _, _, _, inexact = design.solve_checked(means, X, p)
    m = X.shape[0]
    ng, q = len(design.gram_exps), design.n_basis
    z0 = design.z(X)
    gram_means, ymeans = means[:, :ng], means[:, ng:].reshape(m, q, p)
    mu0 = gram_means[:, 0]
    bad = ~(mu0 > 0) | ~np.isfinite(means).all(axis=1)
    safe = np.where(bad, 1.0, mu0)
    if design.degree == 1:
        mz = gram_means[:, 1:q] / safe[:, None]
        second = gram_means[:, design._pair_index[1:, 1:]] / safe[:, None, None]
        C = second - mz[:, :, None] * mz[:, None, :]
        my = ymeans[:, 0, :] / safe[:, None]
        cy = ymeans[:, 1:, :] / safe[:, None, None] - mz[:, :, None] * my[:, None, :]
        mean_u = mz - z0
    else:
        G = design.gram(gram_means, X) / safe[:, None, None]
        rhs = design._shifted(ymeans, z0, design._basis_terms, q) / safe[:, None, None]
        mean_u = G[:, 1:, 0]
        C = G[:, 1:, 1:] - mean_u[:, :, None] * mean_u[:, None, :]
        cy = rhs[:, 1:, :] - mean_u[:, :, None] * rhs[:, 0, :][:, None, :]
    C[bad] = np.eye(q - 1)
    Cinv, _, _ = design._filtered_inverse(C, design.floor(z0))
    return Cinv, mean_u, cy, bad, inexact & ~bad


def _linear_terms(design: Any, b: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """Coefficients of ``x_d - x0_d`` from those of the monomials ``basis[1:]``, ``(m, d, ...)``."""
    d = design.centre.shape[0]
    out = np.full((b.shape[0], d, *b.shape[2:]), np.nan)
    for i, e in enumerate(design.basis[1:]):
        if sum(e) == 1:
            j = e.index(1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, j] = b[:, i] / frame[j]
    return out


def _block(est: Any, k: int, width: int) -> int:
    per_query = 8.0 * est.X_fit_.shape[0] * (width + 6)
    return max(1, min(k, int(get_config().working_memory * 2**20 // per_query)))


def linear_weights(est: Any, X: np.ndarray, Y: np.ndarray | None, features: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Derivatives and their linear weights from the kernel weights, block by block.

    Parameters
    ----------
    est : fitted regressor
    X : ndarray of shape (m, d)
    Y : ndarray of shape (n, p) or None
        Targets in the fit's frame (None: weights only).
    features : ndarray of shape (d,), bool
        The features to differentiate along (continuous, in the kernel or not).

    Returns
    -------
    grad : ndarray of shape (m, k, p)
        ``k = features.sum()``; NaN rows for queries without weight.
    total : ndarray of shape (k, n) or None
        ``sum_x a_x`` over the queries (for averages).
    variance : ndarray of shape (m, k)
        ``sum_j a_xj^2 / w_j``, the derivative's variance over ``sigma^2``.
    """
    if est.mask is not None and X.shape[0] > _block(est, X.shape[0], 4 * est.n_features_in_):
        raise NadarayaError(
            "standard errors of the derivatives with a mask need the kernel weights of all "
            f"{X.shape[0]} queries at once, beyond the working-memory budget; raise it with "
            "nadaraya.config_context(working_memory=...) or ask for fewer queries."
        )
    keys, spec = est.X_fit_, est._spec
    n = keys.shape[0]
    omega = np.ones(n) if est._omega is None else est._omega
    idx = np.flatnonzero(features)
    p = 0 if Y is None else Y.shape[1]
    m = X.shape[0]
    grad = np.full((m, idx.size, p), np.nan)
    variance = np.full((m, idx.size), np.nan)
    total = np.zeros((idx.size, n))
    step = _block(est, m, 4 * est.n_features_in_ + 2 * idx.size)
    for start in range(0, m, step):
        rows = slice(start, min(start + step, m))
        A = _weights_block(est, X[rows], idx, spec, omega)  # (k, c, n)
        ok = np.isfinite(A).all(axis=(1, 2))
        A = np.where(ok[:, None, None], A, 0.0)
        if Y is not None:
            g = np.einsum("kcn,np->kcp", A, Y)
            g[~ok] = np.nan
            grad[rows] = g
        v = np.einsum("kcn,n->kc", A**2, 1.0 / omega)
        v[~ok] = np.nan
        variance[rows] = v
        total += A.sum(axis=0)
    return grad, total, variance


def _weights_block(est: Any, X: np.ndarray, idx: np.ndarray, spec: Any, omega: np.ndarray
                   ) -> np.ndarray:
    """``a_xj`` of the derivatives along features ``idx`` at a block of queries, ``(k, c, n)``."""
    keys = est.X_fit_
    design = est._design_

    def rows(Xq: np.ndarray) -> np.ndarray:
        W = weights(Xq, keys, spec.kernel, est.mask, bandwidth=spec.bandwidth, empty="nan")
        P = W * omega
        with np.errstate(invalid="ignore", divide="ignore"):
            return P / P.sum(axis=1, keepdims=True)

    pn = rows(X)
    k, n = pn.shape
    if design.degree == 0:
        h = _bandwidths(est)[idx] if est.bandwidth_ is not None else None
        name = _kernel_name(est)
        if name in SLOPED and h is not None:
            active = np.isfinite(_bandwidths(est)) & continuous(est)
            hh = _bandwidths(est)[active]
            u_all = (keys[None, :, active] - X[:, None, active]) / hh
            r2 = (u_all**2).sum(-1)
            g = neg_slope(name, torch.as_tensor(r2)).numpy()
            with np.errstate(invalid="ignore", over="ignore"):
                phi = 2.0 * g[:, :, None] * (keys[None, :, idx] - X[:, None, idx]) / h**2
            phi = np.where(np.isfinite(h), phi, 0.0)
            phi = np.where((pn > 0)[:, :, None], phi, 0.0)
            mean = np.einsum("kn,knc->kc", np.nan_to_num(pn), phi)
            return np.swapaxes(pn[:, :, None] * (phi - mean[:, None, :]), 1, 2)
        # a kernel object: central differences of the smoother rows
        A = np.empty((k, idx.size, n))
        for i, j in enumerate(idx):
            step = np.cbrt(np.finfo(float).eps) * max(float(design.scale[j]), 1e-300)
            up, down = X.copy(), X.copy()
            up[:, j] += step
            down[:, j] -= step
            A[:, i] = (rows(up) - rows(down)) / (up[:, j] - down[:, j])[:, None]
        return A
    seen = pn > 0
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.where(seen[:, :, None], (keys[None] - X[:, None]) / design.scale, 0.0)
    u = np.nan_to_num(u, nan=0.0, posinf=0.0, neginf=0.0)
    q = design.n_basis
    phi = _powers(u.reshape(k * n, -1), design.basis[1:]).reshape(k, n, q - 1)
    p0 = np.nan_to_num(pn)
    mean_phi = np.einsum("kn,knj->kj", p0, phi)
    centred = phi - mean_phi[:, None, :]
    _, s, Vt = np.linalg.svd(np.sqrt(p0)[:, :, None] * centred, full_matrices=False)
    lam = s**2
    gains = np.where(lam > 0, filter_factors(lam, cutoff(lam[:, 0]))
                     / (np.where(lam > 0, lam, 1.0) + design.ridge), 0.0)
    Cinv = np.swapaxes(Vt, 1, 2) @ (gains[:, :, None] * Vt)
    W = np.einsum("kab,knb->kan", Cinv, centred * p0[:, :, None])  # (k, q - 1, n)
    A = _linear_terms(design, W, design.scale)[:, idx]
    A[~np.isfinite(pn).all(axis=1)] = np.nan
    return A
