"""Bad input: clear errors that name the parameter and the fix."""

from __future__ import annotations

import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention


def _qkv(L=4, S=5, E=8):
    return torch.randn(2, 2, L, E), torch.randn(2, 2, S, E), torch.randn(2, 2, S, 3)


def test_functional_shape_errors():
    q, k, v = _qkv()
    with pytest.raises(NadarayaError, match="same number of features"):
        kernel_attention(q, k[..., :5], v)
    with pytest.raises(NadarayaError, match="same length"):
        kernel_attention(q, k, v[..., :4, :])
    with pytest.raises(NadarayaError, match="leading"):
        kernel_attention(q, torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 3))
    with pytest.raises(NadarayaError, match="must have shape"):
        kernel_attention(torch.randn(8), k, v)
    with pytest.raises(NadarayaError, match="share a dtype"):
        kernel_attention(q.double(), k, v)
    with pytest.raises(NadarayaError, match=r"torch\.Tensor"):
        kernel_attention(q.numpy(), k, v)


def test_functional_mask_errors():
    q, k, v = _qkv()
    with pytest.raises(NadarayaError, match=r"does not broadcast to \(\.\.\., L, S\)"):
        kernel_attention(q, k, v, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(NadarayaError, match="attn_mask has shape"):
        kernel_attention(q, k, v, attn_mask=torch.zeros(3, 2, 4, 5))
    with pytest.raises(NadarayaError, match="boolean"):
        kernel_attention(q, k, v, attn_mask=torch.ones(4, 5, dtype=torch.int64))
    with pytest.raises(NadarayaError, match="NaN"):
        kernel_attention(q, k, v, attn_mask=torch.full((4, 5), float("nan")))
    with pytest.raises(NadarayaError, match="not known"):
        kernel_attention(q, k, v, mask="diagonal")


def test_functional_kernel_and_option_errors():
    q, k, v = _qkv()
    with pytest.raises(NadarayaError, match="kernel 'sigmoid' is not known"):
        kernel_attention(q, k, v, "sigmoid")
    with pytest.raises(NadarayaError, match="mask= or attn_mask="):
        kernel_attention(q, k, v, torch.ones(4, 5, dtype=torch.bool))  # type: ignore[arg-type]
    with pytest.raises(NadarayaError, match="dropout_p"):
        kernel_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(NadarayaError, match="engine"):
        kernel_attention(q, k, v, engine="flash")
    with pytest.raises(NadarayaError, match="cannot run"):
        kernel_attention(q, k, v, "laplacian", engine="fused")
    with pytest.raises(NadarayaError, match="empty must be"):
        kernel_attention(q, k, v, empty="nearest")


def test_module_construction_errors():
    with pytest.raises(NadarayaError, match="multiple of num_heads"):
        KernelAttention(10, 3)
    with pytest.raises(NadarayaError, match="positional"):
        KernelAttention(8, 2, positional="relative")
    with pytest.raises(NadarayaError, match="not known"):
        KernelAttention(8, 2, kernel="tanh")
    with pytest.raises(NadarayaError, match="kdim == embed_dim"):
        KernelAttention(8, 2, tie_qk=True, kdim=4)


def test_module_forward_errors():
    attn = KernelAttention(8, 2, max_len=4, positional="absolute", batch_first=True)
    x = torch.randn(2, 3, 8)
    with pytest.raises(NadarayaError, match="expects 8"):
        attn(torch.randn(2, 3, 6), x, x)
    with pytest.raises(NadarayaError, match="batch size"):
        attn(x, torch.randn(3, 3, 8), torch.randn(3, 3, 8))
    with pytest.raises(NadarayaError, match="key_padding_mask must have shape"):
        attn(x, x, x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(NadarayaError, match=r"attn_mask must have shape \(L, S\)"):
        attn(x, x, x, attn_mask=torch.zeros(3, 4, dtype=torch.bool))
    with pytest.raises(NadarayaError, match="max_len"):
        long = torch.randn(2, 5, 8)
        attn(long, long, long)
    with pytest.raises(NadarayaError, match=r"must be \(batch, L, E\)"):
        attn(x, x[0], x)
