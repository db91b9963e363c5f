"""Smoothing of many problems at once: attention's ``(..., L, E)`` tensors.

One call smooths every (batch, head) problem with the same kernel formula and
mask. Three ways to compute it, chosen automatically and explained:

* ``fused``: ``torch.nn.functional.scaled_dot_product_attention`` on the
  kernel's dot form, when that form is exact (the exp-dot kernel; the
  Gaussian through its key bias when rounding allows; products of these).
* ``streamed``: the memory-bounded differentiable block pass
  (:func:`~nadaraya.engine._autograd.smooth_blocks`), for every kernel and mask.
* ``dense``: the weights materialised, for callers who asked for them.

Half precisions (float16, bfloat16) run through the fused kernel in their own
dtype (it accumulates in float32 itself); the streamed and dense passes
compute them in float32 (torch has no half ``cdist`` on the CPU, and a
running sum of weights in float16 loses digits and overflows past 65504
keys), and return the input dtype. Gradients flow back through the casts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from .._config import get_config
from .._errors import NadarayaError
from ..masks import Causal, Mask
from ._autograd import Block, BlockMask, smooth_blocks
from ._streamed import dot_form_tolerance

__all__ = ["BATCHED_ENGINES", "BatchedResult", "PreparedKernel", "smooth_batched"]

BATCHED_ENGINES = ("fused", "streamed", "dense")
EMPTY = ("zero", "nan", "raise")
_HALF = (torch.float16, torch.bfloat16)


@dataclass
class PreparedKernel:
    """A kernel with its queries and keys already in kernel coordinates.

    Attributes
    ----------
    queries : torch.Tensor of shape (..., m, e)
    keys : torch.Tensor of shape (..., n, e)
    block : callable
        ``block(q, k) -> (..., mb, nb)`` scores (log-weights), or the weights
        themselves when ``log_domain`` is False. Holds no trainable parameter.
    log_domain : bool
        Whether ``block`` gives log-weights.
    dot : tuple of torch.Tensor, optional
        ``(qa, ka)`` with ``qa @ ka.mT`` equal to the scores up to a constant
        per query (which cancels in the normalisation).
    dot_error : float
        Bound on the absolute score error of ``dot`` in this dtype.
    is_dot : bool
        Whether ``block(q, k)`` is exactly ``q @ k.mT``.
    name : str
        For explanations.
    """

    queries: torch.Tensor
    keys: torch.Tensor
    block: Block
    log_domain: bool = True
    dot: tuple[torch.Tensor, torch.Tensor] | None = None
    dot_error: float = math.inf
    is_dot: bool = False
    name: str = "kernel"


@dataclass
class BatchedResult:
    """Output of :func:`smooth_batched` and how it was computed."""

    out: torch.Tensor
    weights: torch.Tensor | None
    engine: str
    reasons: dict[str, str] = field(default_factory=dict)


def _dot_tolerance(kernel: PreparedKernel) -> float:
    # The dot form is accepted when its error is within a small factor of the
    # rounding of the plain dot product of the same vectors (softmax
    # attention's own rounding, e eps |q| |k|).
    q, k = kernel.queries.detach(), kernel.keys.detach()
    eps = torch.finfo(q.dtype).eps
    if q.numel() == 0 or k.numel() == 0:
        return dot_form_tolerance(q.dtype)
    qn = float(q.norm(dim=-1).max())
    kn = float(k.norm(dim=-1).max())
    return max(dot_form_tolerance(q.dtype), 8.0 * (q.shape[-1] + 2) * eps * qn * kn)


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the streamed and dense passes compute in: float32 for half precisions."""
    return torch.float32 if dtype in _HALF else dtype


def _too_large(values: torch.Tensor) -> float | None:
    """The largest |value| if it is too large for the fused kernel, else None.

    The fused kernel's backward forms products of gradients and values (and
    its forward, on some devices, unnormalised sums of values); values up to
    the square root of the largest number leave as much room again for the
    gradients and the sums. The streamed pass rescales its values instead.
    """
    if values.numel() == 0:
        return None
    top = float(values.detach().abs().max())
    limit = math.sqrt(torch.finfo(_accumulation_dtype(values.dtype)).max)
    return top if top > limit else None


def _materialise(mask: Mask | None, block_mask: BlockMask | None, bias: torch.Tensor | None,
                 m: int, n: int, dtype: torch.dtype) -> tuple[torch.Tensor | None, bool]:
    """SDPA's ``(attn_mask, is_causal)`` for a mask and a bias."""
    if block_mask is None:
        return bias, False
    if bias is None and isinstance(mask, Causal) and mask.offset == 0:
        return None, True
    visible = block_mask.block(slice(0, m), slice(0, n))
    if bias is None:
        return visible, False
    hidden = torch.tensor(-math.inf, dtype=bias.dtype, device=bias.device)
    return torch.where(visible, bias, hidden), False


def _refusals(kernel: PreparedKernel, values: torch.Tensor, mask: Mask | None,
              block_mask: BlockMask | None, need_weights: bool, m: int, n: int,
              lead: tuple[int, ...]) -> dict[str, str | None]:
    fused: str | None = None
    if need_weights:
        fused = "the weights were asked for, and the fused kernel does not return them"
    elif not kernel.log_domain:
        fused = f"the {kernel.name} kernel is not an exponential of a dot product"
    elif kernel.dot is None:
        fused = f"the {kernel.name} kernel has no dot-product form"
    elif kernel.dot_error > _dot_tolerance(kernel):
        fused = (f"the dot form of the {kernel.name} kernel would lose precision here "
                 f"(error bound {kernel.dot_error:.1e})")
    elif block_mask is not None and not (isinstance(mask, Causal) and mask.offset == 0):
        per = block_mask.per_problem is not None
        size = m * n * (math.prod(lead) if per else 1) * 4
        if size > get_config().working_memory * 2**20:
            fused = "the mask would have to be materialised beyond the working-memory budget"
    if fused is None and (top := _too_large(values)) is not None:
        fused = (f"values as large as {top:.3g} could overflow the fused kernel's sums and "
                 "gradients; the streamed pass rescales them")
    streamed = ("the weights were asked for; the streamed pass never materialises them"
                if need_weights else None)
    return {"fused": fused, "streamed": streamed, "dense": None}


def _dense(kernel: PreparedKernel, values: torch.Tensor, block_mask: BlockMask | None,
           bias: torch.Tensor | None, dropout_p: float,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = kernel.queries.shape[-2], kernel.keys.shape[-2]
    s = kernel.block(kernel.queries, kernel.keys)
    visible = block_mask.block(slice(0, m), slice(0, n)) if block_mask is not None else None
    if kernel.log_domain:
        if bias is not None:
            s = s + bias
        if visible is not None:
            s = s.masked_fill(~visible, -math.inf)
        top = s.amax(dim=-1, keepdim=True)
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        e = torch.exp(s - top)
        total = e.sum(-1, keepdim=True)
        empty = total == 0
        w = e / torch.where(empty, torch.ones_like(total), total)
        empty = empty[..., 0]
    else:
        if bias is not None:
            s = s * torch.exp(bias)
        if visible is not None:
            s = s.masked_fill(~visible, 0.0)
        total = s.sum(-1, keepdim=True)
        empty = total == 0
        w = s / torch.where(empty, torch.ones_like(total), total)
        empty = empty[..., 0]
    if dropout_p > 0:
        w = torch.nn.functional.dropout(w, p=dropout_p)
    return w @ values, w, empty


def _apply_empty(out: torch.Tensor, empty: torch.Tensor | None, policy: str) -> torch.Tensor:
    if empty is None or not bool(empty.any()):
        return out
    if policy == "raise":
        count = int(empty.sum())
        raise NadarayaError(
            f"{count} quer{'y sees' if count == 1 else 'ies see'} no key: every key is hidden "
            "by the mask. Relax the mask, or pass empty='zero' (zero output there, as "
            "scaled_dot_product_attention does) or empty='nan'."
        )
    if policy == "nan":
        return out.masked_fill(empty[..., None], math.nan)
    return out.masked_fill(empty[..., None], 0.0)


def smooth_batched(
    kernel: PreparedKernel,
    values: torch.Tensor,
    *,
    mask: Mask | None = None,
    bias: torch.Tensor | None = None,
    points: tuple[torch.Tensor, torch.Tensor] | None = None,
    dropout_p: float = 0.0,
    engine: str = "auto",
    need_weights: bool = False,
    empty: str = "zero",
) -> BatchedResult:
    """Smooth ``values`` for every leading (batch, head) problem at once.

    Parameters
    ----------
    kernel : PreparedKernel
        Queries ``(..., m, e)`` and keys ``(..., n, e)`` in kernel coordinates,
        and the kernel's block formula.
    values : torch.Tensor of shape (..., n, p)
        Values; leading dimensions equal those of the queries and keys.
    mask : Mask, optional
        Which keys each query sees (one mask for every problem; masks that
        read the points use ``points``).
    bias : torch.Tensor, optional
        Additive log-weights broadcastable to ``(..., m, n)``; ``-inf`` hides.
    points : tuple of torch.Tensor, optional
        Raw queries and keys for masks that read points (k-nearest, radius);
        the prepared points by default.
    dropout_p : float, default 0.0
        Dropout on the weights (training only; the caller decides).
    engine : {"auto", "fused", "streamed", "dense"}
        Force one way of computing it.
    need_weights : bool, default False
        Also return the weights ``(..., m, n)`` (materialised).
    empty : {"zero", "nan", "raise"}, default "zero"
        Output of a query whose every key is hidden: zero (as
        ``scaled_dot_product_attention``), NaN, or an error.

    Returns
    -------
    BatchedResult
        ``.out`` ``(..., m, p)``, ``.weights`` or None, ``.engine`` and
        ``.reasons`` (why each engine was or was not used).
    """
    if empty not in EMPTY:
        raise NadarayaError(f"empty must be one of {', '.join(map(repr, EMPTY))}; got {empty!r}.")
    q, k = kernel.queries, kernel.keys
    lead = tuple(q.shape[:-2])
    m, n = q.shape[-2], k.shape[-2]
    block_mask = None
    if mask is not None:
        pq, pk = points if points is not None else (q, k)
        block_mask = BlockMask(mask, lead, m, n, pq, pk, device=q.device)
    refusals = _refusals(kernel, values, mask, block_mask, need_weights, m, n, lead)
    if engine == "auto":
        chosen = next(name for name in BATCHED_ENGINES if refusals[name] is None)
    elif engine in BATCHED_ENGINES:
        if refusals[engine] is not None:
            raise NadarayaError(f"engine={engine!r} cannot run this problem: {refusals[engine]}. "
                                "Use engine='auto'.")
        chosen = engine
    else:
        raise NadarayaError(f"engine must be 'auto' or one of {', '.join(BATCHED_ENGINES)}; "
                            f"got {engine!r}.")
    reasons = {name: ("chosen" if name == chosen else
                      f"cannot run: {why}" if (why := refusals[name]) is not None else
                      f"could run, but {chosen!r} is preferred")
               for name in BATCHED_ENGINES}
    weights = None
    dtype = values.dtype
    work = _accumulation_dtype(dtype)
    if chosen != "fused" and work != dtype:
        kernel = replace(kernel, queries=q.to(work), keys=k.to(work))
        q, k, values = kernel.queries, kernel.keys, values.to(work)
        bias = bias.to(work) if bias is not None else None
    if chosen == "fused":
        assert kernel.dot is not None
        qa, ka = kernel.dot
        attn_mask, is_causal = _materialise(mask, block_mask, bias, m, n, q.dtype)
        out = torch.nn.functional.scaled_dot_product_attention(
            qa, ka, values, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
            scale=1.0)
        empties = None
        if attn_mask is not None:
            seen = attn_mask if attn_mask.dtype == torch.bool else attn_mask > -math.inf
            empties = ~seen.any(-1)
            if empties.shape != out.shape[:-1]:
                empties = empties.expand(out.shape[:-1])
    elif chosen == "streamed":
        out, stat = smooth_blocks(q, k, values, kernel.block, mask=block_mask, bias=bias,
                                  log_domain=kernel.log_domain, dot=kernel.is_dot,
                                  dropout_p=dropout_p)
        empties = torch.isinf(stat) if kernel.log_domain else stat == 0
    else:
        out, weights, empties = _dense(kernel, values, block_mask, bias, dropout_p)
    out = _apply_empty(out, empties, empty).to(dtype)
    weights = weights.to(dtype) if weights is not None else None
    return BatchedResult(out, weights, chosen, reasons)

