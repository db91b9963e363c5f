"""kernel_attention against scaled_dot_product_attention, Nadaraya-Watson and naive formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.neighbors import NearestNeighbors

import nadaraya
from nadaraya.masks import Causal, KNearest, Predicate, Window
from nadaraya.nn.functional import attention_weights, explain_attention, kernel_attention

from ._helpers import naive_attention, sqdist

ENGINES = ["auto", "fused", "streamed", "dense"]


def _qkv(rng: np.random.Generator, B=2, H=3, L=6, S=7, E=8, P=5, dtype=torch.float32):
    def t(*shape):
        return torch.as_tensor(rng.standard_normal(shape), dtype=dtype)

    return t(B, H, L, E), t(B, H, S, E), t(B, H, S, P)


def _masks(rng: np.random.Generator, L=6, S=7):
    bool_mask = torch.as_tensor(rng.random((2, 1, L, S)) > 0.3)
    bool_mask[..., 0] = True
    float_mask = torch.as_tensor(rng.standard_normal((L, S)), dtype=torch.float32)
    return {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": bool_mask},
            "float": {"attn_mask": float_mask}}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("which", ["none", "causal", "bool", "float"])
def test_softmax_equals_sdpa(rng, engine, which):
    q, k, v = _qkv(rng)
    kw = _masks(rng)[which]
    ref = F.scaled_dot_product_attention(q, k, v, **kw)
    out = kernel_attention(q, k, v, engine=engine, **kw)
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("which", ["none", "causal", "bool", "float"])
def test_softmax_equals_sdpa_in_many_blocks(rng, which):
    q, k, v = _qkv(rng, L=11, S=13)
    kw = _masks(rng, 11, 13)[which]
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **{
        key: (val.double() if val.is_floating_point() else val) if torch.is_tensor(val) else val
        for key, val in kw.items()})
    with nadaraya.config_context(key_block=3, query_block=4):
        out = kernel_attention(q.double(), k.double(), v.double(), engine="streamed", **kw)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)


def test_scale_and_mask_argument_match_sdpa(rng):
    q, k, v = _qkv(rng)
    m = torch.as_tensor(rng.random((6, 7)) > 0.4)
    m[:, 0] = True
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.7)
    torch.testing.assert_close(kernel_attention(q, k, v, mask=m, scale=0.7), ref,
                               atol=2e-6, rtol=1e-5)


def test_rbf_is_gaussian_nadaraya_watson(rng):
    """Seed 000: attention with the RBF kernel is NW regression on the projected points."""
    q, k, v = (t.double() for t in _qkv(rng))
    scale = 0.3
    out = kernel_attention(q, k, v, "rbf", scale=scale)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            ref = nadaraya.smooth(q[b, h], k[b, h], v[b, h], "gaussian", bandwidth=scale**-0.5,
                                  engine="dense")
            torch.testing.assert_close(out[b, h], ref, atol=1e-12, rtol=1e-12)


def test_rbf_is_softmax_with_a_key_bias(rng):
    """-s|q - k|^2 / 2 = s q.k - s|k|^2 / 2 - s|q|^2 / 2, and the last term cancels."""
    q, k, v = (t.double() for t in _qkv(rng))
    scale = 0.4
    key_bias = (-0.5 * scale * k.square().sum(-1))[..., None, :]
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias, scale=scale)
    for engine in ("fused", "streamed", "dense"):
        out = kernel_attention(q, k, v, "rbf", scale=scale, engine=engine)
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)


def test_laplacian_is_laplacian_nadaraya_watson(rng):
    q, k, v = (t.double() for t in _qkv(rng))
    out = kernel_attention(q, k, v, "laplacian", scale=0.5)
    ref = nadaraya.smooth(q[1, 2], k[1, 2], v[1, 2], "laplacian", bandwidth=0.5**-0.5,
                          engine="dense")
    torch.testing.assert_close(out[1, 2], ref, atol=1e-12, rtol=1e-12)


def _formula(kernel, q, k, s):
    dot = q @ k.transpose(-1, -2)
    if kernel == "softmax":
        return s * dot, True
    if kernel == "rbf":
        return -0.5 * s * sqdist(q, k), True
    if kernel == "laplacian":
        return -math.sqrt(s) * sqdist(q, k).sqrt(), True
    if kernel == "cosine":
        cos = dot / (q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :])
        return s * cos, True
    if kernel == "polynomial":
        return (s * dot) ** 2, False
    return s * dot, False


@pytest.mark.parametrize("kernel", ["softmax", "rbf", "laplacian", "cosine", "polynomial",
                                    "linear"])
@pytest.mark.parametrize("engine", ["auto", "streamed", "dense"])
def test_every_kernel_matches_its_formula(rng, kernel, engine):
    q, k, v = (t.double() for t in _qkv(rng))
    s = 0.6
    scores, log_domain = _formula(kernel, q, k, s)
    visible = (torch.arange(6)[:, None] - torch.arange(7)[None, :]).abs() <= 2
    ref = naive_attention(scores, v, visible, log_domain)
    with nadaraya.config_context(key_block=3, query_block=2):
        out = kernel_attention(q, k, v, kernel, Window(2), scale=s, engine=engine)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)


def test_knearest_mask_uses_each_heads_points(rng):
    q, k, v = (t.double() for t in _qkv(rng, B=1, H=2))
    out = kernel_attention(q, k, v, "rbf", KNearest(3))
    for h in range(2):
        nn = NearestNeighbors(n_neighbors=3).fit(k[0, h].numpy())
        idx = nn.kneighbors(q[0, h].numpy(), return_distance=False)
        visible = torch.zeros(6, 7, dtype=torch.bool)
        visible[torch.arange(6)[:, None], torch.as_tensor(idx)] = True
        scores = -0.5 * sqdist(q[0, h], k[0, h]) / math.sqrt(8)
        torch.testing.assert_close(out[0, h], naive_attention(scores, v[0, h], visible),
                                   atol=1e-12, rtol=1e-12)


def test_predicate_and_combined_masks(rng):
    q, k, v = (t.double() for t in _qkv(rng, L=7))
    even = Predicate(lambda i, j: (j % 2) == 0)
    mask = (Causal() & Window(3)) | even
    i, j = torch.arange(7)[:, None], torch.arange(7)[None, :]
    visible = ((j <= i) & ((i - j).abs() <= 3)) | (j % 2 == 0)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
    for engine in ("auto", "streamed", "dense"):
        torch.testing.assert_close(kernel_attention(q, k, v, mask=mask, engine=engine), ref,
                                   atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(kernel_attention(q, k, v, mask="causal"),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_weights_are_nadaraya_watson_rows(rng):
    q, k, _ = (t.double() for t in _qkv(rng))
    w = attention_weights(q, k, "rbf", scale=0.5)
    ref = nadaraya.weights(q[0, 1], k[0, 1], "gaussian", bandwidth=0.5**-0.5)
    torch.testing.assert_close(w[0, 1], ref, atol=1e-12, rtol=1e-12)
    out, w2 = kernel_attention(q, k, k, is_causal=True, need_weights=True)
    causal = torch.ones(6, 7, dtype=torch.bool).tril()
    scores = (q @ k.mT / math.sqrt(8)).masked_fill(~causal, -math.inf)
    torch.testing.assert_close(w2, torch.softmax(scores, -1))
    torch.testing.assert_close(out, w2 @ k)


@pytest.mark.parametrize("engine", ["fused", "streamed", "dense"])
def test_empty_rows_follow_the_policy(rng, engine):
    q, k, v = _qkv(rng)
    m = torch.ones(6, 7, dtype=torch.bool)
    m[2] = False
    out = kernel_attention(q, k, v, mask=m, engine=engine)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    assert bool((out[..., 2, :] == 0).all())
    assert bool(torch.isnan(kernel_attention(q, k, v, mask=m, engine=engine,
                                             empty="nan")[..., 2, :]).all())
    with pytest.raises(nadaraya.NadarayaError, match="no key"):
        kernel_attention(q, k, v, mask=m, engine=engine, empty="raise")


@pytest.mark.parametrize("engine", ["fused", "streamed"])
def test_gradients_equal_sdpa_gradients(rng, engine):
    q, k, v = (t.double().requires_grad_() for t in _qkv(rng))
    bias = torch.as_tensor(rng.standard_normal((1, 3, 6, 7))).requires_grad_()
    g = torch.as_tensor(rng.standard_normal((2, 3, 6, 5)))
    ref = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                              (q, k, v, bias), g)
    with nadaraya.config_context(key_block=3, query_block=4):
        got = torch.autograd.grad(kernel_attention(q, k, v, attn_mask=bias, engine=engine),
                                  (q, k, v, bias), g)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("kernel", ["softmax", "rbf", "laplacian", "cosine", "polynomial",
                                    "linear"])
@pytest.mark.parametrize("engine", ["streamed", "dense"])
def test_gradcheck_every_kernel(rng, kernel, engine):
    q, k, v = (t.double().requires_grad_() for t in _qkv(rng, B=1, H=2, L=4, S=5, E=3, P=2))
    if kernel == "linear":  # keep the signed normaliser away from zero
        with torch.no_grad():
            q.abs_()
            k.abs_()

    def f(q, k, v):
        return kernel_attention(q, k, v, kernel, Window(2), engine=engine)

    with nadaraya.config_context(key_block=2, query_block=3):
        assert torch.autograd.gradcheck(f, (q, k, v))


def test_gradcheck_with_dropout_replays_the_same_mask(rng):
    q, k, v = (t.double().requires_grad_() for t in _qkv(rng, B=1, H=2, L=4, S=5, E=3, P=2))

    def f(q, k, v):
        torch.manual_seed(3)
        return kernel_attention(q, k, v, "rbf", dropout_p=0.3, engine="streamed")

    with nadaraya.config_context(key_block=2, query_block=3):
        assert torch.autograd.gradcheck(f, (q, k, v))
        dropped = f(q, k, v)
    assert not torch.allclose(dropped, kernel_attention(q, k, v, "rbf", engine="streamed"))


def test_dropout_keeps_the_mean(rng):
    q, k, v = _qkv(rng, B=1, H=1, L=3, S=4)
    full = kernel_attention(q, k, v, "rbf", engine="streamed")
    torch.manual_seed(0)
    runs = torch.stack([kernel_attention(q, k, v, "rbf", dropout_p=0.5, engine="streamed")
                        for _ in range(2000)])
    torch.testing.assert_close(runs.mean(0), full, atol=0.1, rtol=0.1)


def test_fused_path_is_used_where_exact(rng):
    q, k, v = _qkv(rng)
    assert explain_attention(q, k, v, "softmax")["fused"] == "chosen"
    assert explain_attention(q, k, v, "rbf")["fused"] == "chosen"
    assert explain_attention(q, k, v, "cosine", is_causal=True)["fused"] == "chosen"
    assert explain_attention(q, k, v, "laplacian")["distance"] == "chosen"
    assert explain_attention(q, k, v, "polynomial")["streamed"] == "chosen"
    # keys far from queries at their centre (the middle of the keys' range, 0 here): the
    # key bias |k|^2 / 2 would swamp q.k in float32
    k2, v2 = torch.cat([k, -k], -2), torch.cat([v, v], -2)
    assert "precision" in explain_attention(q * 1e-3, k2, v2, "rbf")["fused"]


def test_broadcast_leading_dimensions(rng):
    q, k, v = _qkv(rng)
    out = kernel_attention(q, k[:, :1], v[:, :1], "rbf")
    ref = kernel_attention(q, k[:, :1].expand_as(k), v[:, :1].expand_as(v), "rbf")
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(kernel_attention(q[0, 0], k[0, 0], v[0, 0]),
                               F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0]))
