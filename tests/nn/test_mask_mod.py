"""FlexAttention-style ``mask_mod(b, h, q_idx, kv_idx)`` masks, per batch element and head.

Oracles: the boolean mask materialised by a Python loop over (b, h, i, j) (and
FlexAttention's ``create_mask`` where it runs), passed as SDPA's ``attn_mask``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from nadaraya._errors import NadarayaError
from nadaraya.masks import Causal, KNearest, MaskMod, Window, get_mask
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention

B, H, L, S = 2, 3, 5, 6
DOCS = torch.tensor([[0, 0, 1, 1, 1, 2], [0, 1, 1, 1, 2, 2]])  # document of each position


def sliding_by_head(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx + 1) & (q_idx - kv_idx <= h + 1)


def documents(b, h, q_idx, kv_idx):
    return DOCS[b, q_idx] == DOCS[b, kv_idx]


def per_batch(b, h, q_idx, kv_idx):
    return (kv_idx % (b + 2) == 0) | (kv_idx == q_idx)


MODS = [sliding_by_head, documents, per_batch]


def _loop(fn, b: int, h: int, m: int, n: int) -> torch.Tensor:
    """The mask by a Python loop over every index (scalar tensors, as FlexAttention's vmap)."""
    out = torch.zeros(b, h, m, n, dtype=torch.bool)
    for bi in range(b):
        for hi in range(h):
            for i in range(m):
                for j in range(n):
                    out[bi, hi, i, j] = bool(fn(torch.tensor(bi), torch.tensor(hi),
                                                torch.tensor(i), torch.tensor(j)))
    return out


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)


def test_callables_of_four_indices_are_mask_mods():
    assert isinstance(get_mask(documents), MaskMod)
    assert not isinstance(get_mask(lambda i, j: j <= i), MaskMod)


@pytest.mark.parametrize("fn", MODS)
def test_visible_set_equals_loop_and_create_mask(fn):
    q = torch.zeros(B, H, L, 2)  # equal scores: a key has weight exactly where visible
    k = torch.zeros(B, H, S, 2)
    _, w = kernel_attention(q, k, k, mask=fn, need_weights=True)
    want = _loop(fn, B, H, L, S)
    assert torch.equal(w > 0, want)
    try:
        from torch.nn.attention.flex_attention import create_mask
    except ImportError:
        return
    assert torch.equal(create_mask(fn, B, H, L, S, device="cpu"), want)


@pytest.mark.parametrize("fn", MODS)
@pytest.mark.parametrize("engine", ["fused", "streamed", "dense"])
def test_softmax_equals_sdpa_with_the_materialised_mask(rng, fn, engine):
    q, k, v = _t(rng, B, H, L, 4), _t(rng, B, H, S, 4), _t(rng, B, H, S, 3)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=_loop(fn, B, H, L, S))
    got = kernel_attention(q, k, v, mask=fn, engine=engine)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cosine"])
@pytest.mark.parametrize("combined", ["and window", "or causal", "and knearest"])
def test_combined_with_engine_masks(rng, kernel, combined):
    q, k, v = _t(rng, B, H, L, 4).double(), _t(rng, B, H, S, 4).double(), _t(
        rng, B, H, S, 3).double()
    mod = MaskMod(sliding_by_head)
    other = {"and window": Window(1), "or causal": Causal(),
             "and knearest": KNearest(3)}[combined]
    mask = mod | other if combined.startswith("or") else mod & other
    # the engine mask alone, materialised, combined with the loop's mask
    # (equal scores: a key has weight exactly where visible; k-nearest reads the points)
    if combined == "and knearest":
        _, seen = kernel_attention(q, k, v, kernel, mask=other, need_weights=True)
    else:
        zq, zk = torch.zeros(B, H, L, 2).double(), torch.zeros(B, H, S, 2).double()
        _, seen = kernel_attention(zq, zk, v, mask=other, need_weights=True)
    base = seen > 0
    loop = _loop(sliding_by_head, B, H, L, S)
    visible = loop | base if combined.startswith("or") else loop & base
    want = kernel_attention(q, k, v, kernel, mask=visible)
    got = kernel_attention(q, k, v, kernel, mask=mask)
    torch.testing.assert_close(got, want)


def test_kernel_without_batched_form_runs_per_head(rng):
    from nadaraya.kernels import CallableKernel

    kernel = CallableKernel(lambda a, b: -torch.cdist(a, b))
    assert not kernel.batched
    q, k, v = _t(rng, B, H, L, 2).double(), _t(rng, B, H, S, 2).double(), _t(
        rng, B, H, S, 1).double()
    want = kernel_attention(q, k, v, kernel, mask=_loop(per_batch, B, H, L, S))
    got = kernel_attention(q, k, v, kernel, mask=per_batch)
    torch.testing.assert_close(got, want)


def test_gradients_and_gqa(rng):
    q, k, v = (_t(rng, B, H, L, 4).requires_grad_(), _t(rng, B, 1, S, 4).requires_grad_(),
               _t(rng, B, 1, S, 3).requires_grad_())
    got = kernel_attention(q, k, v, "rbf", mask=sliding_by_head, enable_gqa=True)
    want = kernel_attention(q, k.expand(B, H, S, 4), v.expand(B, H, S, 3), "rbf",
                            mask=_loop(sliding_by_head, B, H, L, S))
    torch.testing.assert_close(got, want)
    g1 = torch.autograd.grad(got.sum(), (q, k, v))
    g2 = torch.autograd.grad(want.sum(), (q, k, v))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("batch_first", [False, True])
def test_module_mask_mod_equals_multihead_attention(rng, batch_first):
    torch.manual_seed(0)
    E = 12
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first)
    attn = KernelAttention.from_multihead(mha, mask=documents)
    x = _t(rng, B, S, E) if batch_first else _t(rng, S, B, E)
    hide = ~_loop(documents, B, H, S, S).reshape(B * H, S, S)  # True hides, as in MHA
    o1, w1 = mha(x, x, x, attn_mask=hide, average_attn_weights=False)
    o2, w2 = attn(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)
    o3, _ = KernelAttention.from_multihead(mha)(x, x, x, mask=MaskMod(documents) & Causal())
    o4, _ = mha(x, x, x, attn_mask=hide | ~torch.ones(S, S, dtype=torch.bool).tril())
    torch.testing.assert_close(o3, o4, atol=1e-5, rtol=1e-5)


def test_bad_mask_mods_are_refused_by_name(rng):
    q = _t(rng, B, H, L, 4)
    with pytest.raises(NadarayaError, match="mask_mod must return a bool tensor"):
        kernel_attention(q, q, q, mask=lambda b, h, i, j: i - j)
    with pytest.raises(NadarayaError, match="does not broadcast"):
        kernel_attention(q, q, q, mask=lambda b, h, i, j: torch.ones(7, dtype=torch.bool))
