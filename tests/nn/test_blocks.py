"""The memory-bounded differentiable block pass, on its own and as a 2-D engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine.autograd import AutogradEngine, BlockMask, smooth_blocks
from nadaraya.engine.dense._engine import DenseEngine
from nadaraya.kernels import CallableKernel, Gaussian
from nadaraya.masks import Causal, LeaveOneOut, Window
from nadaraya.nn.functional import kernel_attention


def _t(rng: np.random.Generator, *shape: int, grad: bool = True) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape)).requires_grad_(grad)


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b.mT


def test_lse_and_its_gradient(rng):
    q, k, v = _t(rng, 2, 5, 3), _t(rng, 2, 7, 3), _t(rng, 2, 7, 2)
    with nadaraya.config_context(key_block=3, query_block=2):
        _out, lse = smooth_blocks(q, k, v, _dot, dot=True)
        torch.testing.assert_close(lse, torch.logsumexp(q @ k.mT, -1))

        def f(q, k, v):
            return smooth_blocks(q, k, v, _dot)

        assert torch.autograd.gradcheck(f, (q, k, v))


def test_huge_additive_masks_keep_weights_normalised(rng):
    """finfo.min masks (Hugging Face's) must not break the backward's normalisation."""
    q, k, v = _t(rng, 1, 4, 3), _t(rng, 1, 5, 3), _t(rng, 1, 5, 2)
    bias = torch.zeros(4, 5, dtype=torch.float64)
    bias[2] = torch.finfo(torch.float64).min
    g = torch.as_tensor(rng.standard_normal((1, 4, 2)))
    ref = torch.autograd.grad(torch.softmax(q @ k.mT + bias, -1) @ v, (q, k, v), g)
    out, _ = smooth_blocks(q, k, v, _dot, bias=bias, dot=True)
    torch.testing.assert_close(out, torch.softmax(q @ k.mT + bias, -1) @ v)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), g), ref, strict=True):
        torch.testing.assert_close(a, b)


def test_fully_hidden_blocks_are_skipped(rng):
    calls = []

    def block(a, b):
        calls.append((a.shape[-2], b.shape[-2]))
        return a @ b.mT

    q, k, v = _t(rng, 8, 2, grad=False), _t(rng, 8, 2, grad=False), _t(rng, 8, 1, grad=False)
    with nadaraya.config_context(key_block=2, query_block=2):
        smooth_blocks(q, k, v, block, mask=BlockMask(Causal(), (), 8, 8))
    assert len(calls) == 4 * 5 / 2  # the 10 blocks on or below the diagonal


@pytest.mark.parametrize("mask", [None, LeaveOneOut(), Window(2)])
def test_autograd_engine_matches_the_dense_engine(rng, mask):
    x = _t(rng, 30, 2, grad=False)
    y = _t(rng, 30, 1, grad=False)
    h = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    grads = []
    for engine in (AutogradEngine(), DenseEngine()):
        job, _ = build_job(x, x, y, Gaussian(h), mask, None)
        assert engine.refuse(job) is None
        with nadaraya.config_context(key_block=7, query_block=5):
            state = engine.run(job)
        out = state.mean()
        grads.append((out, torch.autograd.grad(out.square().sum(), h)[0]))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-12, rtol=1e-12)


def test_autograd_engine_refusals(rng):
    x = _t(rng, 5, 2, grad=False)
    job, _ = build_job(x, x, x[:, 0], "gaussian", None, None)
    assert "do not require grad" in AutogradEngine().refuse(job)
    xg = x.clone().requires_grad_()
    job, _ = build_job(xg, xg, x[:, 0], CallableKernel(lambda a, b: -torch.cdist(a, b)), None,
                       None)
    assert "kernel function" in AutogradEngine().refuse(job)


def test_engine_kernels_run_one_problem_at_a_time(rng):
    q, k, v = (_t(rng, 2, 2, 5, 3, grad=False) for _ in range(3))
    torch.testing.assert_close(kernel_attention(q, k, v, Gaussian(2.0), is_causal=True),
                               kernel_attention(q, k, v, "rbf", scale=0.25, is_causal=True))
    out, w = kernel_attention(q, k, v, Gaussian(2.0), need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64))
    assert math.isfinite(float(out.sum()))
