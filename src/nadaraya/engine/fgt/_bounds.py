r"""Proven error bounds of the fast Gauss transform: Hermite expansion, cut-off, direct sums.

(The Chebyshev expansion's bound is in :mod:`._chebyshev`; it shares the
cut-off, the direct sums and the rounding count of this module.)

Points are in unit-bandwidth coordinates, ``K(t, s) = g(|t - s|)`` with
``g(w) = exp(-w^2 / 2)`` (the scaling ``delta = 2`` of Greengard and
Strain). Boxes have side ``h`` (here ``side``); a source ``s`` lies in box
``B`` (centre ``b``), a target ``t`` in box ``C`` (centre ``c``), and per
coordinate ``|y| = |s - b| <= h/2``, ``|x| = |t - c| <= h/2``, ``D = c - b``.

Expansion (Hermite moments translated to Taylor coefficients)
--------------------------------------------------------------
Taylor's formula in ``u = x - y`` about ``D`` gives, per coordinate,

    g(D + x - y) = sum_{a,b>=0} ((-y)^a / a!) (x^b / b!) g^(a+b)(D),

an absolutely convergent double series (``g`` is entire), and the kernel is
the product over the ``d`` coordinates. The transform keeps the terms with
every ``a_i, b_i < p``. With ``g^(n)(w) = (-1)^n He_n(w) g(w)`` and
Cramér's inequality for the physicists' Hermite polynomials,
``|H_n(z)| exp(-z^2/2) <= k 2^(n/2) sqrt(n!)`` (``k <= 1.0865``), the
probabilists' ``He_n(w) = 2^(-n/2) H_n(w / sqrt 2)`` give

    |g^(n)(w)| <= k sqrt(n!) exp(-w^2 / 4).

So each term is at most ``k exp(-D^2/4) phi(a, b)`` per coordinate, with
``phi(a, b) = (h/2)^(a+b) sqrt((a+b)!) / (a! b!)``. Let
``H = sum_{a,b<p} phi`` (head) and ``T = sum_{max(a,b)>=p} phi`` (tail;
``sum_{a+b=n} phi = h^n / sqrt(n!)``, so the series converges). The
omitted multi-indices are the complement of a product set, so for one
source of weight ``w`` and one target

    |truncation| <= |w| k^d exp(-|D|^2/4) ((H + T)^d - H^d).

Rounding: every stage (moments, ``d`` translation passes, evaluation) is a
sum of products of the terms above, so the computed value is
``sum term (1 + theta)`` with ``|theta| <= gamma_N = N u / (1 - N u)``,
``u = 2^-53``, where ``N`` counts the roundings on the longest path of a term
through the loops of ``fgt.c`` (:func:`chain`). The kept terms' absolute
values sum to at most ``|w| k^d exp(-|D|^2/4) H^d``. Hence, per source box
of absolute mass ``A_B = sum_{s in B} |w_s|``,

    |error| <= E A_B exp(-|D|^2/4),   E = k^d ((H + T)^d - H^d + gamma_N H^d),

and a target's bound is ``E W(C)`` with ``W(C) = sum_B A_B exp(-|D_BC|^2/4)``
over the source boxes its expansion covers: a Gaussian-weighted mass around
the target, of the order of ``2^(d/2)`` times the target's own total amid
keys of uniform density (``exp(-|D|^2/4)`` integrates to ``(4 pi)^(d/2)``,
``g(|t - s|)`` to ``(2 pi)^(d/2)``). ``W`` is computed by the same separable
window passes as the translation, with weights rounded up.

Cut-off
-------
A target box's expansion covers the source boxes at offsets ``|o_i| <= K``
(every other box is at least ``K h`` away in some coordinate); its direct sums
cover the boxes within distance ``K h``. Every source left out is therefore
at distance ``>= K h``, and each contributes at most ``|w| exp(-(K h)^2 / 2)``.
To keep this relative to the neighbourhood rather than to ``n``, the boxes are
grouped in coarse blocks of ``G = 2K`` boxes per side: the ``3^d`` blocks
around the target's block hold every covered source (``G >= K + 1``) and
mass ``A_S``; everything outside them is at least ``G h`` away:

    |cut-off| <= (A_S - A_covered) exp(-(K h)^2/2) + (A_all - A_S) exp(-(G h)^2/2).

Direct sums
-----------
``exp(-r^2/2)`` is computed from ``r^2`` summed coordinate by coordinate
(relative error ``gamma_{d+2}``, which changes the exponent by at most
``r^2/2 gamma_{d+2}``, ``r^2`` at most the largest squared distance between
two visited boxes) by the loop's own exponential (:data:`EXP_ERROR`: the
Taylor remainder of degree 13 on ``|r| <= ln(2)/2``, the Horner rounding
``gamma_27 e^{2|r|}`` and the reduced argument's error); weighted, the terms
of a box of ``n_B >= 8`` sources are summed in 8 lanes of at most
``ceil(n_B / 8)`` terms, folded pairwise, those of a smaller box one after
another, and each box's sum is added to the target's. With ``eps`` the
resulting relative error per term, the error is at most ``eps / (1 - eps)``
times the computed ``sum K |w|``.
Arguments below ``-700`` give 0 (each dropped term is below ``1e-304 |w|``).

A query's sum is its expansion plus its direct sums, one more rounding:
``2u (|expansion| + |direct|)``. Every bound is finally multiplied by
:data:`SAFETY` (``1 + 2^-20``), which covers the rounding of the bound's own
arithmetic and of the masses (sums of at most ``n`` terms).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["CRAMER", "EXP_ERROR", "SAFETY", "U", "chain", "direct_error",
           "expansion_factor", "gamma", "hermite_chain", "moment_chunk", "series"]

U = 2.0**-53
CRAMER = 1.0865
SAFETY = 1.0 + 2.0**-20
# Lanes of the direct sums in fgt.c (LANES).
LANES = 8


def gamma(n: float) -> float:
    """``n u / (1 - n u)``: the relative error of ``n`` roundings."""
    return n * U / (1.0 - n * U)


def _exp_error() -> float:
    r = math.log(2.0) / 2 + 1e-12
    horner = gamma(2 * 13 + 1) * math.exp(2 * r)
    remainder = r**14 / math.factorial(14) / (1 - r / 15) * math.exp(r)
    reduction = 4.1e-17  # u (|k ln2_lo| + |r|) + |k| |ln 2 - ln2_hi - ln2_lo|, |k| <= 1011
    return (1 + horner) * (1 + remainder) * (1 + reduction) - 1


EXP_ERROR = _exp_error()


@lru_cache(maxsize=256)
def series(side: float, order: int) -> tuple[float, float]:
    """``(H, T)``: head and tail of ``phi(a, b)`` per coordinate (see the module docstring).

    Parameters
    ----------
    side : float
        Box side ``h`` (source and target half-widths ``h / 2``).
    order : int
        ``p``.
    """
    rho = side / 2
    a = np.arange(order)
    lf = np.array([math.lgamma(k + 1) for k in range(2 * order + 1)])
    head = float(np.exp((a[:, None] + a[None, :]) * math.log(rho)
                        + 0.5 * lf[a[:, None] + a[None, :]] - lf[a][:, None] - lf[a][None, :]
                        ).sum()) if rho > 0 else 1.0
    # tail: n from p upwards, terms with max(a, b) >= p; then a geometric bound
    tail, n = 0.0, order
    while True:
        k = np.arange(n + 1)
        keep = np.maximum(k, n - k) >= order
        logs = (n * math.log(rho) + 0.5 * math.lgamma(n + 1)
                - np.array([math.lgamma(i + 1) + math.lgamma(n - i + 1) for i in k]))
        tail += float(np.exp(logs[keep]).sum())
        ratio = side / math.sqrt(n + 2)
        nxt = math.exp((n + 1) * math.log(side) - 0.5 * math.lgamma(n + 2))
        if ratio < 0.5 and nxt <= 1e-30 * max(tail, 1e-300):
            tail += nxt / (1 - ratio)
            break
        n += 1
    return head * (1 + 1e-12), tail * (1 + 1e-12)


def moment_chunk(rows: int) -> int:
    """Sources per partial moment block in ``fgt.c`` (``chunk_of``) for ``p^(d-1)`` rows."""
    return min(64, max(8, 32768 // max(rows, 1)))


def chain(order: int, reach: int, d: int, most: int, moment_basis: int,
          eval_basis: int) -> int:
    """Roundings on the longest path of one expansion term through ``fgt.c``.

    Moments: the basis values of each coordinate (``moment_basis`` roundings
    each), their products over coordinates and the weight, the sum of a chunk
    of ``g`` sources (one after another) and the chunks' sum. Each pass: the
    matrix entry (rounded once), its product, a sum of ``p`` products per
    offset and the sum over the ``2K + 1`` offsets. The evaluation: the basis
    values (``eval_basis`` each), the products, and nested sums of ``p`` terms
    per coordinate (the last one in two halves, then their sum).

    Parameters
    ----------
    order, reach, d : int
        ``p``, ``K`` and the dimension.
    most : int
        The most sources in one box.
    moment_basis, eval_basis : int
        Roundings of one basis value at a source and at a target.
    """
    g = moment_chunk(order ** (d - 1))
    moments = d * moment_basis + d + g + -(-most // g)
    passes = d * (order + 2 * reach + 1 + 2)
    evaluation = d * eval_basis + d + 2 + d * order
    return moments + passes + evaluation


def hermite_chain(order: int, reach: int, d: int, most: int) -> int:
    """:func:`chain` for Hermite moments and Taylor polynomials.

    ``(-y)^a / a!`` takes ``a`` steps of two products (with ``y`` and ``1/a``
    rounded too); ``x^b`` takes ``b - 1`` products (with ``x`` rounded).
    """
    return chain(order, reach, d, most, 4 * (order - 1), 2 * (order - 1))


def expansion_factor(side: float, order: int, d: int, reach: int, most: int) -> float:
    """``E``: the bound per unit of Gaussian-weighted mass ``W`` (module docstring)."""
    roundings = hermite_chain(order, reach, d, most)
    head, tail = series(side, order)
    truncated = sum(math.comb(d, k) * head ** (d - k) * tail**k for k in range(1, d + 1))
    return SAFETY * CRAMER**d * (truncated + gamma(roundings) * head**d)


def direct_error(d: int, r2max: float, most: int, boxes: int) -> float:
    """Relative error bound ``eps / (1 - eps)`` of the direct sums, per unit of ``sum K |w|``.

    Parameters
    ----------
    d : int
    r2max : float
        Largest squared distance between a target and a visited source.
    most : int
        The most sources in one visited box.
    boxes : int
        The most boxes visited per target.
    """
    argument = math.expm1(min(r2max, 1400.0) / 2 * gamma(d + 2) * (1 + 1e-6))
    sums = gamma(max(-(-most // LANES) + 3, LANES - 1) + boxes + 1)
    eps = (1 + EXP_ERROR) * (1 + argument) * (1 + sums) - 1
    return SAFETY * eps / (1 - eps)
