"""Radial profiles ``K(z) = f(||z||)`` at unit bandwidth, with the bounds binning needs.

For each kernel the binned method needs, on any interval ``[lo, hi]`` of the
radius:

- ``curvature_max(lo, hi, d)``: an upper bound of ``D_d(r)`` over the interval,
  where ``D_1 = |f''|`` and ``D_2 = max(|f''|, |f'| / r)``. In ``d`` dimensions
  ``d2K/dz_i^2 = f'' a_i + (f' / r) (1 - a_i)`` with ``a_i = (z_i / r)^2``, a
  mean of ``f''`` and ``f' / r``, so ``|d2K/dz_i^2| <= D_d`` for every axis.
  Kinks (radii where ``f'`` jumps) are left out here and listed in ``kinks``.
- ``slope_max(lo, hi)``: an upper bound of ``|f'|`` (the gradient's norm), the
  Lipschitz constant of ``K`` on any convex set whose radii lie in the interval.
- ``kinks``: ``(radius, jump)`` pairs: ``f'`` jumps by at most ``jump``.
- ``tail_radius(theta)``: a radius beyond which ``f <= theta``.
- ``sample_error(r2)``: a bound on the absolute rounding error of
  :meth:`Profile.value` at a squared radius computed with a relative error of
  at most 3 ulps.

The maxima are exact maxima of the stated functions: each is the largest of
its values at ``lo``, at ``hi`` and at the interior local maxima (``peaks``)
inside the interval, or, for the tricube, a sum of unimodal terms each
maximized the same way. Beyond their last peak every function here decreases,
so an interval end past ``_FAR`` is evaluated at ``_FAR`` (no ``inf * 0``).
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels import Cauchy, Epanechnikov, Gaussian, Kernel, Laplacian, Tricube

__all__ = ["PROFILES", "Profile", "profile_of"]

_U = 2.0**-53  # unit roundoff of float64
_FAR = 1e6


def _peak_max(fn, lo: np.ndarray, hi: np.ndarray, peaks: tuple[float, ...]) -> np.ndarray:
    """``max fn`` over each ``[lo, hi]``: ends and interior local maxima ``peaks``."""
    lo, hi = np.minimum(lo, _FAR), np.minimum(hi, _FAR)
    out = np.maximum(fn(lo), fn(hi))
    for p in peaks:
        inside = (lo <= p) & (p <= hi)
        out = np.where(inside, np.maximum(out, fn(np.float64(p))), out)
    return out


def _unimodal_max(fn, lo: np.ndarray, hi: np.ndarray, peak: float) -> np.ndarray:
    """``max fn`` over each ``[lo, hi]`` for ``fn`` rising to ``peak``, then falling."""
    return fn(np.clip(peak, np.minimum(lo, _FAR), np.minimum(hi, _FAR)))


class Profile:
    """A radial profile ``f`` and its bounds (see the module docstring).

    Attributes
    ----------
    name : str
        The kernel's name.
    support : float
        Radius beyond which ``f`` is zero (``inf`` if none).
    kinks : tuple of (float, float)
        ``(radius, jump)``: radii where ``f'`` jumps, by at most ``jump``.
    outreach : float
        Bandwidths beyond the keys' box past which no query's bound can pass:
        for the Gaussian ``D_d / f`` grows like ``r^2``, so there the bound
        exceeds the total's share of the tolerance many times over.
    """

    name = ""
    support = math.inf
    kinks: tuple[tuple[float, float], ...] = ()
    outreach = math.inf

    def value(self, r2: np.ndarray) -> np.ndarray:
        """``f(r)`` from the squared radius ``r2``."""
        raise NotImplementedError

    def sample_error(self, r2: np.ndarray) -> np.ndarray:
        """Absolute rounding error bound of :meth:`value` (``r2`` within 3 ulps)."""
        raise NotImplementedError

    def curvature_max(self, lo: np.ndarray, hi: np.ndarray, d: int) -> np.ndarray:
        """Upper bound of ``D_d`` over ``[lo, hi]`` (``inf`` where unbounded)."""
        raise NotImplementedError

    def slope_max(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Upper bound of ``|f'|`` over ``[lo, hi]``."""
        raise NotImplementedError

    def tail_radius(self, theta: float) -> float:
        """A radius ``R`` with ``f(r) <= theta`` for every ``r >= R`` (``0 < theta < 1``)."""
        raise NotImplementedError


class _Gaussian(Profile):
    name = "gaussian"
    outreach = 4.0

    def value(self, r2):
        return np.exp(-0.5 * r2)

    def sample_error(self, r2):
        # argument off by 1.5 u r2, exp within 2 u
        return self.value(r2) * _U * (2.0 * r2 + 4.0)

    def curvature_max(self, lo, hi, d):
        if d == 1:
            def fn(r):
                return np.abs(r * r - 1.0) * np.exp(-0.5 * r * r)
        else:
            def fn(r):
                return np.maximum(np.abs(r * r - 1.0), 1.0) * np.exp(-0.5 * r * r)
        return _peak_max(fn, lo, hi, (0.0, math.sqrt(3.0)))

    def slope_max(self, lo, hi):
        return _unimodal_max(lambda r: r * np.exp(-0.5 * r * r), lo, hi, 1.0)

    def tail_radius(self, theta):
        return math.sqrt(2.0 * math.log(1.0 / theta))


class _Laplacian(Profile):
    name = "laplacian"
    kinks = ((0.0, 2.0),)

    def value(self, r2):
        return np.exp(-np.sqrt(r2))

    def sample_error(self, r2):
        return self.value(r2) * _U * (3.0 * np.sqrt(r2) + 4.0)

    def curvature_max(self, lo, hi, d):
        lo = np.minimum(lo, _FAR)
        if d == 1:
            return np.exp(-lo)
        with np.errstate(divide="ignore"):
            return np.exp(-lo) * np.maximum(1.0, 1.0 / lo)  # inf at the apex

    def slope_max(self, lo, hi):
        return np.exp(-np.minimum(lo, _FAR))

    def tail_radius(self, theta):
        return math.log(1.0 / theta)


class _Cauchy(Profile):
    name = "cauchy"

    def value(self, r2):
        return 1.0 / (1.0 + r2)

    def sample_error(self, r2):
        return self.value(r2) * _U * 6.0

    def curvature_max(self, lo, hi, d):
        if d == 1:
            def fn(r):
                return np.abs(6.0 * r * r - 2.0) / (1.0 + r * r) ** 3
        else:
            def fn(r):
                s = 1.0 + r * r
                return np.maximum(np.abs(6.0 * r * r - 2.0) / s**3, 2.0 / s**2)
        return _peak_max(fn, lo, hi, (0.0, 1.0))

    def slope_max(self, lo, hi):
        return _unimodal_max(lambda r: 2.0 * r / (1.0 + r * r) ** 2, lo, hi, 1.0 / math.sqrt(3.0))

    def tail_radius(self, theta):
        return math.sqrt(1.0 / theta - 1.0) if theta < 1.0 else 0.0


class _Epanechnikov(Profile):
    name = "epanechnikov"
    support = 1.0
    kinks = ((1.0, 2.0),)

    def value(self, r2):
        return np.where(r2 < 1.0, 1.0 - r2, 0.0)

    def sample_error(self, r2):
        return np.where(r2 <= 1.0 + 1e-12, 8.0 * _U, 0.0)

    def curvature_max(self, lo, hi, d):
        # f'' = -2 and f' / r = -2 inside the support, 0 outside
        return np.where(lo < 1.0, 2.0, 0.0)

    def slope_max(self, lo, hi):
        return np.where(lo <= 1.0, 2.0 * np.minimum(hi, 1.0), 0.0)

    def tail_radius(self, theta):
        return 1.0


class _Tricube(Profile):
    name = "tricube"
    support = 1.0

    def value(self, r2):
        r3 = np.minimum(r2, 1.0) ** 1.5
        return np.where(r2 < 1.0, (1.0 - r3) ** 3, 0.0)

    def sample_error(self, r2):
        return np.where(r2 <= 1.0 + 1e-12, 32.0 * _U, 0.0)

    def curvature_max(self, lo, hi, d):
        # with u = 1 - r^3: f' = -9 r^2 u^2, f'' = -18 r u^2 + 54 r^4 u, so
        # |f''| <= 18 r u^2 + 54 r^4 u and |f'| / r = 9 r u^2 <= 18 r u^2; each
        # term r^a u^b rises to r^3 = a / (a + 3 b), then falls to 0 at r = 1.
        lo, hi = np.minimum(lo, 1.0), np.minimum(hi, 1.0)

        def term(a: int, b: int, c: float):
            return _unimodal_max(lambda r: c * r**a * (1.0 - r**3) ** b, lo, hi,
                                 (a / (a + 3.0 * b)) ** (1.0 / 3.0))

        return term(1, 2, 18.0) + term(4, 1, 54.0)

    def slope_max(self, lo, hi):
        lo, hi = np.minimum(lo, 1.0), np.minimum(hi, 1.0)
        return _unimodal_max(lambda r: 9.0 * r * r * (1.0 - r**3) ** 2, lo, hi, 0.25 ** (1 / 3))

    def tail_radius(self, theta):
        return 1.0


PROFILES: dict[type, Profile] = {
    Gaussian: _Gaussian(),
    Laplacian: _Laplacian(),
    Cauchy: _Cauchy(),
    Epanechnikov: _Epanechnikov(),
    Tricube: _Tricube(),
}


def profile_of(kernel: Kernel) -> Profile | None:
    """The profile of ``kernel`` if binning can bound it (exact class match), else None."""
    return PROFILES.get(type(kernel))
