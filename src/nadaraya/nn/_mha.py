"""``nn.MultiheadAttention``'s conventions for :class:`~nadaraya.nn.KernelAttention`.

Its masks (a boolean True hides a key; floats are added to the log-weights),
``merge_masks``, the keys appended by ``add_bias_kv`` and ``add_zero_attn``,
and the nested tensors ``nn.TransformerEncoder`` passes in evaluation.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn import functional as F

from .._errors import NadarayaError
from .functional import check_additive, check_overflow

__all__ = [
    "additive",
    "append_keys",
    "check_inputs",
    "merge_masks",
    "mha_bias",
    "pad_bias",
    "padded",
    "renest",
    "unnest",
]


def additive(mask: torch.Tensor, name: str, dtype: torch.dtype) -> torch.Tensor:
    """MultiheadAttention's convention as log-weights: bool True hides (-inf); floats are added."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, -math.inf)
    if not mask.is_floating_point():
        raise NadarayaError(f"{name} must be boolean (True hides) or floating (added); "
                            f"got dtype {mask.dtype}.")
    check_additive(mask, name, hide="True in a boolean mask")
    bias = mask.to(dtype)
    check_overflow(bias, name)
    return bias


def mha_bias(key_padding_mask: torch.Tensor | None, attn_mask: torch.Tensor | None,
             B: int, H: int, L: int, S: int, dtype: torch.dtype) -> torch.Tensor | None:
    """``key_padding_mask`` ``(B, S)`` and ``attn_mask`` ``(L, S)`` or ``(B * H, L, S)``.

    Returns
    -------
    torch.Tensor of shape broadcastable to (B, H, L, S), or None
        Their sum as additive log-weights (``-inf`` hides).
    """
    out = None
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (B, S):
            raise NadarayaError(
                f"key_padding_mask must have shape (batch, source length) = {(B, S)}; got "
                f"{tuple(key_padding_mask.shape)}. True marks a padding key to ignore."
            )
        out = additive(key_padding_mask, "key_padding_mask", dtype)[:, None, None, :]
    if attn_mask is not None:
        if attn_mask.dim() == 2 and tuple(attn_mask.shape) == (L, S):
            m = additive(attn_mask, "attn_mask", dtype)
        elif attn_mask.dim() == 3 and tuple(attn_mask.shape) == (B * H, L, S):
            m = additive(attn_mask, "attn_mask", dtype).reshape(B, H, L, S)
        else:
            raise NadarayaError(
                f"attn_mask must have shape (L, S) = {(L, S)} or (batch * num_heads, L, S) "
                f"= {(B * H, L, S)}; got {tuple(attn_mask.shape)}. In this module (as in "
                "nn.MultiheadAttention) a True entry hides a key."
            )
        if out is None:
            out = m
        else:
            out = out + m
            check_overflow(out, "the sum of key_padding_mask and attn_mask")
    return out


def merge_masks(num_heads: int, attn_mask: torch.Tensor | None,
                key_padding_mask: torch.Tensor | None, query: torch.Tensor,
                ) -> tuple[torch.Tensor | None, int | None]:
    """``nn.MultiheadAttention.merge_masks``: one mask and its type (0, 1 or 2).

    A ``key_padding_mask`` alone is returned with type 1; an ``attn_mask``
    ``(L, L)`` or ``(B * H, L, L)`` is expanded to ``(B, H, L, L)`` (type 2)
    and, with a padding mask, the two are added.
    """
    mask_type: int | None = None
    merged: torch.Tensor | None = None
    if key_padding_mask is not None:
        mask_type, merged = 1, key_padding_mask
    if attn_mask is not None:
        batch, length, _ = query.shape
        mask_type = 2
        if attn_mask.dim() == 3:
            merged = attn_mask.view(batch, -1, length, length)
        else:
            merged = attn_mask.view(1, 1, length, length).expand(batch, num_heads, -1, -1)
        if key_padding_mask is not None:
            padding = key_padding_mask.view(batch, 1, 1, length).expand(-1, num_heads, -1, -1)
            merged = merged + padding
    return merged, mask_type


def append_keys(k: torch.Tensor, v: torch.Tensor, bias_k: torch.Tensor | None,
                bias_v: torch.Tensor | None, zero_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values ``(B, S, E_kv)`` with ``add_bias_kv``'s and ``add_zero_attn``'s appended.

    ``bias_k`` and ``bias_v`` ``(1, 1, E_kv)`` are one more key and value of
    every batch element; ``add_zero_attn`` appends a zero key and value to
    every head, after the biases, as ``nn.MultiheadAttention`` does.
    """
    B = k.shape[0]
    if bias_k is not None and bias_v is not None:
        k = torch.cat([k, bias_k.expand(B, 1, -1)], 1)
        v = torch.cat([v, bias_v.expand(B, 1, -1)], 1)
    if zero_attn:
        # a zero row in the packed layout is a zero key of every head
        k = torch.cat([k, k.new_zeros(B, 1, k.shape[-1])], 1)
        v = torch.cat([v, v.new_zeros(B, 1, v.shape[-1])], 1)
    return k, v


def pad_bias(bias: torch.Tensor | None, extra: int) -> torch.Tensor | None:
    """The masks over ``S`` keys, extended with ``extra`` visible keys (the appended ones)."""
    if bias is None or extra == 0:
        return bias
    return F.pad(bias, (0, extra), value=0.0)


def padded(x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A nested ``(B, *, E)`` tensor padded with zeros, and its padding mask ``(B, S)``.

    ``nn.TransformerEncoder`` in evaluation, given a ``src_key_padding_mask``,
    passes its layers the sequences as a nested tensor.
    """
    parts = x.unbind()
    if any(p.dim() != 2 for p in parts):
        raise NadarayaError(f"{name} is a nested tensor whose parts are not (length, features); "
                            "pad it into one dense tensor with .to_padded_tensor(0.0).")
    lengths = torch.tensor([p.shape[0] for p in parts], device=x.device)
    dense = x.to_padded_tensor(0.0)
    hidden = torch.arange(dense.shape[1], device=x.device)[None, :] >= lengths[:, None]
    return dense, hidden


def renest(out: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """The rows of ``out`` ``(B, L, E)`` that ``hidden`` ``(B, L)`` does not mark, nested."""
    lengths = (~hidden).sum(1).tolist()
    return torch.nested.nested_tensor([o[:n] for o, n in zip(out, lengths, strict=True)])


def check_inputs(query: Any, key: Any, value: Any, dims: tuple[int, int, int],
                 own: torch.dtype, batch_first: bool) -> None:
    """Refuse a query, key or value that is not a tensor of the module's features and dtype."""
    unbatched = isinstance(query, torch.Tensor) and query.dim() == 2
    for name, t, dim in zip(("query", "key", "value"), (query, key, value), dims, strict=True):
        if not isinstance(t, torch.Tensor):
            raise NadarayaError(f"{name} must be a torch.Tensor; got {type(t).__name__}.")
        if not t.is_floating_point():
            raise NadarayaError(f"{name} must be a floating tensor; got dtype {t.dtype}. "
                                f"Convert it with .to({own}).")
        if t.dtype != own and not torch.is_autocast_enabled(t.device.type):
            raise NadarayaError(
                f"{name} has dtype {t.dtype} but this module's parameters are {own}; "
                f"convert one of them (module.to({t.dtype}) or {name}.to({own}))."
            )
        if t.dim() != (2 if unbatched else 3):
            raise NadarayaError(
                f"{name} must be {'(L, E)' if unbatched else '(batch, L, E)'} like query "
                f"(batch_first={batch_first}); got shape {tuple(t.shape)}."
            )
        if t.shape[-1] != dim:
            raise NadarayaError(f"{name} has {t.shape[-1]} features but this module expects "
                                f"{dim}; check embed_dim/kdim/vdim.")


def unnest(query: torch.Tensor, key: Any, value: Any, key_padding_mask: Any, batch_first: bool,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Nested inputs (``nn.TransformerEncoder`` in evaluation) padded, with their masks.

    Returns
    -------
    query, key, value : torch.Tensor of shape (B, L, E), (B, S, kdim), (B, S, vdim)
    key_padding_mask : torch.Tensor of shape (B, S)
        True at the padding keys.
    hidden : torch.Tensor of shape (B, L)
        True at the padding queries (for :func:`renest`).
    """
    if not batch_first:
        raise NadarayaError("nested tensors are (batch, length, E) sequences; build the "
                            "module with batch_first=True to pass them.")
    if key_padding_mask is not None:
        raise NadarayaError("key_padding_mask cannot be combined with nested keys: the "
                            "nested tensor already says which keys exist. Pass one of them.")
    dense, hidden = padded(query, "query")
    parts = []
    for name, t in (("key", key), ("value", value)):
        if t is query:
            parts.append((dense, hidden))
        elif isinstance(t, torch.Tensor) and t.is_nested:
            parts.append(padded(t, name))
        else:
            raise NadarayaError(f"query is a nested tensor but {name} is not; pass "
                                "all three nested, or all three padded.")
    return dense, parts[0][0], parts[1][0], parts[0][1], hidden
