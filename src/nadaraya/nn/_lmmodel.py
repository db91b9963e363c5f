"""The character transformer of :mod:`nadaraya.nn.lm`: its config, blocks and evaluation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._errors import NadarayaError
from .attention import KernelAttention

__all__ = ["LMConfig", "TransformerLM", "evaluate"]


@dataclass
class LMConfig:
    """Sizes and choices of a :class:`TransformerLM`."""

    vocab_size: int
    kernel: str = "softmax"
    positional: str = "absolute"
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    context: int = 128
    dropout: float = 0.0
    tie_qk: bool = False
    tie_embeddings: bool = False
    alphabet: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Block(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = KernelAttention(
            cfg.d_model, cfg.n_heads, kernel=cfg.kernel, tie_qk=cfg.tie_qk, dropout=cfg.dropout,
            positional="product" if cfg.positional == "product" else None,
            max_len=cfg.context, batch_first=True)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False, is_causal=True)
        x = x + a
        return x + self.mlp(self.norm2(x))


class TransformerLM(nn.Module):
    """Character language model: embeddings, kernel-attention blocks, a softmax head.

    Parameters
    ----------
    config : LMConfig, optional
        ``vocab_size``, ``kernel``, ``positional`` (``"absolute"``,
        ``"product"`` or ``"none"``), ``d_model``, ``n_layers``, ``n_heads``,
        ``context`` (longest input), ``dropout``, ``tie_qk`` (``W_q = W_k``),
        ``tie_embeddings`` (the output head's weight is the character
        embedding, one ``(vocab_size, d_model)`` tensor).
    **options
        The same fields as keywords, instead of ``config``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.lm import TransformerLM
    >>> lm = TransformerLM(vocab_size=10, kernel="rbf", d_model=16, context=8)
    >>> lm(torch.zeros(2, 8, dtype=torch.long)).shape
    torch.Size([2, 8, 10])
    """

    def __init__(self, config: LMConfig | None = None, **options: Any) -> None:
        super().__init__()
        if config is None:
            try:
                config = LMConfig(**options)
            except TypeError as exc:
                raise NadarayaError(f"TransformerLM options: {exc}; the fields are those of "
                                    "LMConfig (vocab_size is required).") from None
        elif options:
            raise NadarayaError("give either a config or keyword options, not both.")
        if config.positional not in ("absolute", "product", "none"):
            raise NadarayaError(f"positional must be 'absolute', 'product' or 'none'; "
                                f"got {config.positional!r}.")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        if config.positional == "absolute":
            self.pos = nn.Parameter(torch.randn(config.context, config.d_model) * 0.02)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)
        if config.tie_embeddings:
            # one tensor read twice: small initial logits, as the head's own init would give
            nn.init.normal_(self.embed.weight, std=0.02)
            self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-character logits ``(B, L, vocab_size)`` for ids ``(B, L)``."""
        L = ids.shape[-1]
        if L > self.config.context:
            raise NadarayaError(f"input has {L} characters, beyond the model's context of "
                                f"{self.config.context}; feed the last {self.config.context}.")
        x = self.embed(ids)
        if self.config.positional == "absolute":
            x = x + self.pos[:L]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, length: int, *, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue ``ids`` ``(L,)`` by ``length`` sampled characters; returns ``(L + length,)``.

        Parameters
        ----------
        ids : torch.Tensor of shape (L,), int64
            The prompt, at least one character.
        length : int
            Characters to add, >= 0.
        temperature : float, default 1.0
            Finite and > 0: the logits are divided by it before sampling.
        generator : torch.Generator, optional
        """
        try:
            finite = math.isfinite(float(temperature)) and float(temperature) > 0
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise NadarayaError(f"temperature must be a finite number > 0; got {temperature!r}. "
                                "Use e.g. 0.8 (lower: more predictable text).")
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise NadarayaError(f"length must be an integer >= 0; got {length!r}.")
        if ids.ndim != 1 or ids.numel() == 0:
            raise NadarayaError(f"ids must hold at least one character id, shape (L,) with L >= "
                                f"1; got shape {tuple(ids.shape)}. Start from a prompt such "
                                "as a newline.")
        out = ids.clone()
        for _ in range(length):
            logits = self(out[-self.config.context:][None])[0, -1].double()
            # shifted by the largest logit first: a tiny temperature then gives weight 1 to the
            # most likely character instead of inf / inf
            scaled = (logits - logits.max()) / float(temperature)
            nxt = torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator)
            out = torch.cat([out, nxt])
        return out


@torch.no_grad()
def evaluate(model: TransformerLM, data: np.ndarray, *, max_chars: int | None = None,
             batch: int = 32) -> float:
    """Validation bits per character: non-overlapping windows of the model's context.

    Every character after the first of each window is predicted from the
    characters before it in the window.
    """
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    C = model.config.context
    usable = data if max_chars is None else data[:max_chars]
    n_win = (usable.size - 1) // C
    if n_win < 1:
        raise NadarayaError(f"need more than {C + 1} characters to evaluate; got {usable.size}.")
    total, count = 0.0, 0
    for s in range(0, n_win, batch):
        starts = np.arange(s, min(s + batch, n_win)) * C
        idx = starts[:, None] + np.arange(C + 1)[None, :]
        chunk = torch.as_tensor(usable[idx], device=device)
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                               reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train(was)
    return total / count / math.log(2)


def batch_windows(data: np.ndarray, batch: int, context: int, rng: np.random.Generator,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random windows of ``context + 1`` characters: inputs and next characters."""
    starts = rng.integers(0, data.size - context - 1, size=batch)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    chunk = torch.as_tensor(data[idx], device=device)
    return chunk[:, :-1], chunk[:, 1:]
