"""Gradients through piecewise-constant weights (uniform kernel, arg-max) in the autograd engine.

Such a weight does not change as a query or key moves, except where a key
crosses the kernel's edge: its gradient is zero almost everywhere, while the
gradient with respect to the values is still the weights themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.kernels import Gaussian, Uniform


def _problem(rng: np.random.Generator, m: int = 7, n: int = 12, d: int = 1):
    def t(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.as_tensor(scale * rng.standard_normal(shape)).requires_grad_()

    return t(m, d, scale=3.0), t(n, d, scale=3.0), t(n, 2)


def _margin(q: torch.Tensor, k: torch.Tensor, h: float) -> float:
    """Distance of the closest pair to the uniform kernel's edge ``|q - k| = h``."""
    return float((torch.cdist(q.detach(), k.detach()) - h).abs().min())


@pytest.mark.parametrize("engine", ["auto", "autograd"])
def test_uniform_kernel_gradients(rng, engine):
    q, k, v = _problem(rng)
    assert _margin(q, k, 3.0) > 1e-4  # finite differences below cross no edge
    out = nadaraya.smooth(q, k, v, "uniform", bandwidth=3.0, engine=engine)
    g = torch.as_tensor(rng.standard_normal(out.shape))
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), g)
    assert bool((dq == 0).all()) and bool((dk == 0).all())
    w = nadaraya.weights(q.detach(), k.detach(), "uniform", bandwidth=3.0)
    torch.testing.assert_close(dv, w.T @ g, atol=1e-14, rtol=1e-14)

    def f(q, k, v):
        return nadaraya.smooth(q, k, v, "uniform", bandwidth=3.0, engine=engine)

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_uniform_times_gaussian_gradient_is_the_gaussian_part(rng):
    q, k, v = _problem(rng, d=2)
    kernel = Uniform(30.0).on([0]) * Gaussian(1.5).on([1])
    assert _margin(q[:, :1], k[:, :1], 30.0) > 1e-4

    def f(q, k, v):
        return nadaraya.smooth(q, k, v, kernel, engine="autograd")

    assert torch.autograd.gradcheck(f, (q, k, v))
    # every key within the uniform factor's reach: the product is the Gaussian alone
    dq = torch.autograd.grad(f(q, k, v).sum(), q)[0]
    ref = torch.autograd.grad(nadaraya.smooth(q, k, v, Gaussian(1.5).on([1]), engine="dense")
                              .sum(), q)[0]
    torch.testing.assert_close(dq, ref, atol=1e-12, rtol=1e-12)
    assert bool((dq[:, 0] == 0).all())
