"""Local polynomial fits from kernel-weighted means of augmented values.

A local polynomial fit of degree ``D`` at a query ``x0`` is the weighted
least-squares problem

    min_beta  sum_j K(x0, x_j) w_j (y_j - phi(x_j - x0)^T beta)^2

with ``phi`` the monomials of degree ``<= D``; the fitted value is
``beta_0``. Its normal equations need only kernel-weighted means of the
monomials of the keys (degree ``<= 2D``) and of the monomials times ``y``.
Those means are one call of the engine on *augmented values*
``[w z^e ..., w z^a y ...]``; the shift to ``x0`` (a binomial expansion;
none is needed for degree 1) and a small solve per query happen here: the
intercept is eliminated, leaving the local covariance ``C`` of the
monomials, which is inverted through its eigenvalues with a spectral filter
(see :func:`filter_factors`). Degree 0 is Nadaraya-Watson: the means of
``[w y, w]`` (of ``y`` alone without weights) and one division.

Directions the local data cannot fix: an eigenvalue ``lambda`` of ``C`` below
``tau = 1e-10 max(lambda_max, 1)`` (:func:`cutoff`) belongs to a direction in
which the query's weighted neighbours spread less than ``1e-5`` of their
widest spread, or less than ``1e-5`` bandwidths (fewer distinct points than
the polynomial needs, or points whose kernel weight is negligible). The slope
along it is multiplied by ``x^8 / (1 + x^8)``, ``x = lambda / tau``: kept where
``x >> 1`` (a relative change of ``x^-8``), shrunk to zero where ``x << 1``, so
that the fit falls back to the local mean along such directions. The factor
is smooth, so a rounding error moves the fit in proportion and never switches
a direction on or off.

Coordinates are centred and scaled, ``z = (x - centre) / scale`` with the
scale the bandwidth (capped by the spread of the feature), so ``C`` is well
conditioned and the ridge is free of units. Where the training points lie so
many bandwidths from their centre that the powers of ``z`` in the augmented
values would overflow (:func:`moment_shift`; a bandwidth of ``1e-300`` on data
of unit spread), the moments are formed in coordinates ``2^k`` times coarser:
they then resolve no local covariance, and every row is solved from its
kernel weights (:func:`._direct.solve_exact`), which see only the neighbours
within reach of the kernel.

Normal equations square the conditioning of the local problem, and forming
``C = E[z z^T] - E[z] E[z]^T`` from moments about the global centre loses
about ``eps tr E[z z^T]`` of each entry more, the *floor* below which the
moments cannot tell an eigenvalue from zero (the moment solve filters at
``max(tau, floor)``). :meth:`LocalDesign.solve_checked` estimates, per query,
how far the filtered inverse and the extrapolation from the local mean to the
query amplify that rounding, and flags the rows where the fit could move by
more than ``1e4 eps`` (rounding of the local spread: an ill-conditioned or
nearly rank-deficient local covariance) or ``1e7 eps`` (rounding of
``tr E[z z^T]``: weights far from the centre on a tiny local spread) of the
targets' size, and the rows whose floor is above ``tau`` while an eigenvalue
is within reach of it.
:func:`._direct.solve_exact` solves those rows again from their kernel weights
by least squares on the weighted monomials (QR, then the same filter on the
singular values), which is accurate to the conditioning of the weighted design
itself.
"""

from __future__ import annotations

import functools
import itertools
from math import comb
from typing import Any

import numpy as np

from ..engine.grid import monomials as _grid_monomials

__all__ = ["LocalDesign", "cutoff", "filter_factors", "moment_bits", "moment_shift", "monomials"]

#: Eigenvalues of the local covariance below this fraction of the largest (or of one, in
#: coordinates scaled by the bandwidth) are filtered out, smoothly: see :func:`cutoff`.
RELATIVE_CUTOFF = 1e-10
#: A row is solved again from its kernel weights when the filtered inverse and the distance
#: to the query could amplify the rounding of the moments (``eps`` of the local spread)
#: beyond this factor ...
_CONDITION = 1e4
#: ... or the cancellation about the centre (``eps tr E[z z^T]``) beyond this one ...
_CANCELLATION = 1e7
#: ... or when the floor exceeds the cutoff and an eigenvalue lies below this many floors.
_REACH = 1e4
#: A variance factor is computed from the kernel weights when the terms of its quadratic form
#: in the moments exceed it by this factor (its rounding is then above ``1e8 eps``).
_VARIANCE = 1e8
#: The augmented values hold powers of the coordinates up to ``2 degree``, kept below
#: ``2^MOMENT_BITS`` (far queries and sums then still fit in the float range).
MOMENT_BITS = 600


def moment_bits(degree: int) -> int:
    """Largest ``b`` with coordinates ``|z| <= 2^b`` kept in the moments of a degree."""
    return MOMENT_BITS // (2 * max(degree, 1))


def moment_shift(offsets: np.ndarray, scale: np.ndarray, degree: int) -> int:
    """Exponent ``k >= 0`` of the coarser frame ``z / 2^k`` the moments need (0: none).

    Parameters
    ----------
    offsets : ndarray of shape (n, n_features)
        The keys minus the design's centre.
    scale : ndarray of shape (n_features,)
        The design's scale (positive).
    degree : int

    Returns
    -------
    int
        0 unless some ``|offset / scale|`` reaches ``2^moment_bits(degree)``; then
        the power of two that brings every coordinate below it (computed from
        exponents, so a ratio beyond the float range is no obstacle).
    """
    if degree == 0 or offsets.size == 0:
        return 0
    top = np.abs(offsets).max(axis=0)
    ratio_bits = np.frexp(top)[1] - np.frexp(scale)[1] + 1  # |offset / scale| < 2^ratio_bits
    return max(0, int(np.max(np.where(top > 0, ratio_bits, 0))) - moment_bits(degree))


def cutoff(lam_max: np.ndarray) -> np.ndarray:
    """The estimator's filter threshold ``tau = 1e-10 max(lambda_max, 1)``, shape ``(m,)``.

    A direction is given up when its spread is below ``1e-5`` of the widest
    one, or below ``1e-5`` bandwidths: points of negligible kernel weight then
    fix no slope however far away they lie.
    """
    return RELATIVE_CUTOFF * np.maximum(lam_max, 1.0)


def filter_factors(lam: np.ndarray, tau: np.ndarray | float) -> np.ndarray:
    """Share ``x^8 / (1 + x^8)`` of each eigen-direction's slope kept, ``x = lambda / tau``.

    One where ``lambda >> tau``, a smooth fall to zero below ``tau``: the slope
    along a direction the local data do not fix vanishes continuously.

    Parameters
    ----------
    lam : ndarray of shape (m, k)
        Eigenvalues (negative rounding noise counts as zero).
    tau : ndarray of shape (m,) or float
        Threshold of each row (``tau <= 0``: nothing is kept).

    Returns
    -------
    ndarray of shape (m, k)
    """
    tau = np.asarray(tau, float)
    tau = tau[:, None] if tau.ndim else tau
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv_x = np.where((lam > 0) & (tau > 0), tau / lam, np.inf)
        return 1.0 / (1.0 + inv_x**8)


#: Exponent tuples of all monomials of total degree ``<= degree``, constant first
#: (the grid engine's enumeration, cached: the estimators ask for it on every call).
monomials = functools.lru_cache(maxsize=64)(_grid_monomials)


@functools.lru_cache(maxsize=64)
def _structure(n_features: int, degree: int) -> tuple[Any, ...]:
    """Exponents, shift terms and Gram index of a design (shared by all designs alike)."""
    basis = monomials(n_features, degree)
    gram_exps = monomials(n_features, 2 * degree)
    index = {e: i for i, e in enumerate(gram_exps)}
    if degree == 0:
        return basis, gram_exps, index, [], [], np.zeros((1, 1), int)
    pairs = np.array([[index[tuple(a + b for a, b in zip(u, v, strict=True))] for v in basis]
                      for u in basis])
    return (basis, gram_exps, index, _shift_terms(gram_exps, index),
            _shift_terms(basis, index), pairs)


def _shift_terms(exps: list[tuple[int, ...]], index: dict[tuple[int, ...], int]
                 ) -> list[tuple[int, int, int, float]]:
    """Terms ``(e, c, g, coef)`` of ``E[(z - z0)^e] = sum_c coef (-z0)^g E[z^c]``."""
    terms = []
    for ei, e in enumerate(exps):
        for c in itertools.product(*(range(k + 1) for k in e)):
            g = tuple(a - b for a, b in zip(e, c, strict=True))
            coef = float(np.prod([comb(a, b) for a, b in zip(e, c, strict=True)]))
            terms.append((ei, index[c], index[g], coef))
    return terms


def _powers(z: np.ndarray, exps: list[tuple[int, ...]]) -> np.ndarray:
    """``z^e`` for every exponent, shape ``(n, len(exps))``."""
    out = np.ones((z.shape[0], len(exps)))
    for i, e in enumerate(exps):
        for f, k in enumerate(e):
            if k:
                out[:, i] *= z[:, f] ** k
    return out


class LocalDesign:
    """Augmented values and per-query solves of a local polynomial of one degree.

    Parameters
    ----------
    degree : int
        0 (Nadaraya-Watson), 1 (local linear), 2, ...
    centre, scale : ndarray of shape (n_features,)
        The coordinates ``z = (x - centre) / scale``.
    ridge : float
        Added to the eigenvalues of the local covariance of the monomials
        (the normal equations with the intercept eliminated); directions with
        a negligible eigenvalue are filtered out in any case (see :func:`filter_factors`).
    weighted : bool
        Whether values carry sample weights (a weight column is then smoothed too).
    extent : float
        Largest ``|z|^2`` of the keys. Local covariances come from moments
        about the centre, which costs about ``eps extent`` of accuracy in each
        entry (``eps (sqrt(extent) + |z0|)^(2 degree)`` above degree 1, where
        moments are shifted to the query), so eigenvalues below ``16 q`` times
        that (``q`` monomials), the floor, are rounding noise to the moment
        solve, which never filters below it (see :meth:`solve_checked`).
    shift : int, default 0
        The moments use ``z = (x - centre) / (scale 2^shift)`` (see
        :func:`moment_shift`); with ``shift > 0`` the moment solve gives only
        the local mean and flags every row for a solve from the kernel weights.
    """

    def __init__(self, degree: int, centre: np.ndarray, scale: np.ndarray, ridge: float,
                 weighted: bool, extent: float = 0.0, shift: int = 0) -> None:
        self.degree = degree
        self.centre = np.asarray(centre, float)
        self.scale = np.asarray(scale, float)
        self.shift = int(shift)
        self.frame = np.ldexp(self.scale, self.shift)
        self.ridge = float(ridge)
        self.weighted = weighted
        self.extent = float(extent)
        (self.basis, self.gram_exps, self._index, self._gram_terms, self._basis_terms,
         self._pair_index) = _structure(self.centre.shape[0], degree)
        self.n_basis = len(self.basis)

    # -- augmented values ----------------------------------------------------
    def n_values(self, n_outputs: int) -> int:
        """Number of columns :meth:`values` produces for ``n_outputs`` targets."""
        if self.degree == 0:
            return n_outputs + (1 if self.weighted else 0)
        return len(self.gram_exps) + self.n_basis * n_outputs

    def z(self, X: np.ndarray) -> np.ndarray:
        """Coordinates of the moments, ``(X - centre) / (scale 2^shift)``."""
        return (X - self.centre) / self.frame

    def floor(self, z0: np.ndarray) -> np.ndarray:
        """Rounding level of the local covariance at queries ``z0 (m, d)``, shape ``(m,)``.

        Weyl: a rounding of ``eps u`` in each entry moves the eigenvalues of the
        moment solve's local covariance by up to ``q`` times that, with
        ``u = max(extent, 1)`` for degree 1 and ``(sqrt(extent) + |z0|)^(2 degree)``
        above (moments shifted to the query).
        """
        q, eps = self.n_basis, np.finfo(float).eps
        if self.degree == 1:
            return np.full(z0.shape[0], 16.0 * q * eps * max(self.extent, 1.0))
        reach = np.sqrt(self.extent) + np.sqrt((z0**2).sum(1))
        return 16.0 * q * eps * reach ** (2 * self.degree)

    def values(self, X: np.ndarray, Y: np.ndarray | None, w: np.ndarray | None
               ) -> np.ndarray:
        """Augmented values ``(n, P)``; with ``Y=None`` only the weight/Gram columns.

        Degree 0: ``[w y, w]`` (``y`` without weights). Degree ``D >= 1``:
        ``[w z^e for |e| <= 2D] + [w z^a y_k for |a| <= D, k]``.
        """
        n = X.shape[0]
        omega = np.ones(n) if w is None else w
        if self.degree == 0:
            cols = [] if Y is None else [Y * omega[:, None] if self.weighted else Y]
            if self.weighted or Y is None:
                cols.append(omega[:, None])
            return np.concatenate(cols, axis=1)
        zg = _powers(self.z(X), self.gram_exps) * omega[:, None]
        if Y is None:
            return zg
        zb = zg[:, [self._index[a] for a in self.basis]]
        zy = (zb[:, :, None] * Y[:, None, :]).reshape(n, -1)
        return np.concatenate([zg, zy], axis=1)

    # -- per-query solves ---------------------------------------------------
    def _shifted(self, means: np.ndarray, z0: np.ndarray,
                 terms: list[tuple[int, int, int, float]], size: int) -> np.ndarray:
        """Means of ``(z - z0)^e`` from means of ``z^c``: ``(m, size, ...)``."""
        powers = _powers(-z0, self.gram_exps)
        out = np.zeros((means.shape[0], size, *means.shape[2:]))
        extra = (slice(None),) + (None,) * (means.ndim - 2)
        for e, c, g, coef in terms:
            out[:, e] += (coef * powers[:, g])[extra] * means[:, c]
        return out

    def gram(self, gram_means: np.ndarray, Xq: np.ndarray) -> np.ndarray:
        """Normal-equation matrices ``(m, q, q)`` at the queries (not normalized)."""
        mu = self._shifted(gram_means, self.z(Xq), self._gram_terms, len(self.gram_exps))
        return mu[:, self._pair_index]

    def solve(self, means: np.ndarray, Xq: np.ndarray, n_outputs: int, *,
              coef: bool = False) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Fitted values at the queries from the means of the augmented values.

        :meth:`solve_checked` without the flags (see there).
        """
        fitted, c, mu0, _ = self.solve_checked(means, Xq, n_outputs, coef=coef)
        return fitted, c, mu0

    def solve_checked(self, means: np.ndarray, Xq: np.ndarray, n_outputs: int, *,
                      coef: bool = False
                      ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """Fitted values at the queries from the means of the augmented values.

        Parameters
        ----------
        means : ndarray of shape (m, P)
            Kernel-weighted means (any positive per-row scale) of :meth:`values`.
        Xq : ndarray of shape (m, n_features)
        n_outputs : int
        coef : bool
            Also return ``c = G^{-1} e_0`` per query: the fitted value is
            ``sum_j K_j w_j phi(u_j)^T c / sum_j K_j w_j`` (smoother rows).

        Returns
        -------
        fitted : ndarray of shape (m, n_outputs)
            NaN for rows whose weights are all zero or NaN.
        c : ndarray of shape (m, q) or None
        mu0 : ndarray of shape (m,)
            Mean weight ``E_K[w]`` in the scale of ``means``.
        inexact : ndarray of shape (m,), bool
            Rows whose fit the rounding of the moments could move by more than
            ``1e4 eps`` (of the local spread, amplified by the filtered inverse
            and the distance ``1 + |E[u]|`` from the local mean to the query) or
            ``1e7 eps`` (of ``tr E[z z^T]``, the cancellation about the centre)
            of the targets' size: ill-conditioned or nearly rank-deficient
            local covariances, queries far from the centre on a tiny local
            spread. Also rows whose floor exceeds the :func:`cutoff` with an
            eigenvalue below ``1e4`` floors, which the moments cannot tell from
            zero (see :func:`._direct.solve_exact`); every row with weight when
            the moments use a coarser frame (``shift > 0``).
        """
        m = means.shape[0]
        inexact = np.zeros(m, bool)
        if self.degree == 0:
            if not self.weighted:
                ones = np.ones(m)
                return means[:, :n_outputs], (ones[:, None] if coef else None), ones, inexact
            mu0 = means[:, n_outputs]
            with np.errstate(invalid="ignore", divide="ignore"):
                fitted = means[:, :n_outputs] / mu0[:, None]
                c = np.where(mu0 > 0, 1.0, np.nan)[:, None] if coef else None
            fitted[~(mu0 > 0)] = np.nan
            return fitted, c, mu0, inexact
        ng, q = len(self.gram_exps), self.n_basis
        z0 = self.z(Xq)
        gram_means, ymeans = means[:, :ng], means[:, ng:].reshape(m, q, n_outputs)
        mu0 = gram_means[:, 0].copy()
        bad = ~(mu0 > 0) | ~np.isfinite(means).all(axis=1)
        safe = np.where(bad, 1.0, mu0)
        floor = self.floor(z0)
        if self.degree == 1:
            # the local covariance does not depend on the query: no shift needed
            mz = gram_means[:, 1:q] / safe[:, None]
            second = gram_means[:, self._pair_index[1:, 1:]] / safe[:, None, None]
            C = second - mz[:, :, None] * mz[:, None, :]
            my = ymeans[:, 0, :] / safe[:, None]
            cy = ymeans[:, 1:, :] / safe[:, None, None] - mz[:, :, None] * my[:, None, :]
            mean_u = mz - z0
            # each entry of C carries a rounding of about eps tr E[z z^T]
            unit = np.trace(second, axis1=1, axis2=2)
        else:
            G = self.gram(gram_means, Xq) / safe[:, None, None]
            rhs = self._shifted(ymeans, z0, self._basis_terms, q) / safe[:, None, None]
            mean_u = G[:, 1:, 0]
            C = G[:, 1:, 1:] - mean_u[:, :, None] * mean_u[:, None, :]
            my = rhs[:, 0, :]
            cy = rhs[:, 1:, :] - mean_u[:, :, None] * my[:, None, :]
            unit = floor / (16.0 * q * np.finfo(float).eps)
        C[bad] = np.eye(q - 1)
        Cinv, lam, gain = self._filtered_inverse(C, floor)
        lam_max = np.maximum(lam[:, -1], 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            # a rounding delta of C moves the slopes by delta * gain, the fit by |E[u]| times that
            gain = gain * (1.0 + np.sqrt((np.nan_to_num(mean_u) ** 2).sum(axis=1)))
            # the floor hides what the estimator keeps: an eigenvalue near or below it
            hidden = (floor > cutoff(lam_max)) & (lam[:, 0] < _REACH * floor)
            inexact = (((gain * lam_max > _CONDITION) | (gain * unit > _CANCELLATION) | hidden
                        | (self.shift > 0)) & ~bad)
        b = Cinv @ np.nan_to_num(cy)
        fitted = my - np.einsum("mk,mkp->mp", mean_u, b)
        fitted[bad] = np.nan
        c = None
        if coef:
            cb = -np.einsum("mij,mj->mi", Cinv, np.nan_to_num(mean_u))
            c = np.concatenate([(1.0 - np.einsum("mi,mi->m", mean_u, cb))[:, None], cb], axis=1)
            c[bad] = np.nan
        return fitted, c, mu0, inexact

    def _filtered_inverse(self, C: np.ndarray, floor: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Filtered inverses ``V diag(g) V^T`` of local covariances ``C (m, k, k)``.

        The gains are ``g = f / (lambda + ridge)`` with ``f`` the
        :func:`filter_factors` at ``max(cutoff, floor)``. Also returns the
        eigenvalues ``(m, k)`` (ascending) and the largest gain ``(m,)``: a
        rounding ``delta`` of ``C`` moves the fit by about ``delta`` times it,
        relative to the size of the slopes.
        """
        lam, V = np.linalg.eigh(0.5 * (C + np.swapaxes(C, 1, 2)))
        tau = np.maximum(cutoff(lam[:, -1]), floor)
        positive = np.where(lam > 0, lam, 1.0)
        gains = np.where(lam > 0, filter_factors(lam, tau) / (positive + self.ridge), 0.0)
        return (V * gains[:, None, :]) @ np.swapaxes(V, 1, 2), lam, gains.max(axis=1)

    def variance_factor(self, sq_means: np.ndarray, Xq: np.ndarray, c: np.ndarray,
                        mu0: np.ndarray, log_ratio: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """``sum_j S_qj^2 / w_j`` for each query: the variance of the fit over sigma^2.

        Parameters
        ----------
        sq_means : ndarray of shape (m, n_gram)
            Means of the weight/Gram columns under the squared kernel ``K^2``.
        Xq : ndarray of shape (m, n_features)
        c, mu0 : from :meth:`solve` (``coef=True``) with the kernel ``K``.
        log_ratio : ndarray of shape (m,)
            ``log sum_j K_j^2 - 2 log sum_j K_j``.

        Returns
        -------
        variance : ndarray of shape (m,)
        inexact : ndarray of shape (m,), bool
            Rows where the quadratic form cancels to less than ``1e-8`` of its
            terms (large coefficients about a distant centre), so that its
            rounding exceeds ``1e8 eps``: see :func:`._direct.solve_rows`.
        """
        ratio = np.exp(log_ratio)
        m = Xq.shape[0]
        if self.degree == 0:
            inexact = np.zeros(m, bool)
            if not self.weighted:
                return ratio, inexact
            return ratio * sq_means[:, 0] / mu0**2, inexact
        if self.degree == 1:
            # sum_j K_j^2 w_j (a + b.z_j)^2 with a = c_0 - b.z0: no shift to the query
            b = c[:, 1:]
            a = c[:, 0] - np.einsum("mi,mi->m", b, self.z(Xq))
            first = sq_means[:, self._pair_index[0, 1:]]
            second = sq_means[:, self._pair_index[1:, 1:]]
            quad = (a**2 * sq_means[:, 0] + 2.0 * a * np.einsum("mi,mi->m", b, first)
                    + np.einsum("mi,mij,mj->m", b, second, b))
            size = (a**2 * sq_means[:, 0] + 2.0 * np.abs(a) * np.einsum("mi,mi->m", np.abs(b),
                                                                       np.abs(first))
                    + np.einsum("mi,mij,mj->m", np.abs(b), np.abs(second), np.abs(b)))
        else:
            G2 = self.gram(sq_means, Xq)
            quad = np.einsum("mi,mij,mj->m", c, G2, c)
            size = np.einsum("mi,mij,mj->m", np.abs(c), np.abs(G2), np.abs(c))
        with np.errstate(invalid="ignore"):
            inexact = size > _VARIANCE * np.abs(quad)
        return ratio * quad / mu0**2, inexact
