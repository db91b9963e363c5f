"""The plug-in selectors' density functionals, summed by the engine, against naive double sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya
from nadaraya.estimators._functionals import pair_sum
from nadaraya.estimators._plugin_diag import _eta6, _psi4
from nadaraya.kernels import GaussianDerivative, GaussianLaplacian


def _data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, d))
    X = z**3 @ (np.eye(d) + 0.3 * np.triu(np.ones((d, d)), 1))
    return X / X.std(axis=0, ddof=1), rng.integers(1, 4, n).astype(float)


def test_eta6_equals_the_naive_double_sum() -> None:
    # sum_kl w_k w_l Laplacian^3 phi_g(x_k - x_l) / W^2 with the Laplacian written out through
    # the power sums of h_r = He_r(u_i) / g^r (Wand and Jones' eta6)
    Z, w = _data(50, 3)
    g = 0.55
    U = (Z[:, None, :] - Z[None, :, :]) / g
    u2 = U * U
    h2, h4 = (u2 - 1) / g**2, (u2 * u2 - 6 * u2 + 3) / g**4
    h6 = (((u2 - 15) * u2 + 45) * u2 - 15) / g**6
    p1, p2, p3 = h2.sum(-1), (h2 * h2).sum(-1), (h2**3).sum(-1)
    lap3 = (h6.sum(-1) + 3 * (h4.sum(-1) * p1 - (h4 * h2).sum(-1)) + p1**3 - 3 * p1 * p2
            + 2 * p3)
    phi = np.exp(-0.5 * u2.sum(-1)) / ((2 * math.pi) ** 1.5 * g**3)
    naive = float(np.einsum("k,l,kl->", w, w, phi * lap3)) / w.sum() ** 2
    assert _eta6(Z, w, g) == pytest.approx(naive, rel=1e-12)


def test_psi4_with_weights_equals_the_naive_double_sum() -> None:
    Z, w = _data(40, 2, seed=1)
    g = 0.7
    naive = np.zeros((2, 2))
    for k in range(40):
        for m in range(40):
            u = (Z[k] - Z[m]) / g
            phi = math.exp(-0.5 * float(u @ u)) / (2 * math.pi * g * g)
            h2 = (u * u - 1) / g**2
            h4 = (u**4 - 6 * u * u + 3) / g**4
            for i in range(2):
                for j in range(2):
                    term = h4[i] if i == j else h2[i] * h2[j]
                    naive[i, j] += w[k] * w[m] * phi * term
    np.testing.assert_allclose(_psi4(Z, w, g), naive / w.sum() ** 2, rtol=1e-12)


def test_functionals_do_not_depend_on_the_memory_budget() -> None:
    Z, w = _data(120, 3, seed=2)
    wide = (_psi4(Z, w, 0.5), _eta6(Z, w, 0.6))
    with nadaraya.config_context(working_memory=0.001, key_block=16, query_block=8):
        narrow = (_psi4(Z, w, 0.5), _eta6(Z, w, 0.6))
    np.testing.assert_allclose(narrow[0], wide[0], rtol=1e-13)
    assert narrow[1] == pytest.approx(wide[1], rel=1e-13)


def test_pair_sum_is_symmetric_in_the_sample_order() -> None:
    Z, w = _data(60, 2, seed=3)
    p = np.random.default_rng(4).permutation(60)
    kern = GaussianDerivative((2, 4), [0.4, 0.8])
    assert pair_sum(Z[p], w[p], kern) == pytest.approx(pair_sum(Z, w, kern), rel=1e-13)
    lap = GaussianLaplacian(2, 0.5)
    assert pair_sum(Z[p], w[p], lap) == pytest.approx(pair_sum(Z, w, lap), rel=1e-13)


@pytest.mark.parametrize("square", [False, True])
def test_binned_moments_equal_a_naive_loop(square: bool) -> None:
    # KernSmooth's binned sums: sum_k c_k K(o delta / h)^(1 or 2) (o delta)^p, o = k - j, over
    # the offsets |o| <= floor(4 h / delta) that stay on the grid
    from nadaraya.estimators._plugin import _moments

    rng = np.random.default_rng(5)
    counts = rng.uniform(0.0, 2.0, 60)
    counts[:7] = 0.0
    delta, h = 0.05, 0.13
    reach = math.floor(4 * h / delta)
    want = np.zeros((60, 5))
    for j in range(60):
        for k in range(max(0, j - reach), min(60, j + reach + 1)):
            o = (k - j) * delta
            weight = math.exp(-0.5 * (o / h) ** 2) ** (2 if square else 1)
            for p in range(5):
                want[j, p] += counts[k] * weight * o**p
    got = _moments(counts, delta, h, 5, square=square)
    scale = np.abs(want).max(0)  # columns of very different size: each to its own
    np.testing.assert_allclose(got / scale, want / scale, rtol=1e-12, atol=1e-14)
