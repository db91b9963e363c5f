"""Values near the dtype's largest number: attention gives their representable mean.

Multiplying the values by a power of two only changes exponents, so the
result on values near the largest number must be the result on small values
times that power of two: exactly, for the streamed pass that rescales them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import explain_attention, kernel_attention

KERNELS = ["softmax", "rbf", "laplacian", "polynomial", "linear", "cosine"]
SHIFT = {torch.float32: 2.0**127, torch.float64: 2.0**1023}


def _problem(rng: np.random.Generator, kernel: str, dtype: torch.dtype):
    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.standard_normal(shape), dtype=dtype)

    q, k = t(1, 2, 5, 4), t(1, 2, 300, 4)
    if kernel == "linear":  # keep the signed normaliser away from zero
        q, k = q.abs(), k.abs()
    v = torch.as_tensor(0.5 + 0.45 * rng.random((1, 2, 300, 3)), dtype=dtype)  # below 1
    g = torch.as_tensor(rng.uniform(-1, 1, (1, 2, 5, 3)), dtype=dtype)
    return q, k, v, g


def _run(q, k, v, g, kernel, engine):
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*inputs, kernel, engine=engine)
    return (out.detach(), *torch.autograd.grad(out, inputs, g))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("engine", ["auto", "streamed"])
def test_values_near_the_largest_number(rng, dtype, kernel, engine):
    q, k, v, g = _problem(rng, kernel, dtype)
    shift = SHIFT[dtype]  # v * shift lies in [0.5, 0.95] times the largest number
    big = _run(q, k, v * shift, g, kernel, engine)
    small = _run(q, k, v, g, kernel, "streamed")
    for a, b, factor in zip(big, small, (shift, shift, shift, 1.0), strict=True):
        assert bool(torch.isfinite(a).all())
        torch.testing.assert_close(a, b * factor, rtol=0, atol=0)


def test_the_fused_kernel_leaves_huge_values_to_the_streamed_pass(rng):
    q, k, v, _ = _problem(rng, "softmax", torch.float32)
    assert explain_attention(q, k, v)["fused"] == "chosen"
    reasons = explain_attention(q, k, v * 2.0**100)
    assert "values as large as" in reasons["fused"] and reasons["streamed"] == "chosen"


@pytest.mark.parametrize("kernel", KERNELS)
def test_weights_path_mean_is_representable(rng, kernel):
    q, k, v, _ = _problem(rng, kernel, torch.float32)
    out, _ = kernel_attention(q, k, v * 2.0**127, kernel, need_weights=True)
    ref = kernel_attention(q.double(), k.double(), v.double(), kernel, engine="dense")
    assert bool(torch.isfinite(out).all())
    torch.testing.assert_close(out.double() / 2.0**127, ref, rtol=1e-5, atol=0)



def _identity_module(kernel: str, dtype: torch.dtype) -> KernelAttention:
    """One head whose projections are identities: attention on the inputs themselves."""
    attn = KernelAttention(4, 1, kernel=kernel, bias=False, vdim=3, dtype=dtype, batch_first=True)
    with torch.no_grad():
        for w in (attn.q_proj_weight, attn.k_proj_weight, attn.v_proj_weight,
                  attn.out_proj.weight):
            w.copy_(torch.eye(*w.shape, dtype=dtype))
    return attn


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "linear"])
@pytest.mark.parametrize("path", ["dense", "need_weights", "module"])
def test_weights_path_gradients_of_values_near_the_largest_number(rng, kernel, path):
    """The weights path's float32 gradients match float64 for values near the largest number.

    Its autograd graph once formed ``g @ v.mT`` (a gradient times values near
    ``2**127``, summed over the features: +inf) and then ``inf - inf``: NaN
    gradients under a finite forward. (The linear kernel's true gradients
    here exceed the float32 range.)
    """
    q, k, v, _ = _problem(rng, kernel, torch.float32)
    v = v * 2.0**127

    def run(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        inputs = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        if path == "module":  # need_weights=True (the default) takes the weights path
            out, _ = _identity_module(kernel, dtype)(*(t[0] for t in inputs))
        else:
            out = kernel_attention(*inputs, kernel, engine="dense",
                                   need_weights=path == "need_weights")
            out = out[0] if path == "need_weights" else out
        g = torch.ones_like(out)  # every feature pulls one way: g . v_j near 3 * 2**127
        return (out, *torch.autograd.grad(out, inputs, g))

    for got, ref in zip(run(torch.float32), run(torch.float64), strict=True):
        assert bool(torch.isfinite(got).all())
        err = float((got.detach().double() - ref).abs().max())
        assert err <= 32 * torch.finfo(torch.float32).eps * float(ref.abs().max())
