"""KernelAttention as a drop-in for nn.MultiheadAttention, with MultiheadAttention as the oracle.

Same constructor and forward arguments, ``merge_masks``, the same outputs and
weights for the softmax kernel with MultiheadAttention's weights, and the same
outputs when swapped into ``nn.TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder`` and ``nn.Transformer``, in training and evaluation.
"""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest
import torch
from torch import nn

from nadaraya._errors import NadarayaError
from nadaraya.nn import KernelAttention

E, H = 16, 4

pytestmark = pytest.mark.filterwarnings(
    "ignore:enable_nested_tensor is True", "ignore:The PyTorch API of nested tensors",
    "ignore:Support for mismatched key_padding_mask")


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)


def test_signatures_are_multihead_attentions():
    ours = list(inspect.signature(KernelAttention.__init__).parameters.values())
    theirs = list(inspect.signature(nn.MultiheadAttention.__init__).parameters.values())
    assert [(p.name, p.default) for p in ours[:len(theirs)]] == [
        (p.name, p.default) for p in theirs]
    assert all(p.kind is p.KEYWORD_ONLY for p in ours[len(theirs):])
    ours = list(inspect.signature(KernelAttention.forward).parameters.values())
    theirs = list(inspect.signature(nn.MultiheadAttention.forward).parameters.values())
    assert [(p.name, p.default) for p in ours[:len(theirs)]] == [
        (p.name, p.default) for p in theirs]
    assert all(p.kind is p.KEYWORD_ONLY for p in ours[len(theirs):])


def test_attributes_and_state_dict_are_multihead_attentions():
    for kw in ({}, {"kdim": 6, "vdim": 5}, {"add_bias_kv": True, "bias": False}):
        mha = nn.MultiheadAttention(E, H, **kw)
        attn = KernelAttention(E, H, **kw)
        for name in ("embed_dim", "num_heads", "head_dim", "kdim", "vdim", "batch_first",
                     "_qkv_same_embed_dim", "dropout", "add_zero_attn"):
            assert getattr(attn, name) == getattr(mha, name), name
        for name in ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight",
                     "v_proj_weight", "bias_k", "bias_v"):
            a, b = getattr(attn, name), getattr(mha, name)
            assert (a is None) == (b is None) and (a is None or a.shape == b.shape), name
        assert set(attn.state_dict()) == set(mha.state_dict())


def test_kernel_is_keyword_only():
    with pytest.raises(NadarayaError, match=r"kernel='rbf'"):
        KernelAttention(E, H, "rbf")


CASES = {
    "plain": ({}, {}),
    "kdim vdim": ({"kdim": 6, "vdim": 5}, {}),
    "no bias": ({"bias": False}, {}),
    "bias kv": ({"add_bias_kv": True}, {}),
    "zero attn": ({"add_zero_attn": True}, {}),
    "bias kv, zero attn, kdim": ({"add_bias_kv": True, "add_zero_attn": True, "kdim": 6}, {}),
    "dropout in eval": ({"dropout": 0.4}, {}),
    "bool padding": ({}, {"key_padding_mask": "bool"}),
    "float padding": ({}, {"key_padding_mask": "float"}),
    "bool 2-D": ({}, {"attn_mask": "bool2"}),
    "float 2-D": ({}, {"attn_mask": "float2"}),
    "bool 3-D": ({}, {"attn_mask": "bool3"}),
    "float 3-D": ({}, {"attn_mask": "float3"}),
    "causal": ({}, {"attn_mask": "causal", "is_causal": True}),
    "bias kv with masks": ({"add_bias_kv": True, "add_zero_attn": True},
                           {"key_padding_mask": "bool", "attn_mask": "float3"}),
}


def _masks(rng: np.random.Generator, spec: dict, B: int, L: int, S: int) -> dict:
    out: dict = {}
    pad = torch.as_tensor(rng.random((B, S)) < 0.3)
    pad[:, 0] = False
    hide2 = torch.as_tensor(rng.random((L, S)) < 0.3)
    hide2[:, 0] = False
    hide3 = torch.as_tensor(rng.random((B * H, L, S)) < 0.3)
    hide3[..., 0] = False
    minus = torch.tensor(-torch.inf)
    for name, kind in spec.items():
        if name == "is_causal":
            out[name] = kind
        elif kind == "bool":
            out[name] = pad
        elif kind == "float":
            out[name] = torch.where(pad, minus, _t(rng, B, S))
        elif kind == "bool2":
            out[name] = hide2
        elif kind == "float2":
            out[name] = torch.where(hide2, minus, _t(rng, L, S))
        elif kind == "bool3":
            out[name] = hide3
        elif kind == "float3":
            out[name] = torch.where(hide3, minus, _t(rng, B * H, L, S))
        elif kind == "causal":
            out[name] = nn.Transformer.generate_square_subsequent_mask(L)
    return out


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_equals_multihead_attention(rng, case, batch_first, need_weights):
    build, spec = CASES[case]
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first, **build).eval()
    attn = KernelAttention.from_multihead(mha).eval()
    B, L = 3, 5
    S = L if "causal" in spec.values() else 7
    kd, vd = build.get("kdim", E), build.get("vdim", E)

    def x(n: int, e: int) -> torch.Tensor:
        return _t(rng, B, n, e) if batch_first else _t(rng, n, B, e)

    q, k, v = x(L, E), x(S, kd), x(S, vd)
    kw = _masks(rng, spec, B, L, S)
    for average in (True, False):
        o1, w1 = mha(q, k, v, need_weights=need_weights, average_attn_weights=average, **kw)
        o2, w2 = attn(q, k, v, need_weights=need_weights, average_attn_weights=average, **kw)
        torch.testing.assert_close(o2, o1, atol=2e-5, rtol=1e-4)
        if need_weights:
            torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)
        else:
            assert w1 is None and w2 is None


@pytest.mark.parametrize("build", [{}, {"add_bias_kv": True, "add_zero_attn": True}])
def test_unbatched_equals_multihead_attention(rng, build):
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(E, H, **build)
    attn = KernelAttention.from_multihead(mha)
    q, kv = _t(rng, 5, E), _t(rng, 6, E)
    pad = torch.tensor([False, True, False, False, True, False])
    hide = torch.as_tensor(rng.random((H, 5, 6)) < 0.3)
    hide[..., 0] = False
    for kw in ({}, {"key_padding_mask": pad}, {"attn_mask": hide}):
        o1, w1 = mha(q, kv, kv, average_attn_weights=False, **kw)
        o2, w2 = attn(q, kv, kv, average_attn_weights=False, **kw)
        torch.testing.assert_close(o2, o1, atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(w2, w1, atol=1e-6, rtol=1e-5)


def test_merge_masks_equals_multihead_attentions(rng):
    mha, attn = nn.MultiheadAttention(E, H, batch_first=True), KernelAttention(
        E, H, batch_first=True)
    x = _t(rng, 2, 5, E)
    pad = _t(rng, 2, 5)
    for am in (None, _t(rng, 5, 5), _t(rng, 2 * H, 5, 5)):
        for kp in (None, pad):
            m1, t1 = mha.merge_masks(am, kp, x)
            m2, t2 = attn.merge_masks(am, kp, x)
            assert t1 == t2
            assert (m1 is None and m2 is None) or torch.equal(m1, m2)


# -- swapped into torch's transformer modules -----------------------------------------------
def _swap(model: nn.Module, kernel: str = "softmax") -> nn.Module:
    """A copy of ``model`` whose every MultiheadAttention is a KernelAttention."""
    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name in ("self_attn", "multihead_attn"):
            mha = getattr(module, name, None)
            if isinstance(mha, nn.MultiheadAttention):
                setattr(module, name, KernelAttention.from_multihead(mha, kernel=kernel))
    return model


def _models(batch_first: bool) -> dict[str, nn.Module]:
    kw = {"dim_feedforward": 32, "dropout": 0.0, "batch_first": batch_first}
    layer = nn.TransformerEncoderLayer(E, H, **kw)
    return {
        "encoder layer": layer,
        "encoder layer, norm first": nn.TransformerEncoderLayer(E, H, norm_first=True, **kw),
        "encoder": nn.TransformerEncoder(copy.deepcopy(layer), 2),
        "decoder layer": nn.TransformerDecoderLayer(E, H, **kw),
        "transformer": nn.Transformer(E, H, 2, 2, **kw),
    }


def _run(model: nn.Module, name: str, src: torch.Tensor, tgt: torch.Tensor, pad: torch.Tensor,
         ) -> torch.Tensor:
    L = src.shape[1] if model_batch_first(model) else src.shape[0]
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    if name.startswith("encoder"):
        return model(src, src_key_padding_mask=pad)
    if name == "decoder layer":
        return model(tgt, src, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=pad)
    return model(src, tgt, tgt_mask=causal, src_key_padding_mask=pad,
                 memory_key_padding_mask=pad)


def model_batch_first(model: nn.Module) -> bool:
    return next(m for m in model.modules() if hasattr(m, "batch_first")
                and not isinstance(m, nn.Transformer | nn.TransformerEncoder)).batch_first


@pytest.mark.parametrize("name", list(_models(True)))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval", "eval, no grad"])
def test_swapped_into_torch_transformers(rng, name, batch_first, mode):
    torch.manual_seed(3)
    model = _models(batch_first)[name]
    swapped = _swap(model)
    assert not any(isinstance(m, nn.MultiheadAttention) for m in swapped.modules())
    B, L = 3, 6
    src, tgt = (_t(rng, B, L, E), _t(rng, B, L, E)) if batch_first else (
        _t(rng, L, B, E), _t(rng, L, B, E))
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 4:] = True  # left-aligned padding: TransformerEncoder's nested fast path
    pad[2, 5:] = True
    for m in (model, swapped):
        m.train(mode == "train")
    with torch.set_grad_enabled(mode != "eval, no grad"):
        want = _run(model, name, src, tgt, pad)
        got = _run(swapped, name, src, tgt, pad)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    if mode != "eval, no grad":
        got.square().sum().backward()
        for p_name, p in swapped.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), p_name
        grads = [p.grad for p in swapped.parameters()]
        want.square().sum().backward()
        for a, b in zip(grads, (p.grad for p in model.parameters()), strict=True):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)


def test_rbf_kernel_trains_in_an_encoder_layer(rng):
    torch.manual_seed(5)
    layer = _swap(nn.TransformerEncoderLayer(E, H, dim_feedforward=32, dropout=0.0,
                                             batch_first=True), "rbf")
    assert layer.self_attn.kernel.name == "gaussian"
    x, y = _t(rng, 4, 6, E), _t(rng, 4, 6, E)
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = (layer(x) - y).square().mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.8 * losses[0]
    layer.eval()
    with torch.no_grad():  # not torch's fused fast path, which would compute softmax
        out = layer(x)
        layer.self_attn.kernel = KernelAttention(E, H).kernel
        assert not torch.allclose(layer(x), out)
