"""Attention as a kernel smoother, with ``scaled_dot_product_attention``'s conventions.

``kernel_attention(q, k, v)`` is SDPA; ``kernel_attention(q, k, v, "rbf")``
is Gaussian Nadaraya-Watson regression of the values on the keys, evaluated
at the queries, for every (batch, head) at once. The kernel and the mask are
the library's objects; the sum itself is computed by the engine
(:func:`nadaraya.engine.batched.smooth_batched`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.batched import (
    BATCHED_ENGINES,
    EMPTY,
    BatchedResult,
    accumulation_dtype,
    smooth_batched,
    wider_dtype,
)
from ..kernels import ATTENTION_NAMES, Kernel, get_attention_kernel
from ..masks import Causal, Mask, get_mask
from ._gqa import expand_groups

__all__ = ["attention_weights", "explain_attention", "kernel_attention"]


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_inputs(query: Any, key: Any, value: Any) -> tuple[torch.Tensor, ...]:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise NadarayaError(f"{name} must be a torch.Tensor; got {type(t).__name__}. "
                                "Convert it with torch.as_tensor(...).")
        if t.ndim < 2:
            raise NadarayaError(f"{name} must have shape (..., length, features); got "
                                f"{_shape(t)}. Add a length dimension.")
        if not t.is_floating_point():
            raise NadarayaError(f"{name} must be a floating tensor; got dtype {t.dtype}.")
    if query.shape[-1] != key.shape[-1]:
        raise NadarayaError(
            f"query and key must have the same number of features per head (last dimension); "
            f"got query {_shape(query)} and key {_shape(key)}. Project them to one size."
        )
    if key.shape[-2] != value.shape[-2]:
        raise NadarayaError(
            f"key and value must have the same length (dimension -2), one value per key; got "
            f"key {_shape(key)} and value {_shape(value)}."
        )
    try:
        lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise NadarayaError(
            f"the leading (batch, head) dimensions of query {_shape(query)}, key {_shape(key)} "
            f"and value {_shape(value)} do not match; give each (batch, heads, length, features)"
            " with the same batch and head sizes."
        ) from None
    if len({query.dtype, key.dtype, value.dtype}) > 1:
        raise NadarayaError(
            f"query, key and value must share a dtype; got {query.dtype}, {key.dtype}, "
            f"{value.dtype}. Cast them with .to(dtype)."
        )
    if len({query.device, key.device, value.device}) > 1:
        raise NadarayaError("query, key and value must be on one device; move them with .to().")
    q = query.expand(*lead, *query.shape[-2:])
    k = key.expand(*lead, *key.shape[-2:])
    v = value.expand(*lead, *value.shape[-2:])
    return q, k, v


def check_choices(*, empty: Any, engine: Any) -> None:
    """Refuse an unknown ``empty`` policy or ``engine``, naming the parameter."""
    if empty not in EMPTY:
        raise NadarayaError(f"empty must be one of {', '.join(map(repr, EMPTY))}; "
                            f"got {empty!r}.")
    if engine != "auto" and engine not in BATCHED_ENGINES:
        raise NadarayaError(f"engine must be 'auto' or one of "
                            f"{', '.join(map(repr, BATCHED_ENGINES))}; got {engine!r}.")


def check_additive(mask: torch.Tensor, name: str, *,
                   hide: str = "False in a boolean mask") -> None:
    """Refuse NaN and ``+inf`` in an additive (floating) mask, naming the parameter.

    A floating mask is added to the log-weights: ``-inf`` hides a key and
    finite values favour or disfavour it, but ``+inf`` would give a key an
    infinite weight (NaN after the normalisation) and NaN means nothing.

    Parameters
    ----------
    mask : torch.Tensor
        The floating mask as the caller gave it (any shape).
    name : str
        The caller's name for it (``attn_mask``, ``key_padding_mask``...).
    hide : str
        How a boolean mask hides a key under the caller's convention.
    """
    if torch.compiler.is_compiling():
        return  # reading the values would break the graph (see smooth_batched)
    nan = torch.isnan(mask)
    bad = nan | torch.isposinf(mask)
    if not bool(bad.any()):
        return
    count = int(bad.sum())
    first = tuple(int(i) for i in torch.nonzero(bad)[0])
    where = f"{count} entr{'y' if count == 1 else 'ies'}, the first at index {first}"
    if bool(nan.any()):
        raise NadarayaError(
            f"{name} contains NaN ({where}); a NaN log-weight has no meaning and would make "
            f"the output NaN. Use -inf (or {hide}) to hide a key; a NaN often comes from "
            "inf - inf or 0 * inf where the mask was built."
        )
    raise NadarayaError(
        f"{name} contains +inf ({where}); a floating mask is added to the log-weights, so "
        "+inf would give a key infinite weight and the normalised weights NaN. Use -inf (or "
        f"{hide}) to hide a key, and finite values to favour one."
    )


def check_overflow(bias: torch.Tensor, name: str) -> None:
    """Refuse a mask whose finite values became ``+inf`` in the computation's dtype.

    ``bias`` is the mask after a cast to the queries' dtype, or a sum of masks.
    Skipped under ``torch.compile``, like :func:`check_additive`.
    """
    if torch.compiler.is_compiling():
        return
    over = torch.isposinf(bias)
    if bool(over.any()):
        first = tuple(int(i) for i in torch.nonzero(over)[0])
        raise NadarayaError(
            f"{name} exceeds the largest {bias.dtype} number ({torch.finfo(bias.dtype).max:.3g},"
            f" the queries' dtype) at index {first}, where it becomes +inf. Clip it to that "
            "range, or use -inf to hide a key."
        )


def _as_bias(mask: torch.Tensor, name: str, shape: tuple[int, ...], dtype: torch.dtype,
             ) -> torch.Tensor:
    """SDPA's ``attn_mask`` (bool: True attends; float: added) as additive log-weights."""
    try:
        fits = tuple(torch.broadcast_shapes(mask.shape, shape)) == tuple(shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise NadarayaError(
            f"{name} has shape {_shape(mask)}, which does not broadcast to (..., L, S) = "
            f"{shape}; give (L, S) or (batch, heads, L, S) with 1 for broadcast dimensions."
        )
    if mask.dtype == torch.bool:
        zero = torch.zeros((), dtype=dtype, device=mask.device)
        return torch.where(mask, zero, torch.tensor(-math.inf, dtype=dtype, device=mask.device))
    if not mask.is_floating_point():
        raise NadarayaError(f"{name} must be boolean (True attends) or floating (added to the "
                            f"log-weights); got dtype {mask.dtype}.")
    check_additive(mask, name)
    bias = mask.to(dtype)
    check_overflow(bias, name)
    return bias


def _split_mask(mask: Any, attn_mask: Any, is_causal: bool, shape: tuple[int, ...],
                dtype: torch.dtype) -> tuple[Mask | None, torch.Tensor | None]:
    """The engine mask and the additive bias from every way a mask can be given."""
    bias = None
    engine_mask: Mask | None = None
    for name, m in (("mask", mask), ("attn_mask", attn_mask)):
        if m is None:
            continue
        if isinstance(m, torch.Tensor):
            b = _as_bias(m, name, shape, dtype)
            if bias is None:
                bias = b
            else:
                bias = bias + b
                check_overflow(bias, "the sum of mask and attn_mask")
        elif name == "attn_mask":
            raise NadarayaError(
                f"attn_mask must be a tensor (bool: True attends; float: added); got "
                f"{type(m).__name__}. Pass mask objects through mask=."
            )
        else:
            got = get_mask(m)
            engine_mask = got if engine_mask is None else engine_mask & got
    if is_causal:
        engine_mask = Causal() if engine_mask is None else engine_mask & Causal()
    return engine_mask, bias


# kernels of the names, built once: building a module inside torch.compile breaks the graph
_NAMED: dict[tuple[str, float | None], Kernel] = {}


def _attention_kernel(kernel: str | Kernel, scale: float | None) -> Kernel:
    """:func:`get_attention_kernel`, a name's kernel kept for the next call (they hold no state)."""
    if not isinstance(kernel, str) or isinstance(scale, bool) or not (
            scale is None or isinstance(scale, int | float)):
        return get_attention_kernel(kernel, scale=scale)
    key = (kernel, None if scale is None else float(scale))
    if key not in _NAMED:
        _NAMED[key] = get_attention_kernel(kernel, scale=scale)
    return _NAMED[key]


for _name in ATTENTION_NAMES:
    _attention_kernel(_name, None)


def _run(query: Any, key: Any, value: Any, kernel: Any, mask: Any, attn_mask: Any,
         dropout_p: float, is_causal: bool, scale: float | None, need_weights: bool,
         engine: str, empty: str, enable_gqa: bool = False) -> BatchedResult:
    if enable_gqa:
        query, key, value = expand_groups(query, key, value)
    q, k, v = _check_inputs(query, key, value)
    if not (isinstance(dropout_p, int | float) and 0.0 <= dropout_p < 1.0):
        raise NadarayaError(f"dropout_p must be in [0, 1); got {dropout_p!r}.")
    shape = (*q.shape[:-2], q.shape[-2], k.shape[-2])
    engine_mask, bias = _split_mask(mask, attn_mask, is_causal, shape, q.dtype)
    attention = _attention_kernel(kernel, scale)
    if not attention.batched:
        # no batched form (compact, Matern... on a metric, callables): one problem at a time
        return _per_problem(attention, q, k, v, engine_mask, bias, need_weights, empty)
    # points are prepared in the working dtype (float32 for half precisions):
    # neither the preparation nor its gradient rounds to, or overflows, the half range
    work = accumulation_dtype(q.dtype)
    pq, pk = q.to(work), k.to(work)
    prepared = attention.prepare(pq, pk)
    wide = wider_dtype(prepared)
    if wide is not None:
        # scores beyond the working dtype's range: prepare and smooth in float64
        pq, pk, v = q.to(wide), k.to(wide), v.to(wide)
        bias = bias.to(wide) if bias is not None else None
        prepared = attention.prepare(pq, pk)
    result = smooth_batched(prepared, v, mask=engine_mask, bias=bias, points=(pq, pk),
                            dropout_p=float(dropout_p), engine=engine,
                            need_weights=need_weights, empty=empty)
    if wide is None:
        return result
    weights = result.weights.to(q.dtype) if result.weights is not None else None
    return replace(result, out=result.out.to(q.dtype), weights=weights)


def _per_problem(kernel: Kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: Mask | None, bias: torch.Tensor | None, need_weights: bool,
                 empty: str) -> BatchedResult:
    """Any engine kernel: one :func:`nadaraya.smooth` call per (batch, head) problem."""
    import nadaraya

    from ..masks import MatrixMask

    lead, m, n = q.shape[:-2], q.shape[-2], k.shape[-2]
    for name, t in (("query", q), ("key", k), ("value", v)):
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            first = tuple(int(i) for i in torch.nonzero(bad)[0])
            raise NadarayaError(
                f"{name} contains NaN or infinity (the first at index {first}); an engine "
                "kernel without a batched form runs through nadaraya.smooth, which refuses "
                "them. Remove them, or use a kernel with a batched form (Gaussian, Laplacian, "
                "ExpDot... see Kernel.batched), with which they propagate."
            )
    problems = math.prod(lead)
    qf, kf, vf = (t.reshape(problems, *t.shape[-2:]) for t in (q, k, v))
    visible = None
    if bias is not None:
        if bool(((bias != 0) & ~torch.isinf(bias)).any()):
            raise NadarayaError("a floating attn_mask with finite values needs a kernel with "
                                "a batched form (Kernel.batched: Gaussian, Laplacian, "
                                "ExpDot...); this kernel runs per problem and takes boolean "
                                "masks only.")
        visible = (bias == 0).expand(*lead, m, n).reshape(problems, m, n)
    policy = {"zero": "nan", "nan": "nan", "raise": "raise"}[empty]
    outs, ws = [], []
    for g in range(qf.shape[0]):
        mg = mask.at(tuple(lead), g) if mask is not None else None  # a mask_mod at (b, h)
        if visible is not None:
            mm = MatrixMask(visible[g])
            mg = mm if mg is None else mg & mm
        out = nadaraya.smooth(qf[g], kf[g], vf[g], kernel, mg, empty=policy)
        if empty == "zero":
            out = torch.nan_to_num(out, nan=0.0)
        outs.append(out)
        if need_weights:
            w = nadaraya.weights(qf[g], kf[g], kernel, mg, empty="nan")
            ws.append(torch.nan_to_num(w, nan=0.0) if empty == "zero" else w)
    out = torch.stack(outs).reshape(*lead, m, v.shape[-1])
    weights = torch.stack(ws).reshape(*lead, m, n) if need_weights else None
    return BatchedResult(out, weights, "per-problem",
                         {"per-problem": "a kernel without a batched form: one nadaraya.smooth "
                                         "call per head"})


def kernel_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kernel: str | Kernel = "softmax",
    mask: Mask | torch.Tensor | str | Any = None,
    *,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    need_weights: bool = False,
    engine: str = "auto",
    empty: str = "zero",
    enable_gqa: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention with any kernel: ``sum_j K(q, k_j) v_j / sum_j K(q, k_j)`` over visible keys.

    With the default ``kernel="softmax"`` this is
    ``torch.nn.functional.scaled_dot_product_attention``; with ``"rbf"`` it is
    Gaussian Nadaraya-Watson regression with bandwidth ``scale ** -0.5``.

    Parameters
    ----------
    query : torch.Tensor of shape (..., L, E)
        Queries, e.g. ``(batch, heads, L, E)``.
    key : torch.Tensor of shape (..., S, E)
        Keys.
    value : torch.Tensor of shape (..., S, Ev)
        Values.
    kernel : str or Kernel, default "softmax"
        ``"softmax"``, ``"rbf"``, ``"laplacian"``, ``"polynomial"``,
        ``"linear"``, ``"cosine"`` (translated by
        :func:`nadaraya.kernels.get_attention_kernel`), or any
        :class:`nadaraya.kernels.Kernel` (a product on column slices for
        positional kernels). A kernel without a batched form
        (``kernel.batched`` False) is computed one head at a time.
    mask : Mask, str, callable or torch.Tensor, optional
        The visible set: a :mod:`nadaraya.masks` object (``Causal``,
        ``Window``, ``KNearest``, ``Predicate``, ``MaskMod`` and their
        ``&``/``|``), a name (``"causal"``), a predicate ``fn(i, j)``,
        FlexAttention's ``mask_mod(b, h, q_idx, kv_idx)`` (per batch element
        ``b`` and head ``h``, for query ``(B, H, L, E)``; see
        :class:`nadaraya.masks.MaskMod`), or a tensor with SDPA's meaning
        (bool: True attends; float: added to the log-weights).
    attn_mask : torch.Tensor, optional
        SDPA's ``attn_mask``, broadcastable to ``(..., L, S)``. A floating
        mask hides a key with ``-inf``; NaN, ``+inf``, and finite values
        beyond the queries' dtype are errors (SDPA would return NaN).
    dropout_p : float, default 0.0
        Dropout on the attention weights (pass 0 at evaluation, as with SDPA).
    is_causal : bool, default False
        Query ``i`` sees keys ``j <= i``.
    scale : float, optional
        The kernel's scale (``1 / sqrt(E)`` by default; for ``"rbf"`` the
        bandwidth is ``scale ** -0.5``). Only with a kernel name.
    need_weights : bool, default False
        Also return the weights ``(..., L, S)`` (materialised).
    engine : {"auto", "fused", "distance", "streamed", "dense"}
        Force a way of computing it; see :func:`explain_attention`.
    empty : {"zero", "nan", "raise"}, default "zero"
        Output of a query whose every key is hidden (or carries zero
        weight): zero, as ``scaled_dot_product_attention`` returns, with zero
        gradients through that row; NaN (``nn.MultiheadAttention``'s output
        there); or an error.
    enable_gqa : bool, default False
        Grouped-query attention, as ``scaled_dot_product_attention``'s:
        ``query`` ``(..., H, L, E)`` with ``key`` and ``value`` of
        ``H_kv`` heads ``(..., H_kv, S, E)``, ``H`` a multiple of ``H_kv``;
        query head ``h`` reads key/value head ``h // (H // H_kv)``
        (``H_kv = 1``: multi-query attention).

    Returns
    -------
    out : torch.Tensor of shape (..., L, Ev)
    weights : torch.Tensor of shape (..., L, S)
        Only with ``need_weights=True``.

    Notes
    -----
    NaN and infinities in ``query``, ``key`` and ``value`` are not checked,
    as in ``scaled_dot_product_attention``; they propagate: an output row is
    NaN when its query, or any key or value of its (batch, head) problem, is
    not finite. (A kernel without a batched form runs through
    :func:`nadaraya.smooth`, which refuses them by name.) Scores beyond the
    range of the inputs' dtype (points near its largest number) are
    computed in float64 and the output rounded once.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.functional import kernel_attention
    >>> q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    >>> sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> torch.allclose(kernel_attention(q, k, v, is_causal=True), sdpa, atol=1e-6)
    True
    """
    result = _run(query, key, value, kernel, mask, attn_mask, dropout_p, is_causal, scale,
                  need_weights, engine, empty, enable_gqa)
    if need_weights:
        assert result.weights is not None
        return result.out, result.weights
    return result.out


def attention_weights(
    query: torch.Tensor,
    key: torch.Tensor,
    kernel: str | Kernel = "softmax",
    mask: Any = None,
    *,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """The Nadaraya-Watson weights ``(..., L, S)`` of :func:`kernel_attention` (rows sum to one).

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.functional import attention_weights
    >>> w = attention_weights(torch.randn(3, 5, 4), torch.randn(3, 7, 4), "rbf")
    >>> bool(torch.allclose(w.sum(-1), torch.ones(3, 5)))
    True
    """
    value = key.new_zeros(*key.shape[:-1], 0)
    result = _run(query, key, value, kernel, mask, attn_mask, 0.0, is_causal, scale, True,
                  "dense", "zero")
    assert result.weights is not None
    return result.weights


def explain_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kernel: str | Kernel = "softmax",
    mask: Any = None,
    *,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> dict[str, str]:
    """Which engine :func:`kernel_attention` uses for these inputs, and why not the others.

    Returns
    -------
    dict of str to str
        ``{engine: reason}``; the chosen one reads ``"chosen"``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.functional import explain_attention
    >>> q = torch.randn(1, 2, 5, 4)
    >>> explain_attention(q, q, q, "laplacian")["distance"]
    'chosen'
    """
    with torch.no_grad():
        result = _run(query, key, value, kernel, mask, attn_mask, 0.0, is_causal, scale, False,
                      "auto", "zero", enable_gqa)
    return result.reasons
