"""The Markov baseline: a character n-gram model with Witten-Bell smoothing.

Seed 002 contrasts the Markov chain, which predicts the next character from
counts of the exact preceding ``n - 1`` characters, with attention, which
averages over every earlier character by similarity. The counts of unseen
contexts are filled in by interpolating with shorter contexts (Witten and
Bell 1991):

    P_k(w | h) = (c(h, w) + u(h) P_{k-1}(w | h')) / (c(h) + u(h))

where ``h'`` drops the oldest character of ``h`` and ``u(h)`` is the number of
distinct characters seen after ``h``; the order-0 model is the add-one
unigram, so every character keeps some probability.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import NadarayaError

__all__ = ["NGramLM"]


def _codes(ids: np.ndarray, length: int, base: int) -> np.ndarray:
    """Integer codes of every window of ``length`` symbols (oldest symbol most significant)."""
    n = ids.shape[0] - length + 1
    out = np.zeros(max(n, 0), dtype=np.int64)
    for j in range(length):
        out = out * base + ids[j:j + n]
    return out


def _lookup(table: np.ndarray, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``values[table == key]`` for each key, 0 where the key is absent."""
    if table.size == 0:
        return np.zeros(keys.shape, dtype=values.dtype)
    pos = np.searchsorted(table, keys).clip(max=table.size - 1)
    return np.where(table[pos] == keys, values[pos], 0)


class NGramLM:
    """Character n-gram language model, interpolated Witten-Bell smoothing.

    Parameters
    ----------
    order : int, default 5
        ``n``: the model reads the ``n - 1`` previous characters.
    vocab_size : int
        Number of distinct symbols.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.nn.ngram import NGramLM
    >>> ids = np.array([0, 1, 2] * 50)
    >>> lm = NGramLM(3, vocab_size=3).fit(ids)
    >>> round(lm.bits_per_char(ids), 2) < 0.2
    True
    """

    def __init__(self, order: int = 5, *, vocab_size: int) -> None:
        if not isinstance(order, int) or order < 1:
            raise NadarayaError(f"order must be a positive integer; got {order!r}.")
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise NadarayaError(f"vocab_size must be a positive integer; got {vocab_size!r}.")
        if order * math.log2(vocab_size + 1) > 62:
            raise NadarayaError(f"order {order} is too high for {vocab_size} symbols (codes "
                                "would overflow 64 bits); use a lower order.")
        self.order = order
        self.vocab_size = vocab_size

    def fit(self, ids: np.ndarray) -> NGramLM:
        """Count the n-grams of ``ids`` (int array of symbols)."""
        ids = self._check(ids)
        V = self.vocab_size
        self.unigram_ = (np.bincount(ids, minlength=V) + 1.0) / (ids.size + V)
        self.tables_ = []
        for k in range(1, self.order):
            full, counts = np.unique(_codes(ids, k + 1, V), return_counts=True)
            ctx, first = np.unique(full // V, return_index=True)
            totals = np.add.reduceat(counts, first) if full.size else counts
            distinct = np.diff(np.append(first, full.size))
            self.tables_.append((full, counts, ctx, totals, distinct))
        return self

    def _check(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise NadarayaError("ids must be a 1-D integer array of symbols.")
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise NadarayaError(f"symbols must be in [0, {self.vocab_size}); got values in "
                                f"[{ids.min()}, {ids.max()}].")
        return ids.astype(np.int64)

    def log2_probs(self, ids: np.ndarray) -> np.ndarray:
        """``log2 P(x_i | x_{i-n+1} .. x_{i-1})`` for ``i >= n - 1``, shape ``(len - n + 1,)``."""
        if not hasattr(self, "tables_"):
            raise NadarayaError("this NGramLM is not fitted; call fit(ids) first.")
        ids = self._check(ids)
        V, n = self.vocab_size, self.order
        start = n - 1
        target = ids[start:]
        p = self.unigram_[target]
        for k, (full, counts, ctx, totals, distinct) in enumerate(self.tables_, start=1):
            codes = _codes(ids[start - k:], k + 1, V)
            c_hw = _lookup(full, counts, codes).astype(float)
            h = codes // V
            c_h = _lookup(ctx, totals, h).astype(float)
            u_h = _lookup(ctx, distinct, h).astype(float)
            seen = c_h > 0
            p = np.where(seen, (c_hw + u_h * p) / np.where(seen, c_h + u_h, 1.0), p)
        return np.log2(p)

    def bits_per_char(self, ids: np.ndarray) -> float:
        """Mean ``-log2 P`` of the characters of ``ids`` (after the first ``n - 1``)."""
        return float(-self.log2_probs(ids).mean())
