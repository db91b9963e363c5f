"""The arguments of :class:`~nadaraya.nn.KernelAttention`, checked before any parameter exists."""

from __future__ import annotations

from typing import Any

import torch

from .._errors import NadarayaError
from ..kernels import Kernel
from .functional import check_choices

__all__ = ["POSITIONAL", "check_arguments"]

POSITIONAL = (None, "absolute", "product")


def check_arguments(*, embed_dim: Any, num_heads: Any, dropout: Any, add_bias_kv: bool,
                    add_zero_attn: bool, kdim: Any, vdim: Any, dtype: Any, num_kv_heads: Any,
                    tie_qk: bool, positional: Any, max_len: Any, empty: Any,
                    engine: Any) -> int:
    """Refuse arguments :class:`~nadaraya.nn.KernelAttention` cannot use, naming each.

    Returns
    -------
    int
        The number of key/value heads (``num_heads`` unless ``num_kv_heads`` is given).
    """
    if isinstance(dropout, str | Kernel):
        raise NadarayaError(
            f"dropout must be a number in [0, 1); got {dropout!r}. The arguments follow "
            "nn.MultiheadAttention's (embed_dim, num_heads, dropout, bias, ...); the kernel "
            f"is keyword-only: KernelAttention(embed_dim, num_heads, kernel={dropout!r})."
        )
    for name, val in (("embed_dim", embed_dim), ("num_heads", num_heads),
                      ("max_len", max_len), ("kdim", kdim), ("vdim", vdim)):
        if val is None and name in ("kdim", "vdim"):
            continue
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise NadarayaError(f"{name} must be a positive integer; got {val!r}.")
    if embed_dim % num_heads:
        raise NadarayaError(
            f"embed_dim ({embed_dim}) must be a multiple of num_heads ({num_heads}); "
            "change one so that each head gets embed_dim // num_heads features."
        )
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if isinstance(kv_heads, bool) or not isinstance(kv_heads, int) or kv_heads < 1 or (
            num_heads % kv_heads):
        raise NadarayaError(
            f"num_kv_heads must be a positive divisor of num_heads ({num_heads}): each "
            f"key/value head serves num_heads // num_kv_heads query heads; got "
            f"{num_kv_heads!r}."
        )
    if kv_heads != num_heads and (tie_qk or positional == "product"):
        raise NadarayaError(
            f"num_kv_heads={kv_heads} (fewer key than query heads) cannot be combined with "
            f"{'tie_qk=True' if tie_qk else 'positional=' + repr(positional)}, which needs "
            "as many key heads as query heads; drop one of them."
        )
    if positional not in POSITIONAL:
        raise NadarayaError(f"positional must be None, 'absolute' or 'product'; "
                            f"got {positional!r}.")
    if not (isinstance(dropout, int | float) and 0.0 <= dropout < 1.0):
        raise NadarayaError(f"dropout must be in [0, 1); got {dropout!r}.")
    if positional == "product" and (add_bias_kv or add_zero_attn):
        raise NadarayaError(
            "add_bias_kv and add_zero_attn append keys that have no position, so they "
            "cannot be used with positional='product'; use positional='absolute' or None."
        )
    check_choices(empty=empty, engine=engine)
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise NadarayaError(f"dtype must be a floating torch dtype (float16, bfloat16, "
                            f"float32, float64); got {dtype!r}.")
    keys_dim = kdim if kdim is not None else embed_dim
    values_dim = vdim if vdim is not None else embed_dim
    if tie_qk and keys_dim != embed_dim:
        raise NadarayaError(f"tie_qk=True needs kdim == embed_dim (one projection for "
                            f"queries and keys); got kdim={keys_dim}.")
    if positional == "absolute" and not keys_dim == values_dim == embed_dim:
        raise NadarayaError(
            f"positional='absolute' adds the embed_dim-wide position embedding to the "
            f"keys and values too, so it needs kdim == vdim == embed_dim ({embed_dim}); got "
            f"kdim={keys_dim}, vdim={values_dim}. Use positional='product' instead."
        )
    return kv_heads
