"""Grouped-query and multi-query attention, against SDPA's ``enable_gqa`` and repeated heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from nadaraya._errors import NadarayaError
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import explain_attention, kernel_attention

KERNELS = ["rbf", "laplacian", "polynomial", "cosine"]


def _t(rng: np.random.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape), dtype=dtype)


@pytest.mark.parametrize("kv_heads", [1, 2, 4, 8])
@pytest.mark.parametrize("masks", ["none", "causal", "bool", "float"])
def test_softmax_equals_sdpa_enable_gqa(rng, kv_heads, masks):
    B, H, L, S, E = 2, 8, 5, 7, 4
    q, k, v = _t(rng, B, H, L, E), _t(rng, B, kv_heads, S, E), _t(rng, B, kv_heads, S, 3)
    if masks == "causal":
        k, v = k[..., :L, :], v[..., :L, :]
    hide = torch.as_tensor(rng.random((B, H, L, S)) < 0.3)
    hide[..., 0] = False
    kw = {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": ~hide},
          "float": {"attn_mask": _t(rng, B, 1, L, S)}}[masks]
    want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
    got = kernel_attention(q, k, v, enable_gqa=True, **kw)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    got, w = kernel_attention(q, k, v, enable_gqa=True, need_weights=True, **kw)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert w.shape == (B, H, L, k.shape[-2])


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("kv_heads", [1, 3])
def test_other_kernels_equal_repeated_heads(rng, kernel, kv_heads):
    B, H, L, S, E = 2, 6, 5, 7, 4
    q = _t(rng, B, H, L, E, dtype=torch.float64)
    k, v = _t(rng, B, kv_heads, S, E, dtype=torch.float64), _t(rng, B, kv_heads, S, 2,
                                                               dtype=torch.float64)
    group = H // kv_heads
    want = kernel_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                            kernel, is_causal=True)
    got = kernel_attention(q, k, v, kernel, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(got, want)
    assert explain_attention(q, k, v, kernel, enable_gqa=True)


def test_gqa_is_refused_by_name(rng):
    q, k = _t(rng, 1, 6, 3, 4), _t(rng, 1, 4, 3, 4)
    with pytest.raises(NadarayaError, match=r"enable_gqa=True needs the query heads.*H=6.*H_kv=4"):
        kernel_attention(q, k, k, enable_gqa=True)
    with pytest.raises(NadarayaError, match="same number of heads"):
        kernel_attention(q, k[:, :2], k[:, :3], enable_gqa=True)
    with pytest.raises(NadarayaError, match="heads dimension"):
        kernel_attention(q[0, 0], k[0, 0], k[0, 0], enable_gqa=True)
    with pytest.raises(NadarayaError, match="leading"):  # without enable_gqa: refused as before
        kernel_attention(q, k, k)


@pytest.mark.parametrize("kernel", ["softmax", "rbf"])
@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("kdim", [None, 6])
def test_module_num_kv_heads(rng, kernel, kv_heads, kdim):
    torch.manual_seed(0)
    E, H, B, L, S = 8, 4, 2, 5, 6
    attn = KernelAttention(E, H, kernel=kernel, num_kv_heads=kv_heads, kdim=kdim,
                           batch_first=True, add_bias_kv=True).double()
    hd, kd = E // H, kdim or E
    width = kv_heads * hd
    wq, wk, wv = attn._weights()
    assert wq.shape == (E, E) and wk.shape == (width, kd) and wv.shape == (width, E)
    assert attn.bias_k.shape == (1, 1, width)
    x, kv = _t(rng, B, L, E).double(), _t(rng, B, S, kd).double()
    val = _t(rng, B, S, E).double()
    out, w = attn(x, kv, val, average_attn_weights=False)
    assert w.shape == (B, H, L, S + 1)
    bq, bk, bv = attn._biases()
    q = (x @ wq.T + bq).reshape(B, L, H, hd).transpose(1, 2)
    k = torch.cat([kv @ wk.T + bk, attn.bias_k.expand(B, 1, -1)], 1)
    v = torch.cat([val @ wv.T + bv, attn.bias_v.expand(B, 1, -1)], 1)
    k, v = (t.reshape(B, S + 1, kv_heads, hd).transpose(1, 2).repeat_interleave(H // kv_heads, 1)
            for t in (k, v))
    want = kernel_attention(q, k, v, attn.kernel)
    want = attn.out_proj(want.transpose(1, 2).reshape(B, L, E))
    torch.testing.assert_close(out, want)
    out.square().sum().backward()
    assert all(p.grad is not None for p in attn.parameters())


def test_module_with_all_heads_is_multi_head(rng):
    torch.manual_seed(1)
    a, b = KernelAttention(8, 4), KernelAttention(8, 4, num_kv_heads=4)
    b.load_state_dict(a.state_dict())
    x = _t(rng, 5, 2, 8)
    torch.testing.assert_close(b(x, x, x)[0], a(x, x, x)[0])


def test_module_num_kv_heads_is_refused_by_name():
    with pytest.raises(NadarayaError, match="num_kv_heads must be a positive divisor"):
        KernelAttention(8, 4, num_kv_heads=3)
    with pytest.raises(NadarayaError, match="num_kv_heads must be a positive divisor"):
        KernelAttention(8, 4, num_kv_heads=0)
    with pytest.raises(NadarayaError, match="tie_qk"):
        KernelAttention(8, 4, num_kv_heads=2, tie_qk=True)
    with pytest.raises(NadarayaError, match="positional"):
        KernelAttention(8, 4, num_kv_heads=2, positional="product")
