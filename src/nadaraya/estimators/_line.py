"""One-dimensional minimisation on ``log h``: a bracket walked out from a start, then Brent.

From a start the search walks downhill in growing steps until the criterion
rises (a bracket), then Brent's method (golden section with parabolic
steps) narrows the bracket to ``xtol``. The building block of the bandwidth
searches of :mod:`._search`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["brent", "minimize_log"]

_GOLD = 0.3819660112501051
_GROW = 1.618033988749895


def brent(f: Callable[[float], float], lo: float, hi: float, x: float, fx: float,
          xtol: float, maxiter: int = 100, *, flo: float = math.inf,
          fhi: float = math.inf, trust: bool = False) -> tuple[float, float]:
    """Minimise ``f`` on ``[lo, hi]`` from an interior point ``x`` with ``f(x) <= f(lo), f(hi)``.

    Brent's method with an absolute tolerance ``xtol``; infinite values
    (an inadmissible bandwidth) force golden-section steps. When the values
    at the ends of the bracket are known (``flo``, ``fhi``) the first step is
    the vertex of the parabola through the three points. Three evaluations in
    a row equal to the best value end the search: the criterion is flat there
    to its resolution. With ``trust=True`` the search also ends when a
    parabolic step would move less than ``xtol`` (the vertex is taken as
    found; this saves the evaluations that would confirm it from both sides,
    for criteria that are costly and smooth).
    """
    w = v = x
    fw = fv = fx
    d = e = 0.0
    ties = 0
    if math.isfinite(flo) and math.isfinite(fhi) and lo < x < hi:
        (w, fw), (v, fv) = sorted([(lo, flo), (hi, fhi)], key=lambda p: p[1])
        d = e = hi - lo
    for _ in range(maxiter):
        mid = 0.5 * (lo + hi)
        tol1 = xtol + 1e-12 * abs(x)
        tol2 = 2.0 * tol1
        if abs(x - mid) <= tol2 - 0.5 * (hi - lo):
            break
        golden = True
        if abs(e) > tol1 and all(map(math.isfinite, (fx, fw, fv))):
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0:
                p = -p
            q = abs(q)
            etemp, e = e, d
            if abs(p) < abs(0.5 * q * etemp) and q * (lo - x) < p < q * (hi - x):
                d = p / q
                if trust and abs(d) < tol1:
                    break
                u = x + d
                if u - lo < tol2 or hi - u < tol2:
                    d = tol1 if x < mid else -tol1
                golden = False
        if golden:
            e = (hi - x) if x < mid else (lo - x)
            d = _GOLD * e
        u = x + d if abs(d) >= tol1 else x + math.copysign(tol1, d)
        fu = f(u)
        ties = ties + 1 if fu == fx else 0
        if ties >= 3:
            break  # flat at the resolution of the criterion: nothing more to find
        if fu <= fx:
            if u < x:
                hi = x
            else:
                lo = x
            v, w, x = w, x, u
            fv, fw, fx = fw, fx, fu
        else:
            if u < x:
                lo = u
            else:
                hi = u
            if fu <= fw or w == x:
                v, w, fv, fw = w, u, fw, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu
    return x, fx


def minimize_log(f: Callable[[float], float], t0: float, lo: float, hi: float, *,
                 step: float = 0.5, xtol: float = 1e-4, trust: bool = False
                 ) -> tuple[float, float, bool]:
    """Bracket then minimise ``f(t)`` over ``t`` in ``[lo, hi]`` starting at ``t0``.

    Returns
    -------
    t : float
    f(t) : float
    at_bound : bool
        Whether the minimum is on ``lo`` or ``hi`` (the criterion kept falling).
    """
    t0 = min(max(t0, lo), hi)
    f0 = f(t0)
    # an inadmissible start (no neighbours for some point): widen until admissible
    while not math.isfinite(f0) and t0 < hi:
        t0 = min(t0 + step, hi)
        f0 = f(t0)
    if not math.isfinite(f0):
        return t0, f0, True
    up = min(t0 + step, hi)
    fu = f(up) if up > t0 else math.inf
    if fu < f0:
        direction, a, fa, b, fb = 1.0, t0, f0, up, fu
    else:
        down = max(t0 - step, lo)
        fd = f(down) if down < t0 else math.inf
        if fd < f0:
            direction, a, fa, b, fb = -1.0, t0, f0, down, fd
        else:
            lo_b, hi_b = (down if down < t0 else t0), (up if up > t0 else t0)
            if lo_b == t0 or hi_b == t0:
                # on a bound and the criterion rises away from it
                return t0, f0, True
            x, fx = brent(f, lo_b, hi_b, t0, f0, xtol, flo=fd, fhi=fu, trust=trust)
            return x, fx, False
    while True:
        step *= _GROW
        c = min(max(b + direction * step, lo), hi)
        if c == b:
            return b, fb, True
        fc = f(c)
        if not fc < fb:
            flo, fhi = (fa, fc) if a < c else (fc, fa)
            x, fx = brent(f, min(a, c), max(a, c), b, fb, xtol, flo=flo, fhi=fhi,
                          trust=trust)
            return x, fx, False
        if c in (lo, hi):
            return c, fc, True
        a, fa, b, fb = b, fb, c, fc
