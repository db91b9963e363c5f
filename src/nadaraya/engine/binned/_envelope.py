"""The envelope kernel: each grid offset's share of the binning error bound.

For a grid offset ``s`` (an integer vector, cell size ``delta``) the envelope
``E(s)`` bounds, for every query and key whose cells sit at that offset, the
errors of linear interpolation over one cell (see :mod:`._bound`). It is a
function of the box ``s delta + [-w, w]^d`` of the offsets such cells reach,
``w = 2 delta + 2 pos_err``, through the radii ``lo <= r <= hi`` of that box.
"""

from __future__ import annotations

import math

import numpy as np

from ._profiles import Profile

__all__ = ["box_radii", "bulk_ratio", "crossings", "envelope"]

# Relative slack for the rounding of the envelope's own arithmetic (a few
# dozen operations, each within one ulp).
SLACK = 2.0**-30


def box_radii(a: list[np.ndarray], w: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest radius over the boxes ``a + [-w, w]^d``.

    Parameters
    ----------
    a : list of d arrays, broadcastable together
        ``|s_i| delta`` per axis (non-negative).
    w : float
        Half-width of the boxes.

    Returns
    -------
    lo, hi : np.ndarray
        Widened by a relative ``1e-12`` so that rounding never narrows them.
    """
    lo2 = sum(np.maximum(x - w, 0.0) ** 2 for x in a)
    hi2 = sum((x + w) ** 2 for x in a)
    return np.sqrt(lo2) * (1.0 - 1e-12), np.sqrt(hi2) * (1.0 + 1e-12)


def envelope(profile: Profile, lo: np.ndarray, hi: np.ndarray, r2: np.ndarray, delta: float,
             d: int, pos_err: float, mass_rel: float) -> np.ndarray:
    """``E`` at offsets whose boxes have radii ``[lo, hi]`` and whose node has ``r^2 = r2``.

    ``E = 2 c + 2 sqrt(d) pos_err L + mass_rel f(lo) + sample_error(r2)``, with
    ``c`` the one-cell interpolation bound
    ``min(d (delta^2 / 8 D + delta / 4 J), sqrt(d) delta L)`` (``D`` the
    curvature bound, ``L`` the slope bound, ``J`` the jumps of the kinks inside
    ``[lo, hi]``, each weighted by :func:`crossings`), times ``1 + SLACK``.
    """
    curvature = profile.curvature_max(lo, hi, d)
    slope = profile.slope_max(lo, hi)
    jumps = np.zeros_like(lo)
    for radius, jump in profile.kinks:
        jumps = jumps + np.where((lo <= radius) & (radius <= hi),
                                 jump * crossings(radius, delta), 0.0)
    smooth = d * (delta * delta / 8.0 * curvature + delta / 4.0 * jumps)
    cell = np.minimum(smooth, math.sqrt(d) * delta * slope)
    out = (2.0 * cell + 2.0 * math.sqrt(d) * pos_err * slope
           + mass_rel * profile.value(lo * lo) + profile.sample_error(r2))
    return out * (1.0 + SLACK)


def crossings(radius: float, delta: float) -> float:
    """Summed slope jumps on a segment of length ``delta``, in units of the kink's jump.

    A line meets a sphere of radius ``radius > 0`` at most twice; when both
    points lie on one segment their chord ``c <= delta``, and at each the
    directional derivative jumps by the kink's jump times ``c / (2 radius)``
    (the cosine between the line and the normal). A point kink (``radius = 0``)
    is met once.
    """
    if radius == 0.0:
        return 1.0
    return max(1.0, min(2.0, delta / radius))


def bulk_ratio(profile: Profile, delta: float, d: int, pos_err: float) -> float:
    """``integral E / integral f`` around a query amid keys of uniform density.

    The ratio of the bound to ``total`` for such a query (the bulk), by radial
    midpoint quadrature over ``r <= r_b`` (``r_b`` where ``f`` falls below
    ``1e-16``, at most 40, or the support), the box radii taken as
    ``r -+ sqrt(d) w``; the narrow bands around the kinks get a finer step.
    It only guides the choice of ``delta``: the bounds themselves are exact.
    """
    reach = math.sqrt(d) * (2.0 * delta + 2.0 * pos_err)
    r_b = min(profile.tail_radius(1e-16), 40.0) + reach
    r, weight = _midpoints(0.0, r_b, max(delta / 8.0, r_b / 20000.0))
    bands = [(max(radius - reach, 0.0), radius + reach) for radius, _ in profile.kinks]
    for a, b in bands:
        weight = np.where((a <= r) & (r < b), 0.0, weight)
    for a, b in bands:
        fine, width = _midpoints(a, b, reach / 64.0)
        r, weight = np.concatenate([r, fine]), np.concatenate([weight, width])
    lo, hi = np.maximum(r - reach, 0.0), r + reach
    shell = weight * r ** (d - 1)
    e = envelope(profile, lo, hi, r * r, delta, d, pos_err, 0.0)
    f = profile.value(r * r)
    return float(np.sum(e * shell) / np.sum(f * shell))


def _midpoints(a: float, b: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints of ``[a, b]`` cut into steps of about ``step``, and their widths."""
    k = max(1, math.ceil((b - a) / step))
    width = (b - a) / k
    return a + (np.arange(k) + 0.5) * width, np.full(k, width)
