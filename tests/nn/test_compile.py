"""``torch.compile(fullgraph=True)`` of kernel attention: no graph break, the eager results.

``fullgraph=True`` raises at the first graph break, so compiling is the test;
the oracle is the same call run eagerly (forward and gradients). The fast
tests trace with the ``aot_eager`` backend (the graph and its backward, no
code generation); one slow test runs the default inductor backend.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya._errors import NadarayaError
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention

KERNELS = ["softmax", "rbf", "laplacian", "cosine", "polynomial", "linear"]


def _qkv(rng: np.random.Generator, *shape: int) -> list[torch.Tensor]:
    return [torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32).requires_grad_()
            for _ in range(3)]


def _compare(compiled, eager, inputs, g) -> None:
    out = compiled(*inputs)
    ref = eager(*inputs)
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=2e-5)
    got = torch.autograd.grad(out, inputs, g)
    want = torch.autograd.grad(ref, inputs, g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-4)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_attention_compiles_without_graph_breaks(rng, kernel, causal):
    q, k, v = _qkv(rng, 2, 2, 9, 8)
    if kernel == "linear":  # keep the signed normaliser away from zero
        q, k = (t.detach().abs().requires_grad_() for t in (q, k))

    def f(q, k, v):
        return kernel_attention(q, k, v, kernel, is_causal=causal)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    _compare(compiled, f, [q, k, v], torch.ones(2, 2, 9, 8))


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_additive_mask_compiles(rng, kernel):
    q, k, v = _qkv(rng, 1, 2, 6, 4)
    bias = torch.as_tensor(rng.standard_normal((6, 6)), dtype=torch.float32)

    def f(q, k, v):
        return kernel_attention(q, k, v, kernel, attn_mask=bias)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    _compare(compiled, f, [q, k, v], torch.ones(1, 2, 6, 4))


@pytest.mark.parametrize("kernel", ["softmax", "rbf", "laplacian"])
def test_module_compiles_without_graph_breaks(rng, kernel):
    torch.manual_seed(0)
    attn = KernelAttention(8, 2, kernel=kernel, batch_first=True, learn_scale=True)
    x = torch.as_tensor(rng.standard_normal((2, 7, 8)), dtype=torch.float32)

    def f(x):
        return attn(x, x, x, need_weights=False, is_causal=True)[0]

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out, ref = compiled(x), f(x)
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=2e-5)
    params = [p for _, p in attn.named_parameters()]
    got = torch.autograd.grad(out.square().sum(), params)
    want = torch.autograd.grad(ref.square().sum(), params)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-4)


def test_empty_raise_is_refused_when_compiled(rng):
    q, k, v = _qkv(rng, 1, 1, 3, 2)
    visible = torch.ones(3, 3, dtype=torch.bool)

    def f(q, k, v):
        return kernel_attention(q, k, v, "rbf", attn_mask=visible, empty="raise")

    # dynamo reports the error raised while tracing with its message
    with pytest.raises((NadarayaError, torch._dynamo.exc.Unsupported), match="empty='raise'"):
        torch.compile(f, fullgraph=True, backend="eager")(q, k, v)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_inductor(rng, kernel):
    q, k, v = _qkv(rng, 2, 2, 64, 16)

    def f(q, k, v):
        return kernel_attention(q, k, v, kernel)

    compiled = torch.compile(f, fullgraph=True)
    _compare(compiled, f, [q, k, v], torch.ones(2, 2, 64, 16))
