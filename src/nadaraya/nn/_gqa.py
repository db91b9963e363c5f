"""Grouped-query attention: key and value heads shared by groups of query heads."""

from __future__ import annotations

from typing import Any

import torch

from .._errors import NadarayaError

__all__ = ["expand_groups"]


def expand_groups(query: Any, key: Any, value: Any) -> tuple[Any, Any, Any]:
    """Keys and values with each head repeated for its group of query heads.

    ``scaled_dot_product_attention``'s ``enable_gqa``: query heads ``H``
    (dimension -3) in groups of ``H // H_kv``, query head ``h`` reading key
    and value head ``h // (H // H_kv)``.

    Parameters
    ----------
    query : torch.Tensor of shape (..., H, L, E)
    key : torch.Tensor of shape (..., H_kv, S, E)
    value : torch.Tensor of shape (..., H_kv, S, Ev)

    Returns
    -------
    query, key, value : torch.Tensor
        Key and value ``(..., H, S, E)`` and ``(..., H, S, Ev)``; inputs that
        are not tensors are returned as they are (the caller refuses them).
    """
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value)):
        return query, key, value
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim < 3:
            raise NadarayaError(
                f"enable_gqa=True needs {name} of shape (..., heads, length, features); got "
                f"{tuple(t.shape)}. Add a heads dimension, or pass enable_gqa=False."
            )
    heads, kv_heads = query.shape[-3], key.shape[-3]
    if value.shape[-3] != kv_heads:
        raise NadarayaError(
            f"key and value must have the same number of heads (dimension -3) with "
            f"enable_gqa=True; got key {tuple(key.shape)} and value {tuple(value.shape)}."
        )
    if kv_heads == 0 or heads % kv_heads:
        raise NadarayaError(
            f"enable_gqa=True needs the query heads (dimension -3 of query, H={heads}) to be a "
            f"multiple of the key/value heads (H_kv={kv_heads}): each key/value head serves "
            "H // H_kv query heads. Change the number of heads of one of them."
        )
    group = heads // kv_heads
    if group == 1:
        return query, key, value
    return query, key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
