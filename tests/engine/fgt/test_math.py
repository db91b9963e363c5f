"""The pieces of the proof: Cramér's constant, the series, the matrices, the exponential.

Each constant the bounds rest on is recomputed here independently (exact
rationals, mpmath, a finer grid) and must be no smaller than the library's.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch

from nadaraya.engine.fgt import _bounds, _chebyshev, _hermite, _native
from nadaraya.engine.fgt._plan import SIDES

from ._exact import cramer_ratio, requires_native

mpmath.mp.dps = 40


def test_cramer_constant_bounds_the_hermite_functions() -> None:
    x = np.linspace(-12, 12, 24001)
    worst = max(float(cramer_ratio(n, x).max()) for n in range(0, 121))
    assert worst <= _bounds.CRAMER
    # and the inequality is used at its strength: the largest ratio is not far below
    assert worst > 0.8


def test_gaussian_derivatives_within_cramer() -> None:
    # |g^(n)(w)| <= k sqrt(n!) exp(-w^2 / 4), g(w) = exp(-w^2 / 2)
    for w in (0.0, 0.5, 1.3, 3.0, 7.5):
        for n in range(0, 40, 3):
            dn = abs(mpmath.diff(lambda t: mpmath.exp(-t * t / 2), w, n))
            assert dn <= _bounds.CRAMER * mpmath.sqrt(mpmath.factorial(n)) * mpmath.exp(-w * w / 4)


@pytest.mark.parametrize("side, order", [(0.5, 6), (1.0, 8), (1.5, 5)])
def test_series_head_and_tail_match_the_double_sum(side: float, order: int) -> None:
    rho = Fraction(side) / 2
    head = tail = Fraction(0)
    big = 70
    for a in range(big):
        for b in range(big - a):
            phi = rho ** (a + b) / (math.factorial(a) * math.factorial(b))
            term = float(phi) * math.sqrt(math.factorial(a + b))
            if a < order and b < order:
                head += Fraction(term)
            else:
                tail += Fraction(term)
    h, t = _bounds.series(side, order)
    assert h >= float(head) * (1 - 1e-12) and h <= float(head) * (1 + 1e-9)
    assert t >= float(tail) * (1 - 1e-9) and t <= float(tail) * (1 + 1e-6)


def test_hermite_translation_entries() -> None:
    reach, order, side = 3, 6, 1.5
    T = _hermite.translation(reach, order, side)
    for o in (-3, 0, 2):
        for b in range(order):
            for a in range(order):
                w, n = mpmath.mpf(o * side), a + b
                # g^(n)(w) = (-1)^n He_n(w) g(w), He_n(w) = 2^(-n/2) H_n(w / sqrt 2)
                he = mpmath.hermite(n, w / mpmath.sqrt(2)) / mpmath.mpf(2) ** (mpmath.mpf(n) / 2)
                exact = (-1) ** n * he * mpmath.exp(-w * w / 2) / mpmath.factorial(b)
                assert abs(T[o + reach, b, a].item() - exact) <= 2**-53 * abs(exact)


@pytest.mark.parametrize("side", SIDES)
def test_chebyshev_nodes_scale_exactly(side: float) -> None:
    eta, wbar = _chebyshev.nodes(9, side)
    unit = _chebyshev._unit_nodes(9)
    for e, c in zip(eta.tolist(), unit, strict=True):
        assert Fraction(e) == Fraction(side) / 2 * Fraction(c)
    assert bool((eta.abs() < side / 2).all())
    for k in range(9):
        prod = math.prod(Fraction(eta[k].item()) - Fraction(eta[j].item())
                         for j in range(9) if j != k)
        assert abs(wbar[k].item() * prod - 1) <= 2**-52


@pytest.mark.parametrize("order", [2, 5, 12, 23])
def test_chebyshev_constants_bound_a_finer_search(order: int) -> None:
    lebesgue, omega = _chebyshev.constants(order, 2.0)
    eta = np.array(_chebyshev._unit_nodes(order))
    rng = np.random.default_rng(order)
    x = np.concatenate([np.linspace(-1, 1, 200001), rng.uniform(-1, 1, 20000), [-1.0, 1.0]])
    diff = x[:, None] - eta[None, :]
    lag = np.stack([np.prod(np.delete(diff, k, axis=1), axis=1)
                    / np.prod([eta[k] - eta[j] for j in range(order) if j != k])
                    for k in range(order)], axis=1)
    assert float(np.abs(lag).sum(axis=1).max()) <= lebesgue
    assert float(np.abs(np.prod(diff, axis=1)).max()) <= omega
    # Rivlin: the Lebesgue constant of Chebyshev nodes is below 2/pi ln(p) + 1 (+ the grid's 4 %)
    assert lebesgue <= (2 / math.pi * math.log(order) + 1) * 1.04


def test_chebyshev_translation_entries() -> None:
    reach, order, side = 2, 7, 0.75
    T = _chebyshev.translation(reach, order, side)
    eta, _ = _chebyshev.nodes(order, side)
    for o in range(-reach, reach + 1):
        for b in range(order):
            for a in range(order):
                w = mpmath.mpf(o * side) + mpmath.mpf(eta[b].item()) - mpmath.mpf(eta[a].item())
                exact = mpmath.exp(-w * w / 2)
                assert abs(T[o + reach, b, a].item() - exact) <= 2**-53 * exact


def test_decay_weights_round_up() -> None:
    for reach, side in ((5, 1.0), (3, 0.375)):
        herm = _hermite.window_weights(reach, side, gaussian=True).flatten()
        cheb = _chebyshev.decay_weights(reach, side).flatten()
        for i, o in enumerate(range(-reach, reach + 1)):
            assert herm[i].item() >= float(mpmath.exp(-(o * side) ** 2 / 4))
            gap = max(abs(o) - 1, 0) * side
            assert cheb[i].item() >= float(mpmath.exp(-gap**2 / 4))


@requires_native
def test_direct_exponential_within_its_stated_error() -> None:
    rng = np.random.default_rng(0)
    r2 = np.concatenate([rng.uniform(0, 1400, 200000), rng.uniform(0, 2, 20000),
                         [0.0, 1e-300, 2 * math.log(2), 1399.999, 1400.0]])
    got = _native.expneg(torch.from_numpy(r2)).numpy()
    exact = np.exp(-r2 / 2)
    assert np.all(np.abs(got - exact) <= (_bounds.EXP_ERROR + 2**-52) * exact)
    for g, v in zip(got[::50], r2[::50], strict=True):
        e = mpmath.exp(-mpmath.mpf(v) / 2)
        assert abs(g - e) <= _bounds.EXP_ERROR * e
    beyond = _native.expneg(torch.tensor([1400.5, 2000.0, 1e300])).numpy()
    assert np.all(beyond == 0.0)


def test_exp_error_is_small_and_stated() -> None:
    assert 1e-16 < _bounds.EXP_ERROR < 1e-14
    assert _bounds.gamma(10) == pytest.approx(10 * 2.0**-53, rel=1e-12)
