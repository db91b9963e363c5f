"""Every attention kernel in float16 and bfloat16: the input dtype out, float32 accuracy.

The reference is the float32 computation on the same (rounded) inputs. The
half-precision result rounds the prepared points, the scores and the output
in its dtype, about one unit ``eps`` each relative to the values (the inputs
have unit variance, so the scores are of order one); the tolerance allows
eight, forward and backward (relative to the largest reference gradient).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya.kernels import get_attention_kernel
from nadaraya.masks import Window
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import attention_weights, kernel_attention

KERNELS = ["softmax", "rbf", "laplacian", "polynomial", "linear", "cosine", "product"]
HALF = [torch.float16, torch.bfloat16]


def _kernel(name: str):
    if name == "product":
        return (get_attention_kernel("laplacian").on(slice(0, 4))
                * get_attention_kernel("rbf").on(slice(4, 8)))
    return name


def _inputs(rng: np.random.Generator, kernel: str, dtype: torch.dtype, S: int = 300):
    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32).to(dtype)

    q, k, v, g = t(1, 2, 16, 8), t(1, 2, S, 8), t(1, 2, S, 4), t(1, 2, 16, 4)
    if kernel == "linear":  # keep the signed normaliser away from zero
        q, k = q.abs(), k.abs()
    return q, k, v, g


def _close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, scale: float) -> None:
    assert got.dtype == dtype
    err = float((got.detach().float() - ref).abs().max())
    assert err <= 8 * torch.finfo(dtype).eps * scale, (err / scale, torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("engine", ["auto", "streamed", "dense"])
@pytest.mark.parametrize("mask", [None, Window(40)])
def test_half_precision_forward_and_backward(rng, dtype, kernel, engine, mask):
    q, k, v, g = _inputs(rng, kernel, dtype)
    half = [t.clone().requires_grad_() for t in (q, k, v)]
    single = [t.float().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*half, _kernel(kernel), mask, engine=engine)
    ref = kernel_attention(*single, _kernel(kernel), mask, engine=engine)
    _close(out, ref.detach(), dtype, float(v.float().abs().max()))
    grads = torch.autograd.grad(out, half, g)
    refs = torch.autograd.grad(ref, single, g.float())
    for a, b in zip(grads, refs, strict=True):
        _close(a, b, dtype, float(b.abs().max()))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", KERNELS)
def test_half_precision_weights(rng, dtype, kernel):
    q, k, _, _ = _inputs(rng, kernel, dtype, S=40)
    w = attention_weights(q, k, _kernel(kernel), is_causal=True)
    ref = attention_weights(q.float(), k.float(), _kernel(kernel), is_causal=True)
    _close(w, ref, dtype, float(ref.abs().max()))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", KERNELS)
def test_half_precision_scores(rng, dtype, kernel):
    q, k, _, _ = _inputs(rng, kernel, dtype, S=40)
    module = get_attention_kernel(kernel) if kernel != "product" else _kernel(kernel)
    q = q.clone().requires_grad_()
    scores = module.scores(q, k)
    ref = module.scores(q.detach().float(), k.float())
    _close(scores, ref, dtype, float(ref.abs().max()))
    (dq,) = torch.autograd.grad(scores.float().square().sum(), q)
    assert dq.dtype == dtype and bool(torch.isfinite(dq).all())


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", ["softmax", "laplacian", "polynomial"])
def test_half_precision_module_trains(rng, dtype, kernel):
    torch.manual_seed(0)
    attn = KernelAttention(16, 2, kernel=kernel, dtype=dtype, batch_first=True)
    x = torch.as_tensor(rng.standard_normal((2, 9, 16)), dtype=dtype)
    out, w = attn(x, x, x, is_causal=True, attn_mask=torch.ones(9, 9, dtype=torch.bool).triu(1))
    assert out.dtype == w.dtype == dtype
    out.float().square().mean().backward()
    for name, p in attn.named_parameters():
        assert p.grad is not None and p.grad.dtype == dtype, name
        assert bool(torch.isfinite(p.grad).all()), name
