"""One distance routine for 2-D and batched points, against the formula in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya.kernels import Gaussian, Laplacian
from nadaraya.kernels._distance import distance, sqdist


def _naive(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)


@pytest.mark.parametrize("e", [1, 3, 4, 5, 9])
def test_two_dimensional_points_are_the_batched_case(rng: np.random.Generator, e: int) -> None:
    q, k = rng.standard_normal((2, 3, 6, e)), rng.standard_normal((2, 3, 7, e))
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    batched = sqdist(qt, kt, coef=-0.5)
    np.testing.assert_allclose(batched.numpy(), -0.5 * _naive(q, k), rtol=1e-13, atol=1e-14)
    for a in range(2):
        for b in range(3):
            alone = sqdist(qt[a, b], kt[a, b], coef=-0.5)
            torch.testing.assert_close(alone, batched[a, b], rtol=1e-15, atol=0.0)
            buffer = torch.empty(6, 7, dtype=torch.float64)
            assert sqdist(qt[a, b], kt[a, b], coef=-0.5, out=buffer) is buffer
            torch.testing.assert_close(buffer, alone, rtol=0.0, atol=0.0)
    np.testing.assert_allclose(distance(qt, kt).numpy(), np.sqrt(_naive(q, k)), rtol=1e-13,
                               atol=1e-14)


@pytest.mark.parametrize("e", [2, 8])
def test_bind_prepare_and_pairs_give_the_same_scores(rng: np.random.Generator, e: int) -> None:
    q, k = rng.standard_normal((5, e)), rng.standard_normal((6, e)) + 2.0
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    for kernel in (Gaussian(0.8), Laplacian(1.5)):
        naive = kernel.profile(torch.from_numpy(_naive(q, k)) / kernel.bandwidth**2).numpy()
        bound = kernel.bind(qt, kt)
        np.testing.assert_allclose(bound.score().numpy(), naive, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(kernel.scores(qt[None], kt[None])[0].numpy(), naive,
                                   rtol=1e-12, atol=1e-13)
        index = torch.tensor([[0, 5], [1, 1], [2, 3], [4, 0], [5, 5]])
        np.testing.assert_allclose(bound.pairs(slice(None), index).numpy(),
                                   np.take_along_axis(naive, index.numpy(), 1), rtol=1e-12,
                                   atol=1e-13)


@pytest.mark.parametrize("e", [3, 8])
def test_gradients_of_tiny_points_and_half_precision(e: int) -> None:
    rng = np.random.default_rng(e)
    q64, k64 = rng.standard_normal((4, e)), rng.standard_normal((5, e))
    scale = 1e-23
    q = torch.tensor(q64 * scale, dtype=torch.float32, requires_grad=True)
    k = torch.tensor(k64 * scale, dtype=torch.float32)
    r = distance(q, k)
    r.sum().backward()
    # d/dq sum_j ||q - k_j|| = sum_j (q - k_j) / ||q - k_j||: the scale cancels
    diff = q64[:, None, :] - k64[None, :, :]
    expected = (diff / np.linalg.norm(diff, axis=-1, keepdims=True)).sum(1)
    np.testing.assert_allclose(q.grad.numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(r.detach().numpy() / scale, np.sqrt(_naive(q64, k64)), rtol=1e-5)
    half = sqdist(torch.tensor(q64, dtype=torch.float16), torch.tensor(k64, dtype=torch.float16))
    assert half.dtype == torch.float16
    np.testing.assert_allclose(half.double().numpy(), _naive(q64, k64), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("e", [1, 2, 3, 4])
def test_the_differentiable_pass_rounds_as_the_plain_one(e: int) -> None:
    # the autograd engine's backward recomputes a block with gradients: a score one
    # ulp above the forward's maximum (128 near 2e9 in float32) made exp overflow
    gen = torch.Generator().manual_seed(e)
    q = torch.randn(7, e, generator=gen) * 7e4
    k = torch.randn(9, e, generator=gen) * 7e4
    plain = sqdist(q, k, coef=-0.5)
    traced = sqdist(q.clone().requires_grad_(), k, coef=-0.5)
    assert torch.equal(plain, traced.detach())


def test_streamed_attention_gradients_far_apart_in_half_precision() -> None:
    from nadaraya.nn.functional import kernel_attention

    q = torch.tensor([[[[27392.0, -46080.0, -91648.0]]]])
    k = torch.tensor([[[[-35072.0, -94720.0, -89088.0], [98304.0, 72704.0, 10112.0],
                        [93696.0, 98304.0, -21376.0], [-36096.0, 35840.0, -95744.0]]]])
    v = torch.tensor([[[[0.2734], [-0.4609], [-0.9180], [-0.9688]]]])
    for dtype in (torch.bfloat16, torch.float32):
        qq, kk, vv = (t.to(dtype).requires_grad_() for t in (q, k, v))
        out = kernel_attention(qq, kk, vv, "rbf", engine="streamed")
        for grad in torch.autograd.grad(out.sum(), [qq, kk, vv]):
            assert torch.isfinite(grad).all(), dtype
