"""Local polynomial fits from kernel-weighted means of augmented values.

A local polynomial fit of degree ``D`` at a query ``x0`` is the weighted
least-squares problem

    min_beta  sum_j K(x0, x_j) w_j (y_j - phi(x_j - x0)^T beta)^2

with ``phi`` the monomials of degree ``<= D``; the fitted value is
``beta_0``. Its normal equations need only kernel-weighted means of the
monomials of the keys (degree ``<= 2D``) and of the monomials times ``y``.
Those means are one call of the engine on *augmented values*
``[w z^e ..., w z^a y ...]``; the shift to ``x0`` (a binomial expansion;
none is needed for degree 1) and a small regularized solve per query happen
here: the intercept is eliminated, leaving the local covariance ``C`` of the
monomials, which is inverted with its negligible eigenvalues dropped (a
query that sees too few distinct points keeps the local mean). Degree 0 is
Nadaraya-Watson: the means of ``[w y, w]`` (of ``y`` alone without weights)
and one division.

Coordinates are centred and scaled, ``z = (x - centre) / scale`` with the
scale the bandwidth (capped by the spread of the feature), so ``C`` is well
conditioned and the ridge is free of units.

Forming ``C = E[z z^T] - E[z] E[z]^T`` from moments about the global centre
loses about ``eps tr E[z z^T]`` of each entry. That is harmless unless a
query's weights sit far from the centre on a tiny local spread (a query many
bandwidths away from the data in several dimensions): :meth:`LocalDesign.solve_checked`
flags such rows, and :func:`solve_exact` refits each of them from a second
engine pass about its own local mean (:meth:`LocalDesign.recentred`), which
is exact to the conditioning of ``C`` itself.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from math import comb
from typing import Any

import numpy as np

from ..engine._lattice import monomials as _grid_monomials

__all__ = ["LocalDesign", "monomials", "solve_exact"]

#: A degree-1 row is refitted about its own mean when ``tr E[z z^T]`` exceeds its
#: smallest kept eigenvalue by this factor (that eigenvalue then carries a rounding
#: error above ``1e8 eps``, about ``2e-8`` relative) ...
_CANCELLATION = 1e8
#: ... and exceeds ``tr C`` by this factor (centring then at least halves that error).
_GAIN = 2.0


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
        a negligible eigenvalue are dropped in any case.
    weighted : bool
        Whether values carry sample weights (a weight column is then smoothed too).
    extent : float or None
        Largest ``|z|^2`` of the keys. Local covariances come from moments
        about the centre, which costs about ``eps extent`` of accuracy in each
        entry (``eps (sqrt(extent) + |z0|)^(2 degree)`` above degree 1, where
        moments are shifted to the query), so eigenvalues below ``16 q`` times
        that (``q`` monomials) are rounding noise and are dropped: a query
        whose neighbourhood is too thin to fix a slope gets the local mean
        instead of noise. ``None`` (a design centred on one query's local
        mean, see :meth:`recentred`): each row's own ``tr E[z z^T]`` is used.
    """

    def __init__(self, degree: int, centre: np.ndarray, scale: np.ndarray, ridge: float,
                 weighted: bool, extent: float | None = 0.0) -> None:
        self.degree = degree
        self.centre = np.asarray(centre, float)
        self.scale = np.asarray(scale, float)
        self.ridge = float(ridge)
        self.weighted = weighted
        self.extent = None if extent is None else float(extent)
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
        return (X - self.centre) / self.scale

    def recentred(self, means: np.ndarray) -> LocalDesign:
        """The same design centred on the local mean of one row of ``means`` (degree 1).

        Parameters
        ----------
        means : ndarray of shape (P,)
            Kernel-weighted means of :meth:`values` at one query.
        """
        mz = means[1:self.n_basis] / means[0]
        return LocalDesign(self.degree, self.centre + mz * self.scale, self.scale, self.ridge,
                           self.weighted, None)

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
            Rows whose local covariance lost too much to cancellation about the
            centre (degree 1 with an ``extent`` only; see :func:`solve_exact`).
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
        eps = np.finfo(float).eps
        if self.degree == 1:
            # the local covariance does not depend on the query: no shift needed
            mz = gram_means[:, 1:q] / safe[:, None]
            second = gram_means[:, self._pair_index[1:, 1:]] / safe[:, None, None]
            C = second - mz[:, :, None] * mz[:, None, :]
            my = ymeans[:, 0, :] / safe[:, None]
            cy = ymeans[:, 1:, :] / safe[:, None, None] - mz[:, :, None] * my[:, None, :]
            mean_u = mz - z0
            # Weyl: rounding of about eps * extent in each entry moves eigenvalues by d times it
            spread = np.trace(second, axis1=1, axis2=2)
            unit = spread if self.extent is None else max(self.extent, 1.0)
            floor = np.broadcast_to(16.0 * q * eps * unit, (m,))
        else:
            G = self.gram(gram_means, Xq) / safe[:, None, None]
            rhs = self._shifted(ymeans, z0, self._basis_terms, q) / safe[:, None, None]
            mean_u = G[:, 1:, 0]
            C = G[:, 1:, 1:] - mean_u[:, :, None] * mean_u[:, None, :]
            my = rhs[:, 0, :]
            cy = rhs[:, 1:, :] - mean_u[:, :, None] * my[:, None, :]
            reach = np.sqrt(self.extent or 0.0) + np.sqrt((z0**2).sum(1))
            floor = 16.0 * q * eps * reach ** (2 * self.degree)
        C[bad] = np.eye(q - 1)
        Cinv, smallest = self._pinv(C, floor)
        if self.degree == 1 and self.extent is not None:
            with np.errstate(invalid="ignore"):
                inexact = ((spread > _CANCELLATION * smallest)
                         & (spread > _GAIN * np.trace(C, axis1=1, axis2=2)) & ~bad)
        b = Cinv @ np.nan_to_num(cy)
        fitted = my - np.einsum("mk,mkp->mp", mean_u, b)
        fitted[bad] = np.nan
        c = None
        if coef:
            cb = -np.einsum("mij,mj->mi", Cinv, np.nan_to_num(mean_u))
            c = np.concatenate([(1.0 - np.einsum("mi,mi->m", mean_u, cb))[:, None], cb], axis=1)
            c[bad] = np.nan
        return fitted, c, mu0, inexact

    def _pinv(self, C: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Regularized inverses ``(m, k, k)`` of local covariances ``C``.

        Eigenvalues below ``max(1e-10 lambda_max, floor)`` are dropped (those
        directions keep no slope: the fit there is the local mean), and
        ``ridge`` is added to the others. Also returns the smallest kept
        eigenvalue of each row, shape ``(m,)`` (``inf`` where none is kept).
        """
        lam, V = np.linalg.eigh(0.5 * (C + np.swapaxes(C, 1, 2)))
        cutoff = np.maximum(1e-10 * lam[:, -1:], floor[:, None])
        kept = lam > cutoff
        inv = np.where(kept, 1.0 / np.where(kept, lam + self.ridge, 1.0), 0.0)
        smallest = np.where(kept, lam, np.inf).min(axis=1)
        return (V * inv[:, None, :]) @ np.swapaxes(V, 1, 2), smallest

    def variance_factor(self, sq_means: np.ndarray, Xq: np.ndarray, c: np.ndarray,
                        mu0: np.ndarray, log_ratio: np.ndarray) -> np.ndarray:
        """``sum_j S_qj^2 / w_j`` for each query: the variance of the fit over sigma^2.

        Parameters
        ----------
        sq_means : ndarray of shape (m, n_gram)
            Means of the weight/Gram columns under the squared kernel ``K^2``.
        Xq : ndarray of shape (m, n_features)
        c, mu0 : from :meth:`solve` (``coef=True``) with the kernel ``K``.
        log_ratio : ndarray of shape (m,)
            ``log sum_j K_j^2 - 2 log sum_j K_j``.
        """
        ratio = np.exp(log_ratio)
        if self.degree == 0:
            if not self.weighted:
                return ratio
            return ratio * sq_means[:, 0] / mu0**2
        if self.degree == 1:
            # sum_j K_j^2 w_j (a + b.z_j)^2 with a = c_0 - b.z0: no shift to the query
            b = c[:, 1:]
            a = c[:, 0] - np.einsum("mi,mi->m", b, self.z(Xq))
            first = sq_means[:, self._pair_index[0, 1:]]
            second = sq_means[:, self._pair_index[1:, 1:]]
            quad = (a**2 * sq_means[:, 0] + 2.0 * a * np.einsum("mi,mi->m", b, first)
                    + np.einsum("mi,mij,mj->m", b, second, b))
        else:
            G2 = self.gram(sq_means, Xq)
            quad = np.einsum("mi,mij,mj->m", c, G2, c)
        return ratio * quad / mu0**2


def solve_exact(design: LocalDesign, means: np.ndarray, Xq: np.ndarray, n_outputs: int,
                local_means: Callable[[int, LocalDesign], np.ndarray] | None, *,
                coef: bool = False
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, dict[int, LocalDesign]]:
    """:meth:`LocalDesign.solve`, refitting the rows it flags about their own local mean.

    Parameters
    ----------
    design : LocalDesign
    means : ndarray of shape (m, P)
        Kernel-weighted means of ``design.values(...)`` at the queries ``Xq``.
    Xq : ndarray of shape (m, n_features)
    n_outputs : int
    local_means : callable or None
        ``local_means(i, local)`` returns the means ``(1, P)`` of
        ``local.values(...)`` (the same keys, targets and weights as
        ``means``) at query ``i``: one engine pass. ``None``: no refit.
    coef : bool
        As in :meth:`LocalDesign.solve`; ``c`` does not depend on the centre.

    Returns
    -------
    fitted, c, mu0
        As in :meth:`LocalDesign.solve`, refitted rows replaced.
    refitted : dict
        Row index -> the recentred design of that row.
    """
    fitted, c, mu0, inexact = design.solve_checked(means, Xq, n_outputs, coef=coef)
    refitted: dict[int, LocalDesign] = {}
    if local_means is None:
        return fitted, c, mu0, refitted
    for i in np.flatnonzero(inexact).tolist():
        local = design.recentred(means[i])
        row = local_means(i, local)
        f, ci, m0, _ = local.solve_checked(row, Xq[i:i + 1], n_outputs, coef=coef)
        if not np.isfinite(f).all():
            continue
        fitted[i], mu0[i] = f[0], m0[0]
        if c is not None and ci is not None:
            c[i] = ci[0]
        refitted[i] = local
    return fitted, c, mu0, refitted
