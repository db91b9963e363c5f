"""The batched engine's dense path: the weights materialised, differentiable in the values' frame.

For callers who asked for the weights (``need_weights``) and for problems the
streamed pass does not take: :func:`_dense` forms every score of each
``(..., m, n)`` problem, normalises them and sums the values as the streamed
pass does, centred and divided by a power of two, with gradients that cannot
overflow where the result does not (:class:`_DenseSmooth`, :class:`_Rescaled`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...kernels import PreparedKernel
from ..autograd import BlockMask, gradient_unit, rescaled_gradient
from ..autograd._problem import _value_frame

__all__: list[str] = []


def _dense(kernel: PreparedKernel, values: torch.Tensor, block_mask: BlockMask | None,
           bias: torch.Tensor | None, dropout_p: float,
           point_scales: tuple[torch.Tensor, torch.Tensor] | None,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k = kernel.queries, kernel.keys
    lead, m, n = q.shape[:-2], q.shape[-2], k.shape[-2]
    centre, scale = _value_frame(values, dropout_p)
    # the scores' gradients come back in units of S (see _DenseSmooth)
    unit = gradient_unit(scale)
    one = torch.ones_like(unit)
    sq, sk = point_scales if point_scales is not None else (one, one)
    q, k = _Rescaled.apply(q, sq, unit), _Rescaled.apply(k, sk, unit)
    s = kernel.block(q, k)
    if bias is not None:
        bias = _Rescaled.apply(bias.expand(*lead, m, n), one, unit)
    visible = block_mask.block(slice(0, m), slice(0, n)) if block_mask is not None else None
    if kernel.log_domain:
        if bias is not None:
            s = s + bias
        if visible is not None:
            s = s.masked_fill(~visible, -math.inf)
    else:
        if bias is not None:
            s = s * torch.exp(bias)
        if visible is not None:
            s = s.masked_fill(~visible, 0.0)
    return _DenseSmooth.apply(s, values, centre, scale, unit, kernel.log_domain,
                              float(dropout_p))


class _Rescaled(torch.autograd.Function):
    """``x / divisor``, whose incoming gradient is given in units of ``unit``.

    ``divisor`` and ``unit`` ``(..., 1, 1)`` are powers of two per problem;
    the backward returns ``g * unit / divisor`` in an order that cannot
    overflow before the result does.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, divisor: torch.Tensor,
                unit: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(divisor, unit)
        return x / divisor

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        divisor, unit = ctx.saved_tensors
        return rescaled_gradient(g, unit, divisor), None, None


class _DenseSmooth(torch.autograd.Function):
    """Materialised weights and their weighted mean, differentiable in the values' frame.

    The forward normalises the scores ``s`` ``(..., m, n)`` (log-weights, or
    weights when not ``log_domain``) into ``w``, drops some of them in
    training, and sums the values as the streamed pass does: ``(v - c) / S``,
    centred and divided by a power of two
    (:func:`~nadaraya.engine.autograd._problem._value_frame`). The backward forms the
    scores' gradient in the same frame,
    ``dS = w * (g . (v_j - out_i)) = w * (g . (vs_j - frame_i)) * S``: no
    ``g @ v.mT`` overflow for values near the dtype's largest number, nor
    cancellation of their common offset. It returns ``dS`` in units of ``S``
    (``unit``, :func:`~nadaraya.engine.autograd.gradient_unit`), which
    :class:`_Rescaled` multiplies back after the kernel's own backward:
    products of a huge ``dS`` and the coordinates would overflow there (and
    cancel to NaN), those of a tiny one underflow.
    """

    @staticmethod
    def forward(ctx: Any, s: torch.Tensor, values: torch.Tensor, centre: torch.Tensor,
                scale: torch.Tensor, unit: torch.Tensor, log_domain: bool,
                dropout_p: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        e = s
        if log_domain and s.shape[-1]:  # (with no key, every row is empty)
            top = s.amax(dim=-1, keepdim=True)
            top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
            e = torch.exp(s - top)
        total = e.sum(-1, keepdim=True)
        empty = total == 0  # a NaN total (a NaN score) is not empty: it propagates
        safe = torch.where(empty, torch.ones_like(total), total)
        w = torch.where(empty, torch.zeros_like(e), e / safe)
        keep = None
        if dropout_p > 0:
            keep = torch.empty_like(w).bernoulli_(1.0 - dropout_p) / (1.0 - dropout_p)
        kept = w if keep is None else w * keep
        vs = (values - centre) / scale
        frame = kept @ vs
        out = frame * scale + centre
        if log_domain and keep is None and values.shape[-2]:
            # a weighted mean lies within its values' range (as in the streamed pass)
            out = torch.minimum(torch.maximum(out, values.amin(-2, keepdim=True)),
                                values.amax(-2, keepdim=True))
        out = torch.where(empty, torch.zeros_like(out), out)
        ctx.log_domain = log_domain
        ctx.save_for_backward(w, keep, vs, frame, scale / unit, unit, safe, empty)
        ctx.mark_non_differentiable(empty)
        return out, kept, empty[..., 0]

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, g_w: torch.Tensor | None,
                 _: Any) -> tuple[torch.Tensor | None, ...]:
        w, keep, vs, frame, inner, unit, total, empty = ctx.saved_tensors
        kept = w if keep is None else w * keep
        ds = dv = None
        if ctx.needs_input_grad[0]:
            # the gradient of out with respect to w, in the frame and less its
            # weighted row mean (which the normalisation removes): no overflow
            gv = g_out @ vs.mT
            if keep is not None:
                gv = gv * keep
            gv = (gv - (g_out * frame).sum(-1, keepdim=True)) * inner
            ds = w * gv if ctx.log_domain else gv / total  # w = s / total otherwise
            if g_w is not None:
                gw = g_w if keep is None else g_w * keep
                gw = (gw - (w * gw).sum(-1, keepdim=True)) / unit
                ds = ds + (w * gw if ctx.log_domain else gw / total)
            ds = torch.where(empty, torch.zeros_like(ds), ds)
        if ctx.needs_input_grad[1]:
            dv = kept.mT @ g_out
        return ds, dv, None, None, None, None, None
