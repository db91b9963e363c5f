r"""Chebyshev interpolation in boxes: nodes, translation matrices and the bound.

The same boxes and passes as the Hermite expansion, with the polynomials of
one coordinate changed: a source box spreads its weights onto ``p`` nodes
per coordinate by the Lagrange polynomials of the nodes (anterpolation),
the translation carries node values with ``T(o)[b][a] = g(o h + eta_b -
eta_a)`` (``g(w) = exp(-w^2 / 2)``, ``h`` the side), and a target
interpolates its box's node values. The nodes are ``eta_k = h/2 c_k``, with
``c_k`` the Chebyshev points ``cos((2k + 1) pi / (2p))`` rounded to 50 bits
(so that the product is exact for every side of :data:`._plan.SIDES`), used
as they are by every stage: the scheme is exact polynomial interpolation on
those nodes, whatever their rounding.

Bound. Per coordinate ``i``, with ``m_i = max(|o_i| - 1, 0) h`` the least
distance between the two boxes, the interpolation error of
``t_i -> g(t_i - s_i)`` over the box is at most ``omega / p! * max |g^(p)|
<= omega k / sqrt(p!) exp(-m_i^2 / 4)`` (Cramér, see :mod:`._bounds`),
``omega >= max |prod_j (x - eta_j)|`` over the box; the other factors are at
most ``exp(-m_j^2 / 2)``. Interpolating coordinate after coordinate, each
earlier interpolation multiplies by at most the Lebesgue constant ``L``, so
interpolating the targets costs ``(1 + L + ... + L^(d-1)) e_p delta(o)``
with ``e_p = omega k / sqrt(p!)`` and ``delta(o) = prod_i exp(-m_i^2/4)``;
the sources' interpolation, seen through the targets', costs ``L^d`` times
as much. Rounding: every term (node weights, translation entries, basis
values) is at most ``L^(2d) delta(o)`` in absolute sum, each with relative
error ``gamma_N``. The computed offsets of points from their box centres
(``fl(u - c)``) move each point by at most ``u h / 2`` per coordinate, which
changes ``g`` by at most its value times ``exp(|Delta| r + |Delta|^2/2) - 1``
for ``r`` the largest distance across a window. Hence, per unit of weight,

    E = (1 + L^d) (1 + L + ... + L^(d-1)) e_p + gamma_N L^(2d) + shift,

and a target's bound is ``E`` times ``sum_B A_B delta(o_B)``. ``L`` and
``omega`` are computed on a grid fine enough that Bernstein's inequality
bounds the maximum between grid points (:func:`constants`).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch

from ._bounds import CRAMER, SAFETY, U, chain, gamma

__all__ = ["chebyshev_chain", "constants", "decay_weights", "factor", "nodes", "translation"]

_CONTEXT = Context(prec=40)


@lru_cache(maxsize=64)
def _unit_nodes(order: int) -> tuple[float, ...]:
    """Chebyshev points ``cos((2k + 1) pi / (2p))`` rounded to 50 significant bits.

    Times a half side ``h/2`` of two significant bits (the sides of
    :data:`._plan.SIDES`) they stay exact, so every box side scales one node set.
    """
    out = []
    for k in range(order):
        x = math.cos((2 * k + 1) * math.pi / (2 * order))
        mant, exp = math.frexp(x)
        out.append(math.ldexp(round(mant * 2.0**50), exp - 50))
    return tuple(out)


@lru_cache(maxsize=64)
def _nodes(order: int, side: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    half = side / 2
    unit = _unit_nodes(order)
    eta = [half * x for x in unit]
    exact = [Fraction(e) for e in eta]
    if any(Fraction(half) * Fraction(x) != e for x, e in zip(unit, exact, strict=True)):
        raise ValueError(f"side {side!r} does not scale the nodes exactly")
    wbar = []
    for k in range(order):
        prod = Fraction(1)
        for j in range(order):
            if j != k:
                prod *= exact[k] - exact[j]
        wbar.append(float(_CONTEXT.divide(Decimal(prod.denominator), Decimal(prod.numerator))))
    return tuple(eta), tuple(wbar)


def nodes(order: int, side: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Node offsets ``eta (p,)`` from a box centre and barycentric weights ``wbar (p,)``.

    ``wbar_k = 1 / prod_{j != k} (eta_k - eta_j)``, rounded once from the exact value.
    """
    eta, wbar = _nodes(int(order), float(side))
    return (torch.tensor(eta, dtype=torch.float64), torch.tensor(wbar, dtype=torch.float64))


@lru_cache(maxsize=64)
def _unit_constants(order: int) -> tuple[float, float]:
    e = np.array(_unit_nodes(order))
    exact = [Fraction(x) for x in _unit_nodes(order)]
    w = np.abs(np.array([1.0 / float(math.prod(exact[k] - exact[j] for j in range(order)
                                               if j != k)) for k in range(order)]))
    step = 1.0 / (16.0 * order**2)
    x = np.cos(np.linspace(0.0, math.pi, int(math.pi / step) + 2))
    diff = x[:, None] - e[None, :]
    omega = np.abs(np.prod(diff, axis=1))
    on_node = (diff == 0).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lebesgue = np.where(on_node, 1.0, omega * (w[None, :] / np.abs(diff)).sum(axis=1))
    # every theta is within step / 2 of a sample (1e-7 more for the rounding of cos near 0)
    widen = 1.0 / (1.0 - (step / 2 + 1e-7) * order**2)
    return float(lebesgue.max()) * widen * (1 + 1e-9), float(omega.max()) * widen * (1 + 1e-9)


def constants(order: int, side: float) -> tuple[float, float]:
    """``(L, omega)``: bounds on the Lebesgue constant and on ``max |prod_j (x - eta_j)|``.

    On ``[-1, 1]`` (the nodes of every side are one node set scaled exactly, and
    ``omega`` scales by ``(side / 2)^p``), as functions of ``theta`` with
    ``x = cos(theta)``, each Lagrange polynomial and the node polynomial are
    trigonometric polynomials of degree ``<= p``, whose slope is at most ``p`` times
    their maximum (Bernstein's inequality); so the Lebesgue function's slope is at
    most ``p^2`` times its maximum. Sampled every ``step`` in ``theta``, each maximum
    is at most the samples' divided by ``1 - step / 2 * p^2``, widened by a relative
    ``1e-9`` for the float64 evaluation.
    """
    lebesgue, omega = _unit_constants(int(order))
    return lebesgue, omega * (side / 2) ** order


@lru_cache(maxsize=64)
def _translation(reach: int, order: int, side: float) -> torch.Tensor:
    eta, _ = _nodes(order, side)
    exact = [Fraction(e) for e in eta]
    step = Fraction(side)
    out = np.empty((2 * reach + 1, order, order))
    for o in range(-reach, reach + 1):
        for b in range(order):
            for a in range(order):
                w = o * step + exact[b] - exact[a]
                out[o + reach, b, a] = float(_CONTEXT.exp(_CONTEXT.divide(
                    -Decimal(w.numerator) ** 2, 2 * Decimal(w.denominator) ** 2)))
    return torch.from_numpy(out)


def translation(reach: int, order: int, side: float) -> torch.Tensor:
    """``T (2 reach + 1, p, p)``: ``T[o + reach][b][a] = g(o side + eta_b - eta_a)``.

    Each entry rounded once from its 40-digit value.
    """
    return _translation(int(reach), int(order), float(side))


def decay_weights(reach: int, side: float) -> torch.Tensor:
    """``exp(-m(o)^2 / 4)``, ``m(o) = max(|o| - 1, 0) side``, shape ``(2 reach + 1, 1, 1)``.

    Rounded up by a relative ``2^-40``, so sums of them bound the exact weighted masses.
    """
    o = torch.arange(-reach, reach + 1, dtype=torch.float64)
    gap = (o.abs() - 1).clamp(min=0) * side
    return (torch.exp(-gap**2 / 4) * (1 + 2.0**-40))[:, None, None]


def chebyshev_chain(order: int, reach: int, d: int, most: int) -> int:
    """:func:`._bounds.chain` for Chebyshev nodes.

    A Lagrange value costs ``2p + 2`` roundings (the differences, their
    product, the weight and the division; the difference at its own node
    cancels).
    """
    return chain(order, reach, d, most, 2 * order + 2, 2 * order + 2)


def factor(side: float, order: int, d: int, reach: int, most: int) -> float:
    """``E``: the bound per unit of decay-weighted mass (module docstring)."""
    lebesgue, omega = constants(order, side)
    e_p = omega * CRAMER / math.sqrt(math.factorial(order))
    spread = sum(lebesgue**i for i in range(d))
    interpolation = (1 + lebesgue**d) * spread * e_p
    rounding = gamma(chebyshev_chain(order, reach, d, most)) * lebesgue ** (2 * d)
    shift_len = 2 * U * side / 2 * math.sqrt(d)
    r = math.sqrt(d) * (reach + 1) * side
    shift = math.expm1(shift_len * r + shift_len**2 / 2) * 1.01
    return SAFETY * (interpolation + rounding + shift)
