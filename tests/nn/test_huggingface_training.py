"""Fine-tuning a transformers model with an attached, learnable rbf kernel.

Oracles: central differences of the loss (the bandwidth's gradient), the
config's fixed kernel (an attached kernel whose factor is one gives the same
model), and the loss itself going down.
"""

from __future__ import annotations

import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.kernels import Gaussian

pytest.importorskip("transformers")

from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from nadaraya.nn import huggingface

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=97, max_position_embeddings=64)


def _model(dtype: torch.dtype = torch.float32) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL)).to(dtype)


def _loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in the model's dtype (transformers' loss upcasts to float32)."""
    logits = model(input_ids=ids).logits[:, :-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             ids[:, 1:].reshape(-1))


def _ids() -> torch.Tensor:
    return torch.randint(1, 97, (4, 16), generator=torch.Generator().manual_seed(2))


def test_attached_kernels_are_parameters_of_the_model() -> None:
    model = _model(torch.float64)
    modules = huggingface.attach_kernels(model, "rbf")
    assert len(modules) == 2 and model.config._attn_implementation == "nadaraya"
    names = [n for n, _ in model.named_parameters() if "nadaraya_kernel" in n]
    assert names == [f"model.layers.{i}.self_attn.nadaraya_kernel.raw_scale" for i in (0, 1)]
    assert modules[0].nadaraya_kernel.raw_scale.shape == (4,)  # one factor per head
    assert "model.layers.1.self_attn.nadaraya_kernel.raw_scale" in model.state_dict()
    assert modules[1].nadaraya_kernel.raw_scale.dtype == torch.float64
    # a learned factor of one is the config's fixed kernel of the same name
    ids = _ids()
    with torch.no_grad():
        attached = model(input_ids=ids).logits
        huggingface.detach_kernels(model)
        assert not any("nadaraya_kernel" in n for n, _ in model.named_parameters())
        huggingface.set_kernel(model, "rbf")
        fixed = model(input_ids=ids).logits
    torch.testing.assert_close(attached, fixed, rtol=0, atol=1e-12)


def test_a_kernel_object_is_copied_into_every_layer() -> None:
    model = _model()
    kernel = Gaussian(3.0, learnable=True)
    modules = huggingface.attach_kernels(model, kernel)
    a, b = (m.nadaraya_kernel for m in modules)
    assert a is not kernel and a is not b and a.raw_scale is not b.raw_scale
    with pytest.raises(NadarayaError, match="attach_kernels"):
        huggingface.attach_kernels(model, {"name": "rbf"})
    with pytest.raises(NadarayaError, match="learnable"):
        huggingface.attach_kernels(model, "rbf", learnable="yes")


@pytest.mark.slow
def test_bandwidth_gradient_equals_central_differences() -> None:
    # GPT-2: its LayerNorm computes in float64 (Llama's RMSNorm rounds to float32, which
    # differences of 1e-5 cannot see through)
    torch.manual_seed(0)
    config = GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=97, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).to(torch.float64).eval()
    modules = huggingface.attach_kernels(model, "rbf")
    ids = _ids()[:2, :10]
    raw = modules[0].nadaraya_kernel.raw_scale
    _loss(model, ids).backward()
    assert raw.grad is not None
    step = 1e-5
    with torch.no_grad():
        for h in range(4):
            raw[h] += step
            up = _loss(model, ids)
            raw[h] -= 2 * step
            down = _loss(model, ids)
            raw[h] += step
            torch.testing.assert_close(raw.grad[h], (up - down) / (2 * step),
                                       rtol=1e-5, atol=1e-9)


@pytest.mark.slow
def test_rbf_fine_tuning_lowers_the_loss_and_trains_the_bandwidth() -> None:
    model = _model().train()
    modules = huggingface.attach_kernels(model, "rbf")
    raws = [m.nadaraya_kernel.raw_scale for m in modules]
    start = [r.detach().clone() for r in raws]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = _ids()
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        for r in raws:
            assert r.grad is not None and bool(torch.isfinite(r.grad).all())
            assert float(r.grad.abs().max()) > 0
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.9 * losses[0], losses
    assert all(not torch.equal(r, s) for r, s in zip(raws, start, strict=True))
    # the bandwidths alone also fit: the kernel is in the computation, not beside it
    model.requires_grad_(False)
    for r in raws:
        r.requires_grad_(True)
    optimizer = torch.optim.AdamW(raws, lr=0.1)
    with torch.no_grad():
        before = float(model(input_ids=ids, labels=ids).loss)
    for _ in range(5):
        optimizer.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
    with torch.no_grad():
        assert float(model(input_ids=ids, labels=ids).loss) < before
