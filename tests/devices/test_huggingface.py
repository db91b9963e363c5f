"""The ``"nadaraya"`` attention of transformers models on the device equals ``eager``.

Tiny causal language models built from configs with random weights (nothing
is downloaded), moved to the device. Oracle: the same model with
transformers' ``eager`` attention on the same device, which writes softmax
attention out with matrix products; the ``"softmax"`` kernel computes the same
sums in another order. The bound is ``tests/nn/test_huggingface.py``'s: a sum
of ``n`` terms rounds by about ``sqrt(n) * eps`` of its terms (Higham and
Mary), each layer adds its own, so two float32 evaluations drift by up to
``layers * sqrt(n) * eps * max |x|`` with ``n`` the widest sum of a layer.
Gradients of the loss are compared with three times that bound relative to the
largest gradient (a backward pass runs each sum twice more, through the
transposed products).
"""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from nadaraya.nn import huggingface

VOCAB, LENGTH = 97, 12
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=64)


def _build(family: str, device: torch.device):
    torch.manual_seed(0)
    if family == "llama":  # grouped-query heads (4 query heads, 2 key/value heads)
        model = LlamaForCausalLM(LlamaConfig(**SMALL))
    else:
        model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB,
                                           n_positions=64, bos_token_id=0, eos_token_id=0))
    return model.to(device).eval()


def _batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Three sequences, two of them left-padded (4 and 7 padding tokens)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, VOCAB, (3, LENGTH), generator=g)
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, :4] = 0
    mask[2, :7] = 0
    return ids.to(device), mask.to(device)


def _bound(model, x: torch.Tensor) -> float:
    c = model.config
    n = max(LENGTH, getattr(c, "intermediate_size", None) or 4 * c.hidden_size, c.hidden_size)
    eps = torch.finfo(x.dtype).eps
    return c.num_hidden_layers * math.sqrt(n) * eps * float(x.detach().abs().max())


def _loss_and_grads(model, ids, mask):
    """The outputs and the gradients of a loss on the real (not padding) positions only.

    A padding query sees no key: ``eager`` spreads its weights evenly, the kernel
    attention returns zero (as ``scaled_dot_product_attention``), so only what the
    real positions compute is compared.
    """
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    loss = torch.nn.functional.cross_entropy(out.logits[mask.bool()], ids[mask.bool()])
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return out, loss.detach(), grads


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_softmax_kernel_equals_eager(device, family):
    model = _build(family, device)
    ids, mask = _batch(device)
    model.set_attn_implementation("eager")
    ref, _, ref_grads = _loss_and_grads(model, ids, mask)
    huggingface.set_kernel(model, "softmax")
    assert model.config._attn_implementation == huggingface.NAME
    out, loss, grads = _loss_and_grads(model, ids, mask)
    real = mask.bool()
    assert out.logits.device.type == device.type
    assert bool(torch.isfinite(out.logits).all()) and bool(torch.isfinite(loss))
    torch.testing.assert_close(out.logits[real], ref.logits[real], rtol=0,
                               atol=_bound(model, ref.logits))
    for x, y in zip(ref.hidden_states, out.hidden_states, strict=True):
        torch.testing.assert_close(y[real], x[real], rtol=0, atol=_bound(model, x))
    for a, b in zip(grads, ref_grads, strict=True):
        assert a.device.type == device.type and bool(torch.isfinite(a).all())
        torch.testing.assert_close(a, b, rtol=0, atol=3 * _bound(model, b))
    # the bound is tight enough to see another kernel
    with huggingface.use_kernel("rbf"), torch.no_grad():
        other = model(input_ids=ids, attention_mask=mask).logits
    assert (other - ref.logits)[real].abs().max() > 100 * _bound(model, ref.logits)
