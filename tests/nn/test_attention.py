"""KernelAttention against torch.nn.MultiheadAttention and explicit formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from nadaraya.masks import KNearest, Window
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention

from ._helpers import naive_attention

KERNELS = ["softmax", "rbf", "laplacian", "polynomial", "linear", "cosine"]


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("dims", [(None, None), (6, 5)])
@pytest.mark.parametrize("masks", ["none", "padding", "attn", "both", "float3d"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_equals_multihead_attention(rng, batch_first, dims, masks, need_weights):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=dims[0], vdim=dims[1])
    attn = KernelAttention.from_multihead(mha)
    B, L, S = 3, 5, 7

    def shape(n: int, e: int) -> tuple[int, ...]:
        return (B, n, e) if batch_first else (n, B, e)

    x, k, v = _t(rng, *shape(L, 16)), _t(rng, *shape(S, dims[0] or 16)), _t(
        rng, *shape(S, dims[1] or 16))
    pad = torch.as_tensor(rng.random((B, S)) < 0.3)
    pad[:, 0] = False
    hide = torch.as_tensor(rng.random((L, S)) < 0.3)
    hide[:, 0] = False
    kw = {"none": {}, "padding": {"key_padding_mask": pad}, "attn": {"attn_mask": hide},
          "both": {"key_padding_mask": pad, "attn_mask": hide},
          "float3d": {"attn_mask": _t(rng, B * 4, L, S)}}[masks]
    for average in (True, False):
        o1, w1 = mha(x, k, v, need_weights=need_weights, average_attn_weights=average, **kw)
        o2, w2 = attn(x, k, v, need_weights=need_weights, average_attn_weights=average, **kw)
        torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
        if need_weights:
            torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)
        else:
            assert w2 is None


def test_state_dict_loads_both_ways(rng):
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    attn = KernelAttention(8, 2, batch_first=True)
    attn.load_state_dict(mha.state_dict())
    x = _t(rng, 2, 4, 8)
    torch.testing.assert_close(attn(x, x, x)[0], mha(x, x, x)[0], atol=1e-6, rtol=1e-5)
    mha2 = nn.MultiheadAttention(8, 2, batch_first=True)
    mha2.load_state_dict(attn.state_dict())
    torch.testing.assert_close(mha2(x, x, x)[0], mha(x, x, x)[0])


def test_causal_and_unbatched_match_multihead_attention(rng):
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    attn = KernelAttention.from_multihead(mha)
    x = _t(rng, 2, 5, 8)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    o1, _ = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    o2, _ = attn(x, x, x, is_causal=True, need_weights=False)
    torch.testing.assert_close(o2, o1, atol=1e-6, rtol=1e-5)
    o1, w1 = mha(x[0], x[0], x[0])
    o2, w2 = attn(x[0], x[0], x[0])
    torch.testing.assert_close(o2, o1, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)


def test_dropout_in_training_only(rng):
    torch.manual_seed(3)
    attn = KernelAttention(8, 2, dropout=0.5, batch_first=True)
    x = _t(rng, 2, 5, 8)
    attn.eval()
    a, _ = attn(x, x, x, need_weights=False)
    b, _ = attn(x, x, x, need_weights=False)
    torch.testing.assert_close(a, b)
    attn.train()
    c, _ = attn(x, x, x, need_weights=False)
    assert not torch.allclose(a, c)


def test_rbf_module_is_nadaraya_watson_on_projections(rng):
    torch.manual_seed(4)
    attn = KernelAttention(8, 2, kernel="rbf", scale=0.5, batch_first=True).double()
    x = _t(rng, 1, 6, 8).double()
    out, w = attn(x, x, x, average_attn_weights=False)
    wq, wk, wv = attn.in_proj_weight.chunk(3)
    bq, bk, bv = attn.in_proj_bias.chunk(3)
    q = (x @ wq.T + bq).reshape(1, 6, 2, 4).transpose(1, 2)
    k = (x @ wk.T + bk).reshape(1, 6, 2, 4).transpose(1, 2)
    v = (x @ wv.T + bv).reshape(1, 6, 2, 4).transpose(1, 2)
    d2 = ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    heads = naive_attention(-0.25 * d2, v)
    ref = attn.out_proj(heads.transpose(1, 2).reshape(1, 6, 8))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w, torch.softmax(-0.25 * d2, -1), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", "rbf", "cosine"])
def test_tied_projection_gives_a_symmetric_kernel(rng, kernel):
    attn = KernelAttention(8, 2, kernel=kernel, tie_qk=True, batch_first=True).double()
    x = _t(rng, 1, 6, 8).double()
    q = (x @ attn.qk_proj_weight.T).reshape(1, 6, 2, 4).transpose(1, 2)
    scores = attn.kernel.scores(q, q)
    torch.testing.assert_close(scores, scores.transpose(-1, -2), atol=1e-12, rtol=1e-12)
    untied = KernelAttention(8, 2, kernel=kernel, batch_first=True).double()
    wq, wk, _ = untied.in_proj_weight.chunk(3)
    s2 = untied.kernel.scores((x @ wq.T).reshape(1, 6, 2, 4).transpose(1, 2),
                              (x @ wk.T).reshape(1, 6, 2, 4).transpose(1, 2))
    assert not torch.allclose(s2, s2.transpose(-1, -2))


def test_absolute_positions_are_added_embeddings(rng):
    torch.manual_seed(5)
    attn = KernelAttention(8, 2, positional="absolute", max_len=10, batch_first=True)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    mha.load_state_dict({k: v for k, v in attn.state_dict().items() if k != "pos_embedding"})
    x = _t(rng, 2, 6, 8)
    xt = x + attn.pos_embedding[:6]
    torch.testing.assert_close(attn(x, x, x)[0], mha(xt, xt, xt)[0], atol=1e-6, rtol=1e-5)


def test_product_positional_kernel_formula(rng):
    """k_F(f_q W_q, f_k W_k) * k_P(t_q P_q, t_k P_k), values from the content only."""
    torch.manual_seed(6)
    attn = KernelAttention(8, 2, kernel="rbf", positional="product", max_len=10,
                           batch_first=True).double()
    x = _t(rng, 1, 6, 8).double()
    out, _ = attn(x, x, x, is_causal=True, need_weights=False)
    wq, wk, wv = attn.in_proj_weight.chunk(3)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(1, 6, 2, 4).transpose(1, 2)

    q, k, v = heads(x @ wq.T), heads(x @ wk.T), heads(x @ wv.T)
    t = attn.pos_embedding[:6]
    tq, tk = heads(t @ attn.pos_q_weight.T), heads(t @ attn.pos_k_weight.T)
    d2 = ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)
    scores = -0.5 * d2 / 2.0 + (tq @ tk.mT) / 2.0  # scale 1/sqrt(4) for both factors
    visible = torch.ones(6, 6, dtype=torch.bool).tril()
    ref = attn.out_proj(naive_attention(scores, v, visible).transpose(1, 2).reshape(1, 6, 8))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("positional", [None, "absolute", "product"])
@pytest.mark.parametrize("tie_qk", [False, True])
def test_gradients_reach_every_parameter(rng, kernel, positional, tie_qk):
    torch.manual_seed(7)
    attn = KernelAttention(8, 2, kernel=kernel, positional=positional, tie_qk=tie_qk,
                           batch_first=True, learn_scale=True, max_len=8)
    x = _t(rng, 2, 5, 8).requires_grad_()
    out, _ = attn(x, x, x, is_causal=True, need_weights=False)
    out.square().sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())
    for name, p in attn.named_parameters():
        assert p.grad is not None and bool(torch.isfinite(p.grad).all()), name


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradcheck_module_parameters(rng, kernel):
    torch.manual_seed(8)
    attn = KernelAttention(4, 2, kernel=kernel, learn_scale=True, batch_first=True).double()
    x = _t(rng, 1, 4, 4).double().abs()
    names = ["in_proj_weight", "kernel.raw_scale"]
    params = tuple(dict(attn.named_parameters())[n].detach().clone().requires_grad_()
                   for n in names)
    if kernel == "linear":  # keep the signed normaliser away from zero
        with torch.no_grad():
            params[0].abs_()

    def f(x, w, raw):
        out, _ = torch.func.functional_call(attn, {names[0]: w, names[1]: raw}, (x, x, x),
                                            {"need_weights": False, "mask": Window(2)})
        return out

    assert torch.autograd.gradcheck(f, (x.requires_grad_(), *params), fast_mode=True)


def test_engine_masks_in_the_module(rng):
    torch.manual_seed(9)
    attn = KernelAttention(8, 2, kernel="rbf", mask=Window(1), batch_first=True)
    x = _t(rng, 2, 6, 8)
    _, w = attn(x, x, x, average_attn_weights=False)
    band = (torch.arange(6)[:, None] - torch.arange(6)[None, :]).abs() <= 1
    assert bool((w[..., ~band] == 0).all()) and bool((w[..., band] > 0).all())
    _, w = attn(x, x, x, mask=KNearest(2), average_attn_weights=False)
    assert bool(((w > 0).sum(-1) <= 2).all())


def test_learnable_scale_starts_at_the_default(rng):
    x = _t(rng, 2, 2, 6, 4)
    fixed = kernel_attention(x, x, x, "rbf")
    attn = KernelAttention(8, 2, kernel="rbf", learn_scale=True, batch_first=True)
    # the rbf kernel's scale s is the bandwidth h = s ** -0.5 (attention's default, None),
    # times the learned factor, one per head, which starts at one
    assert attn.kernel.bandwidth is None
    factor = torch.nn.functional.softplus(attn.kernel.raw_scale)
    s = (math.sqrt(math.sqrt(4)) * factor[:, None, None]) ** -2
    torch.testing.assert_close(s, torch.full((2, 1, 1), 1 / math.sqrt(4)))
    torch.testing.assert_close(kernel_attention(x, x, x, attn.kernel), fixed)


def test_drop_in_for_a_transformer_encoder_layer(rng):
    torch.manual_seed(10)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    x = _t(rng, 2, 6, 16)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    ref = layer(x, src_key_padding_mask=pad)
    layer.self_attn = KernelAttention.from_multihead(layer.self_attn)
    torch.testing.assert_close(layer(x, src_key_padding_mask=pad), ref, atol=1e-5, rtol=1e-5)


def test_product_of_exponential_kernels_runs_fused(rng):
    from nadaraya.nn.functional import explain_attention

    attn = KernelAttention(8, 2, kernel="softmax", positional="product", max_len=8,
                           batch_first=True)
    q = _t(rng, 1, 2, 5, 8)
    assert explain_attention(q, q, q[..., :4], attn.kernel, is_causal=True)["fused"] == "chosen"
    x = _t(rng, 1, 5, 8)
    fused, _ = attn(x, x, x, is_causal=True, need_weights=False)
    attn.engine = "streamed"
    streamed, _ = attn(x, x, x, is_causal=True, need_weights=False)
    torch.testing.assert_close(fused, streamed, atol=1e-6, rtol=1e-5)


def test_default_layout_is_multihead_attentions(rng):
    """Like nn.MultiheadAttention, the default reads (length, batch, E): a swap keeps the axes."""
    torch.manual_seed(11)
    mha = nn.MultiheadAttention(8, 2)
    attn = KernelAttention(8, 2)
    assert attn.batch_first is False
    attn.load_state_dict(mha.state_dict())
    x = _t(rng, 5, 3, 8)  # (length, batch, E)
    torch.testing.assert_close(attn(x, x, x)[0], mha(x, x, x)[0], atol=1e-5, rtol=1e-5)
