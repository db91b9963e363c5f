"""The ``"nadaraya"`` attention function against transformers' ``sdpa`` function, and its errors.

The peer is ``transformers.integrations.sdpa_attention.sdpa_attention_forward``
(torch's ``scaled_dot_product_attention``): the same signature, masks, causal
flag and grouped-query heads, in float64 so the two agree to rounding.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from nadaraya import NadarayaError

pytest.importorskip("transformers")

from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from nadaraya.nn import huggingface

TOL = dict(rtol=1e-12, atol=1e-12)


class Attention(torch.nn.Module):
    """The attributes a transformers attention module shows the attention function."""

    def __init__(self, heads: int = 4, kv_heads: int = 2, *, is_causal: bool = True) -> None:
        super().__init__()
        self.config = SimpleNamespace(num_attention_heads=heads)
        self.num_key_value_groups = heads // kv_heads
        self.is_causal = is_causal
        self.scaling = 0.25


def _qkv(B: int = 2, H: int = 4, Hkv: int = 2, L: int = 6, S: int = 6, D: int = 16):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, L, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, Hkv, S, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, Hkv, S, D, generator=g, dtype=torch.float64)
    return q, k, v


def _padding_mask(B: int, L: int, S: int) -> torch.Tensor:
    keep = torch.ones(B, S, dtype=torch.bool)
    keep[1, :2] = False
    return sdpa_mask(batch_size=B, q_length=L, kv_length=S, attention_mask=keep,
                     allow_is_causal_skip=False)


@pytest.mark.parametrize("case", ["causal", "padding", "additive", "bidirectional",
                                  "decode", "static-cache", "position-bias", "one-head"])
def test_equals_sdpa_attention_forward(case: str) -> None:
    module = Attention(is_causal=case != "bidirectional")
    L, S = {"decode": (1, 6), "static-cache": (4, 6)}.get(case, (6, 6))
    q, k, v = _qkv(L=L, S=S)
    mask = None
    kw = {}
    if case == "padding":
        mask = _padding_mask(2, L, S)
    elif case == "additive":
        mask = torch.zeros(2, 1, L, S, dtype=torch.float64).masked_fill(
            ~_padding_mask(2, L, S), torch.finfo(torch.float64).min)
    elif case == "position-bias":
        kw["position_bias"] = torch.randn(1, 4, L, S, dtype=torch.float64)
    elif case == "one-head":
        module = Attention(1, 1)
        q, k, v = q[:, :1], k[:, :1], v[:, :1]
    ref, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.25, **kw)
    out, weights = huggingface.attention_forward(module, q, k, v, mask, scaling=0.25, **kw)
    assert weights is None
    assert out.shape == ref.shape == (2, L, q.shape[1], 16) and out.is_contiguous()
    torch.testing.assert_close(out, ref, **TOL)


def test_weights_are_the_rows_of_softmax() -> None:
    module = Attention()
    q, k, v = _qkv()
    mask = _padding_mask(2, 6, 6)
    out, weights = huggingface.attention_forward(module, q, k, v, mask, scaling=0.25,
                                                 output_attentions=True)
    kk = k.repeat_interleave(2, 1)
    scores = (0.25 * q @ kk.mT).masked_fill(~mask, float("-inf"))
    # the first two queries of the padded sequence see no key: zero weights, as sdpa
    expected = torch.softmax(scores, -1).nan_to_num(0.0)
    assert float(expected[1, :, :2].abs().sum()) == 0.0
    torch.testing.assert_close(weights, expected, **TOL)
    torch.testing.assert_close(out, (weights @ v.repeat_interleave(2, 1)).transpose(1, 2), **TOL)


def test_dropout_is_applied_when_asked() -> None:
    q, k, v = _qkv()
    module = Attention()
    plain, _ = huggingface.attention_forward(module, q, k, v, None, scaling=0.25)
    dropped, _ = huggingface.attention_forward(module, q, k, v, None, scaling=0.25,
                                               dropout=0.5)
    assert not torch.allclose(plain, dropped)


def test_half_precision_follows_float64() -> None:
    q, k, v = _qkv()
    module = Attention()
    ref, _ = huggingface.attention_forward(module, q, k, v, None, scaling=0.25)
    out, _ = huggingface.attention_forward(module, q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                           None, scaling=0.25)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=0.05)


@pytest.mark.parametrize("flag", ["softcap", "s_aux", "sinks"])
def test_terms_it_lacks_are_refused_naming_eager(flag: str) -> None:
    q, k, v = _qkv()
    with pytest.raises(NadarayaError, match=f"{flag}.*attn_implementation='eager'"):
        huggingface.attention_forward(Attention(), q, k, v, None, **{flag: torch.ones(4)})


def test_hostile_inputs() -> None:
    module = Attention()
    q, k, v = _qkv()
    # key/value heads that do not divide the query heads
    with pytest.raises(NadarayaError, match="multiple"):
        huggingface.attention_forward(module, q, k[:, :1].expand(-1, 3, -1, -1),
                                      v[:, :1].expand(-1, 3, -1, -1), None)
    # a mask of the wrong shape, a mask with NaN
    with pytest.raises(NadarayaError, match="attn_mask"):
        huggingface.attention_forward(module, q, k, v, torch.ones(2, 1, 6, 5, dtype=torch.bool))
    nan = torch.zeros(2, 1, 6, 6, dtype=torch.float64)
    nan[0, 0, 1, 2] = float("nan")
    with pytest.raises(NadarayaError, match="NaN"):
        huggingface.attention_forward(module, q, k, v, nan)
    # NaN in a query makes its row NaN (not a silent zero) and leaves the other rows
    bad = q.clone()
    bad[0, 0, 3, 0] = float("nan")
    out, _ = huggingface.attention_forward(module, bad, k, v, None, scaling=0.25)
    ref, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.25)
    assert bool(out[0, 3, 0].isnan().all())
    row = torch.zeros(out.shape, dtype=torch.bool)
    row[0, 3, 0] = True
    torch.testing.assert_close(out[~row], ref[~row], **TOL)
    # an empty batch and a single token
    e, _ = huggingface.attention_forward(module, q[:0], k[:0], v[:0], None)
    assert e.shape == (0, 6, 4, 16)
    one, _ = huggingface.attention_forward(module, q[..., :1, :], k[..., :1, :],
                                           v[..., :1, :], None)
    torch.testing.assert_close(one, v[..., :1, :].repeat_interleave(2, 1).transpose(1, 2),
                               **TOL)


def test_register_is_idempotent_and_keeps_transformers_names() -> None:
    assert huggingface.register() == "nadaraya" == huggingface.register()
    assert ALL_ATTENTION_FUNCTIONS["nadaraya"] is huggingface.attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS["nadaraya"] is sdpa_mask
    for taken in ("sdpa", "eager", "flash_attention_2"):
        with pytest.raises(NadarayaError, match="choose another name"):
            huggingface.register(taken)
    for bad in ("", "two words", 3):
        with pytest.raises(NadarayaError, match="identifier"):
            huggingface.register(bad)


def test_missing_transformers_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(huggingface, "_registered", set())
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(NadarayaError, match=r"pip install 'nadaraya\[minilm\]'"):
        huggingface.register()


def test_attach_kernels_refuses_a_model_without_attention() -> None:
    with pytest.raises(NadarayaError, match="no attention module"):
        huggingface.attach_kernels(torch.nn.Linear(3, 3))
    with pytest.raises(NadarayaError, match="PreTrainedModel"):
        huggingface.set_kernel(torch.nn.Linear(3, 3))


@pytest.mark.slow
def test_import_registers_nothing_and_loads_no_transformers() -> None:
    probe = ("import json, sys, nadaraya, nadaraya.nn, nadaraya.nn.huggingface\n"
             "loaded = 'transformers' in sys.modules\n"
             "from transformers import AttentionInterface\n"
             "before = 'nadaraya' in AttentionInterface._global_mapping\n"
             "nadaraya.nn.huggingface.register()\n"
             "after = 'nadaraya' in AttentionInterface._global_mapping\n"
             "print(json.dumps([loaded, before, after]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=300)
    assert json.loads(out.stdout.splitlines()[-1]) == [False, False, True]
