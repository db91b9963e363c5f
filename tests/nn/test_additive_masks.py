"""Floating (additive) masks: +inf and NaN are errors, fully hidden rows follow ``empty=``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nadaraya
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import attention_weights, kernel_attention

KERNELS = ["softmax", "rbf", "laplacian", "polynomial", "linear", "cosine"]


def _qkv(rng: np.random.Generator, L: int = 6, S: int = 7, dtype=torch.float64):
    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.standard_normal(shape), dtype=dtype)

    return t(2, 3, L, 8), t(2, 3, S, 8), t(2, 3, S, 4)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("argument", ["attn_mask", "mask"])
@pytest.mark.parametrize("engine", ["auto", "streamed", "dense"])
def test_positive_infinity_in_a_float_mask_is_an_error(rng, kernel, argument, engine):
    q, k, v = _qkv(rng)
    bias = torch.zeros(6, 7, dtype=torch.float64)
    bias[4, 2] = math.inf
    with pytest.raises(nadaraya.NadarayaError,
                       match=rf"^{argument} contains \+inf .*index \(4, 2\).*Use -inf .*boolean"):
        kernel_attention(q, k, v, kernel, engine=engine, **{argument: bias})


@pytest.mark.parametrize("kernel", KERNELS)
def test_nan_in_a_float_mask_is_an_error(rng, kernel):
    q, k, v = _qkv(rng)
    bias = torch.zeros(1, 3, 6, 7, dtype=torch.float64)
    bias[0, 1, 0, 5] = math.inf - math.inf
    with pytest.raises(nadaraya.NadarayaError, match=r"^attn_mask contains NaN .*\(0, 1, 0, 5\)"):
        kernel_attention(q, k, v, kernel, attn_mask=bias)
    with pytest.raises(nadaraya.NadarayaError, match=r"^attn_mask contains NaN"):
        attention_weights(q, k, kernel, attn_mask=bias)


def test_mask_values_beyond_the_queries_dtype_are_errors(rng):
    q, k, v = (t.half() for t in _qkv(rng))
    bias = torch.zeros(6, 7)
    bias[1, 1] = 1e5  # finite in float32, +inf in float16
    with pytest.raises(nadaraya.NadarayaError, match=r"^attn_mask exceeds the largest "
                                                     r"torch\.float16 number"):
        kernel_attention(q, k, v, attn_mask=bias)
    big = torch.full((6, 7), 1e308, dtype=torch.float64)
    with pytest.raises(nadaraya.NadarayaError, match=r"^the sum of mask and attn_mask exceeds"):
        kernel_attention(*_qkv(rng), mask=big, attn_mask=big)


@pytest.mark.parametrize("name", ["key_padding_mask", "attn_mask", "attn_bias"])
@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_module_names_the_mask_with_a_bad_value(rng, name, bad):
    attn = KernelAttention(8, 2, kernel="rbf", batch_first=True)
    x = torch.as_tensor(rng.standard_normal((2, 5, 8)), dtype=torch.float32)
    mask = {"key_padding_mask": torch.zeros(2, 5), "attn_mask": torch.zeros(5, 5),
            "attn_bias": torch.zeros(2, 2, 5, 5)}[name]
    mask.view(-1)[3] = bad
    what = r"\+inf" if bad > 0 else "NaN"
    with pytest.raises(nadaraya.NadarayaError,
                       match=rf"^{name} contains {what} .*\(or True in a boolean mask\)"):
        attn(x, x, x, **{name: mask})


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("engine", ["auto", "streamed", "dense"])
def test_fully_hidden_rows_give_zero_and_zero_gradients(rng, kernel, engine):
    """SDPA's convention: a query that sees no key outputs zero; nothing flows through it."""
    q, k, v = (t.requires_grad_() for t in _qkv(rng))
    bias = torch.as_tensor(rng.standard_normal((6, 7)))
    bias[2] = -math.inf
    out = kernel_attention(q, k, v, kernel, attn_mask=bias, engine=engine)
    assert bool((out[..., 2, :] == 0).all())
    g = torch.as_tensor(rng.standard_normal(out.shape))
    got = torch.autograd.grad(out, (q, k, v), g)
    # the same problem without the hidden query
    keep = [0, 1, 3, 4, 5]
    rest = kernel_attention(q[..., keep, :], k, v, kernel, attn_mask=bias[keep], engine=engine)
    torch.testing.assert_close(out[..., keep, :], rest, atol=1e-12, rtol=1e-12)
    ref = torch.autograd.grad(rest, (q, k, v), g[..., keep, :])
    assert bool((got[0][..., 2, :] == 0).all())
    torch.testing.assert_close(got[0][..., keep, :], ref[0][..., keep, :], atol=1e-12,
                               rtol=1e-12)
    for a, b in zip(got[1:], ref[1:], strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    if kernel == "softmax":
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))


def test_fully_hidden_rows_under_the_other_policies(rng):
    q, k, v = _qkv(rng)
    bias = torch.zeros(6, 7, dtype=torch.float64)
    bias[3] = -math.inf
    assert bool(torch.isnan(kernel_attention(q, k, v, "rbf", attn_mask=bias, empty="nan")
                            [..., 3, :]).all())
    with pytest.raises(nadaraya.NadarayaError, match="no key"):
        kernel_attention(q, k, v, "laplacian", attn_mask=bias, empty="raise")
    # the module's empty="nan" is nn.MultiheadAttention's output for a fully padded sequence
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    attn = KernelAttention.from_multihead(mha, empty="nan")
    x = torch.as_tensor(rng.standard_normal((1, 6, 8)))
    pad = torch.ones(1, 6, dtype=torch.bool)
    assert bool(torch.isnan(attn(x, x, x, key_padding_mask=pad)[0]).all())
    assert bool(torch.isnan(mha(x, x, x, key_padding_mask=pad)[0]).all())
    assert bool((KernelAttention.from_multihead(mha)(x, x, x, key_padding_mask=pad)[0]
                 == mha.out_proj.bias).all())  # zero attention output, then the projection
