"""Attention's kernels (the unified classes of nadaraya.kernels): formulas, scales, products,
and use through nadaraya.smooth."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.kernels import (
    Cosine,
    ExpDot,
    Exponential,
    Gaussian,
    LinearKernel,
    Polynomial,
    ProductKernel,
    get_attention_kernel,
)

from ._helpers import sqdist


def RBFKernel(scale=None, **kw):
    return get_attention_kernel("rbf", scale=scale, **kw)


def LaplacianKernel(scale=None):
    return get_attention_kernel("laplacian", scale=scale)


def CosineKernel(scale=None):
    return Exponential(Cosine(), scale)


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape))


def test_scores_match_the_formulas(rng):
    q, k = _t(rng, 2, 5, 4), _t(rng, 2, 6, 4)
    s = 0.3
    dot = q @ k.mT
    torch.testing.assert_close(ExpDot(s).scores(q, k), s * dot)
    torch.testing.assert_close(RBFKernel(s).scores(q, k), -0.5 * s * sqdist(q, k))
    torch.testing.assert_close(LaplacianKernel(s).scores(q, k), -math.sqrt(s) * sqdist(q, k).sqrt())
    cos = dot / (q.norm(dim=-1)[..., None] * k.norm(dim=-1)[..., None, :])
    torch.testing.assert_close(CosineKernel(s).scores(q, k), s * cos)
    torch.testing.assert_close(Polynomial(3, 1.5, scale=s).scores(q, k), (s * dot + 1.5) ** 3)
    torch.testing.assert_close(LinearKernel(scale=s).scores(q, k), s * dot)


def test_default_scales():
    q = torch.ones(1, 3, 16, dtype=torch.float64)
    assert float(ExpDot().scores(q, q)[0, 0, 0]) == pytest.approx(16 / 4)
    assert float(CosineKernel().scores(q, q)[0, 0, 0]) == pytest.approx(4.0)


def test_learnable_scale_is_positive_and_trains():
    kern = RBFKernel(0.5, learnable=True)
    q = torch.randn(4, 3, dtype=torch.float64)
    fixed = RBFKernel(0.5).scores(q, q + 1)
    torch.testing.assert_close(kern.scores(q, q + 1).detach(), fixed)  # starts at the init value
    assert kern.get_params()["bandwidth"] == pytest.approx(0.5 ** -0.5)
    with torch.no_grad():
        kern.raw_scale.fill_(-50.0)
    assert bool((kern.scores(q, q + 1) < 0).all())  # the factor stays positive
    kern.raw_scale.data.fill_(0.0)
    kern.scores(q, q + 1).sum().backward()
    assert kern.raw_scale.grad is not None and float(kern.raw_scale.grad) != 0


def test_names_and_aliases():
    assert isinstance(get_attention_kernel("exp"), ExpDot)
    assert isinstance(get_attention_kernel("Gaussian"), Gaussian)
    with pytest.raises(nadaraya.NadarayaError, match="not known; use one of softmax, rbf"):
        get_attention_kernel("sigmoid")
    with pytest.raises(nadaraya.NadarayaError, match="probably a mask"):
        get_attention_kernel(torch.ones(2, 2))  # type: ignore[arg-type]
    with pytest.raises(nadaraya.NadarayaError, match="carries its own"):
        get_attention_kernel(RBFKernel(), scale=2.0)
    with pytest.raises(nadaraya.NadarayaError, match="positive finite"):
        RBFKernel(-1.0)
    with pytest.raises(nadaraya.NadarayaError, match="positive finite"):
        ExpDot(-1.0)


def test_attention_kernels_work_in_the_engine(rng):
    q, k, v = _t(rng, 9, 3), _t(rng, 11, 3), _t(rng, 11, 2)
    torch.testing.assert_close(nadaraya.smooth(q, k, v, RBFKernel(0.25)),
                               nadaraya.smooth(q, k, v, "gaussian", bandwidth=2.0))
    torch.testing.assert_close(nadaraya.smooth(q, k, v, LaplacianKernel(0.25)),
                               nadaraya.smooth(q, k, v, "laplacian", bandwidth=2.0))
    torch.testing.assert_close(nadaraya.smooth(q, k, v, ExpDot(0.5)),
                               nadaraya.smooth(q, k, v, nadaraya.kernels.ExpDot(0.5)))
    w = (0.5 * q @ k.T) ** 2
    torch.testing.assert_close(nadaraya.smooth(q, k, v, Polynomial(scale=0.5)),
                               (w / w.sum(1, keepdim=True)) @ v)
    w = 0.5 * q @ k.T
    torch.testing.assert_close(nadaraya.smooth(q, k, v, LinearKernel(scale=0.5)),
                               (w / w.sum(1, keepdim=True)) @ v)


def test_product_adds_scores_on_separate_columns(rng):
    q, k = _t(rng, 2, 5, 6), _t(rng, 2, 7, 6)
    prod = RBFKernel(0.5).on(slice(0, 4)) * ExpDot(0.2).on(slice(4, 6))
    assert isinstance(prod, ProductKernel)
    ref = -0.25 * sqdist(q[..., :4], k[..., :4]) + 0.2 * q[..., 4:] @ k[..., 4:].mT
    torch.testing.assert_close(prod.scores(q, k), ref)
    mixed = Polynomial(scale=0.5).on(slice(0, 4)) * ExpDot(0.2).on(slice(4, 6))
    ref = (0.5 * q[..., :4] @ k[..., :4].mT) ** 2 * torch.exp(0.2 * q[..., 4:] @ k[..., 4:].mT)
    torch.testing.assert_close(mixed.scores(q, k), ref)
    # a factor without columns reads them all: its scores add on every column
    both = ProductKernel([RBFKernel(0.5), ExpDot(0.2)])
    torch.testing.assert_close(both.scores(q, k), -0.25 * sqdist(q, k) + 0.2 * q @ k.mT)
