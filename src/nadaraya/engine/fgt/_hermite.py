"""Derivatives of the Gaussian, to 40 digits: the Hermite expansion's translation matrices.

With ``g(w) = exp(-w^2 / 2)``, ``g^(n)(w) = (-1)^n He_n(w) g(w)`` where
``He_n`` is the probabilists' Hermite polynomial (``He_0 = 1``, ``He_1 = w``,
``He_{n+1} = w He_n - n He_{n-1}``). The box offsets are ``w = o * side``
with ``side`` a dyadic rational, so ``He_n(w)`` is computed exactly in
rational arithmetic and only the factor ``g(w)`` is rounded (in 40-digit
decimal); each float64 entry is then within half an ulp of the true value,
which the rounding bound of :mod:`._bounds` counts as one rounding.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction
from functools import lru_cache

import torch

__all__ = ["translation", "window_weights"]

_CONTEXT = Context(prec=40)


def _derivatives(w: Fraction, count: int) -> list[Decimal]:
    """``[g^(n)(w) for n < count]`` to 40 digits."""
    he = [Fraction(1), w]
    for n in range(1, count):
        he.append(w * he[n] - n * he[n - 1])
    gauss = _CONTEXT.exp(_CONTEXT.divide(-Decimal(w.numerator) ** 2,
                                         2 * Decimal(w.denominator) ** 2))
    out = []
    for n in range(count):
        value = _CONTEXT.multiply(_CONTEXT.divide(Decimal(he[n].numerator),
                                                  Decimal(he[n].denominator)), gauss)
        out.append(-value if n % 2 else value)
    return out


@lru_cache(maxsize=64)
def _translation(reach: int, order: int, side: float) -> torch.Tensor:
    step = Fraction(side)
    rows = []
    for o in range(-reach, reach + 1):
        g = _derivatives(o * step, 2 * order - 1)
        # T[b][a] = g^(a+b)(o side) / b!, rounded to float64 once
        rows.append([[float(_CONTEXT.divide(g[a + b], math.factorial(b))) for a in range(order)]
                     for b in range(order)])
    return torch.tensor(rows, dtype=torch.float64).reshape(2 * reach + 1, order, order)


def translation(reach: int, order: int, side: float) -> torch.Tensor:
    """Matrices ``T (2 reach + 1, order, order)``: ``T[o + reach][b][a] = g^(a+b)(o side) / b!``.

    Parameters
    ----------
    reach : int
        Offsets ``o`` run over ``-reach .. reach`` boxes.
    order : int
        Expansion order ``p`` (indices ``a, b < p``).
    side : float
        Box side in bandwidths (a dyadic rational).
    """
    return _translation(int(reach), int(order), float(side))


def window_weights(reach: int, side: float, gaussian: bool) -> torch.Tensor:
    """Scalar pass weights ``(2 reach + 1, 1, 1)``: ``exp(-(o side)^2 / 4)`` or ones.

    The Gaussian weights are rounded up by a relative ``2^-40``, so sums of them
    bound the exact weighted masses from above.
    """
    o = torch.arange(-reach, reach + 1, dtype=torch.float64)
    if not gaussian:
        return torch.ones(2 * reach + 1, 1, 1, dtype=torch.float64)
    w = torch.exp(-(o * side) ** 2 / 4) * (1 + 2.0**-40)
    return w[:, None, None]
