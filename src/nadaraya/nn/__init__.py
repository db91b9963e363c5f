"""Attention as a kernel smoother, for PyTorch users.

``nadaraya.nn.functional.kernel_attention`` is ``scaled_dot_product_attention``
with the kernel as a parameter; :class:`KernelAttention` is a drop-in for
``torch.nn.MultiheadAttention``. Their kernels are those of
:mod:`nadaraya.kernels` (one class per formula for every face); the names
softmax, rbf, laplacian, polynomial, linear and cosine with SDPA's ``scale``
are translated by :func:`nadaraya.kernels.get_attention_kernel`.
:mod:`nadaraya.nn.huggingface` runs ``transformers`` models with them
(``attn_implementation="nadaraya"``) and :mod:`nadaraya.nn.minilm`
re-expresses all-MiniLM-L6-v2 that way;
:mod:`nadaraya.nn.lm`, :mod:`nadaraya.nn.ngram` and :mod:`nadaraya.nn.text` are
the tiny character language models and their Shakespeare corpus.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "KernelAttention",
    "NGramLM",
    "TransformerLM",
    "functional",
    "huggingface",
    "lm",
    "minilm",
    "ngram",
    "text",
]

_LAZY = {
    "KernelAttention": ("nadaraya.nn.attention", "KernelAttention"),
    "TransformerLM": ("nadaraya.nn.lm", "TransformerLM"),
    "NGramLM": ("nadaraya.nn.ngram", "NGramLM"),
    "functional": ("nadaraya.nn.functional", None),
    "huggingface": ("nadaraya.nn.huggingface", None),
    "lm": ("nadaraya.nn.lm", None),
    "minilm": ("nadaraya.nn.minilm", None),
    "ngram": ("nadaraya.nn.ngram", None),
    "text": ("nadaraya.nn.text", None),
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'nadaraya.nn' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
