"""The quadratic form exp(-dt^T Q dt) is the Gaussian of the metric sqrt(2) L (L^T L = Q).

Checked against the formula written out with numpy (float64), for full-rank
and singular ``Q``, and through every engine that runs the problem against
the float64 dense engine.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine import ENGINES
from nadaraya.kernels import Gaussian
from nadaraya.kernels.quadratic import QuadraticKernel


def _form(q: np.ndarray, k: np.ndarray, mat: np.ndarray) -> np.ndarray:
    d = q[:, None, :] - k[None, :, :]
    return np.einsum("ija,ab,ijb->ij", d, mat, d)


def _metric(rng: np.random.Generator, rank: int, width: int) -> np.ndarray:
    a = rng.standard_normal((rank, width))
    if rank > 1:
        a[-1] = a[0]  # a repeated row: Q = L^T L / 2 is singular whatever the shape
    return a


@pytest.mark.parametrize("rank", [1, 3, 4])
def test_gaussian_metric_and_quadratic_form_give_the_same_scores(rank: int) -> None:
    rng = np.random.default_rng(rank)
    L = _metric(rng, rank, 4)
    q, k = rng.standard_normal((7, 4)) * 3.0, rng.standard_normal((9, 4)) * 3.0 + 5.0
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    gauss = Gaussian(None, metric=L).score(qt, kt).numpy()
    quad = QuadraticKernel(position=L.T @ L / 2.0, ndim=4).score(qt, kt).numpy()
    naive = -_form(q, k, L.T @ L) / 2.0
    np.testing.assert_allclose(gauss, naive, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(quad, naive, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(quad, gauss, rtol=1e-12, atol=1e-12)
    # batched points (attention's form): the same scores
    batched = QuadraticKernel(position=L.T @ L / 2.0, ndim=4).scores(qt[None], kt[None])
    np.testing.assert_allclose(batched[0].numpy(), naive, rtol=1e-11, atol=1e-11)


def test_the_plain_form_binds_as_the_gaussian() -> None:
    q = torch.zeros(2, 3, dtype=torch.float64)
    bound = QuadraticKernel(position=0.5, value=2.0, ndim=2).bind(q, q)
    assert type(bound.kernel) is Gaussian
    qa, ka = bound.dot_form()
    torch.testing.assert_close(qa @ ka.T, bound.score(), rtol=0, atol=1e-15)


def test_noise_offset_on_a_singular_form(rng: np.random.Generator) -> None:
    L = _metric(rng, 2, 3)
    q, k = rng.standard_normal((5, 3)), rng.standard_normal((6, 3))
    kernel = QuadraticKernel(position=L.T @ L, ndim=3, noise=0.7)
    got = kernel.score(torch.from_numpy(q), torch.from_numpy(k)).numpy()
    np.testing.assert_allclose(got, -np.maximum(_form(q, k, L.T @ L) - 0.7, 0.0),
                               rtol=1e-12, atol=1e-12)
    assert kernel.bind(torch.from_numpy(q), torch.from_numpy(k)).dot_form() is None


@pytest.mark.parametrize("noise", [0.0, 0.4])
def test_per_key_form_and_log_weight(rng: np.random.Generator, noise: float) -> None:
    q, k = rng.standard_normal((5, 3)), rng.standard_normal((6, 3))
    a = rng.standard_normal((6, 2, 2))
    field = a @ a.transpose(0, 2, 1)
    logw = rng.standard_normal(6)
    kernel = QuadraticKernel(None, 1.5, ndim=2, noise=noise, position_field=field,
                             key_log_weight=logw)
    got = kernel.score(torch.from_numpy(q), torch.from_numpy(k)).numpy()
    dx = q[:, None, :2] - k[None, :, :2]
    r2 = (1.5 * (q[:, None, 2] - k[None, :, 2]) ** 2
          + np.einsum("ija,jab,ijb->ij", dx, field, dx))
    np.testing.assert_allclose(got, -np.maximum(r2 - noise, 0.0) + logw[None, :],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rank", [2, 3])
def test_smooth_agrees_across_engines(rank: int) -> None:
    rng = np.random.default_rng(10 + rank)
    L = _metric(rng, rank, 3) * 2.0
    x = rng.standard_normal((400, 3))
    v = np.sin(x @ np.array([1.0, -0.5, 0.3]))
    golden = nadaraya.smooth(x, x, v, Gaussian(None, metric=L), engine="dense")
    ran = []
    for engine in ENGINES:
        for kernel in (Gaussian(None, metric=L),
                       QuadraticKernel(position=L.T @ L / 2.0, ndim=3)):
            try:
                got = nadaraya.smooth(x, x, v, kernel, engine=engine)
            except NadarayaError as err:
                assert "cannot run" in str(err)
                continue
            ran.append(engine)
            np.testing.assert_allclose(got, golden, rtol=1e-9, atol=1e-10,
                                       err_msg=f"{engine} {kernel!r}")
    assert {"dense", "streamed"} <= set(ran)


def test_product_rule_is_the_same_in_two_and_more_dimensions(rng: np.random.Generator) -> None:
    from nadaraya.kernels import Laplacian, Polynomial

    q = torch.from_numpy(rng.standard_normal((2, 5, 3)))
    k = torch.from_numpy(rng.standard_normal((2, 6, 3)))
    g, lap = Gaussian(0.7).on([0, 1]), Laplacian(1.3).on([2])
    product = g * lap
    naive = g.scores(q, k) + lap.scores(q, k)
    torch.testing.assert_close(product.scores(q, k), naive, rtol=1e-12, atol=1e-12)
    for b in range(2):
        bound = product.bind(q[b], k[b])
        torch.testing.assert_close(bound.score(), naive[b], rtol=1e-12, atol=1e-12)
        index = torch.tensor([[0, 2], [1, 1], [5, 0], [3, 4], [2, 2]])
        pairs = bound.pairs(slice(None), index)
        torch.testing.assert_close(pairs, naive[b].gather(1, index), rtol=1e-12, atol=1e-12)
        assert bool((bound.upper_bound() >= naive[b].amax(1)).all())
    # a positive polynomial factor: log K_w is one more score
    poly = Polynomial(2, 1.0).on([2])
    mixed = (g * poly).scores(q, k)
    expected = torch.exp(g.scores(q, k)) * poly.scores(q, k)
    torch.testing.assert_close(mixed, expected, rtol=1e-12, atol=0.0)
    # an odd one: weights multiply
    odd = Polynomial(3, 1.0).on([2])
    torch.testing.assert_close((g * odd).scores(q, k), torch.exp(g.scores(q, k)) * odd.scores(q, k),
                               rtol=1e-12, atol=1e-300)
