"""Differentiable smoothing in bounded memory: a flash-attention style autograd function.

The forward pass folds key blocks into the online log-sum-exp state and keeps
only the output and, per query, the running maximum ``c`` and total ``t``
(``lse = c + log t``); the backward pass recomputes each score block and turns
the incoming gradient into a gradient of the scores::

    dS = P * (g . (v_j - out_i) + g_lse)          P = exp(s - c) / t

which it hands to the kernel's own block formula through autograd. Memory is
``O(block)`` instead of the ``O(m n)`` graph of the dense engine, for any
kernel whose block formula is a function of prepared queries and keys, and
for any mask (blocks that are fully hidden cost nothing).

Inputs carry any number of leading (batch, head) dimensions: queries
``(..., m, e)``, keys ``(..., n, e)``, values ``(..., n, p)``, so attention's
``(B, H, L, E)`` tensors run without a Python loop over heads.

Kernels whose weights are not exponentials (polynomial, signed linear) run
with ``log_domain=False``: the block gives the weights ``K`` themselves and
the output is ``sum K v / sum K``.

The values are summed as ``(v - c) / S``: centred on their midpoint and
divided by a power of two per problem, so that values near the dtype's
largest number give their representable mean instead of an overflowed sum,
and the backward pass forms ``dS`` in the same frame (no product of a
gradient and a huge value, no cancellation of a common offset), multiplying
by ``S`` once, after the kernel's own backward, whose products of ``dS``
and coordinates would otherwise overflow (or underflow). A block that
does not depend on the points through autograd (the uniform kernel, an
arg-max: weights that are piecewise constant) has a zero gradient with
respect to queries and keys almost everywhere; the values' gradient is
still the weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .._config import block_elements, get_config
from ..masks import BoundMask, Mask, Problem, Visibility
from ..masks._base import IndexMask, _Binary
from ..masks.matrix import MatrixMask
from ._job import Job, exp_floor
from ._state import SmoothState

__all__ = ["AutogradEngine", "BlockMask", "BlockProblem", "gradient_unit", "rescaled_gradient",
           "smooth_blocks"]

Block = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _point_free(mask: Mask) -> bool:
    """Whether a mask depends only on indices (so one binding serves every head)."""
    if isinstance(mask, IndexMask | MatrixMask):
        return True
    if isinstance(mask, _Binary):
        return _point_free(mask.left) and _point_free(mask.right)
    return False


class BlockMask:
    """Visibility blocks of a mask for problems with leading (batch, head) dimensions.

    A mask that depends only on indices (causal, window, predicate, matrix) is
    bound once and its ``(mb, nb)`` blocks broadcast over the leading
    dimensions; a mask that depends on the points (k-nearest, radius) is bound
    to each problem's own queries and keys.

    Parameters
    ----------
    mask : Mask or BoundMask
        The mask, or a mask already bound to a single problem.
    lead : tuple of int
        The leading dimensions.
    m, n : int
        Number of queries and keys.
    queries, keys : torch.Tensor, optional
        Points ``(..., m, d)`` and ``(..., n, d)`` for masks that read them.
    """

    def __init__(self, mask: Mask | BoundMask, lead: tuple[int, ...], m: int, n: int,
                 queries: torch.Tensor | None = None, keys: torch.Tensor | None = None,
                 device: torch.device | None = None) -> None:
        self.lead = lead
        self.per_problem: list[BoundMask] | None = None
        if isinstance(mask, BoundMask):
            self.shared: BoundMask | None = mask
            return
        if _point_free(mask) or not lead:
            dev = device if device is not None else (
                queries.device if queries is not None else torch.device("cpu"))
            q = queries if queries is not None and not lead else torch.empty(m, 0, device=dev)
            k = keys if keys is not None and not lead else torch.empty(n, 0, device=dev)
            self.shared = mask.bind(Problem(m, n, q, k))
            return
        if queries is None or keys is None:
            raise ValueError("a mask that reads the points needs queries and keys")
        self.shared = None
        qf = queries.detach().expand(*lead, m, queries.shape[-1]).reshape(-1, m, queries.shape[-1])
        kf = keys.detach().expand(*lead, n, keys.shape[-1]).reshape(-1, n, keys.shape[-1])
        self.per_problem = [mask.bind(Problem(m, n, a, b)) for a, b in zip(qf, kf, strict=True)]

    def status(self, rows: slice, cols: slice) -> Visibility:
        if self.shared is not None:
            return self.shared.status(rows, cols)
        return Visibility.PARTIAL

    def block(self, rows: slice, cols: slice) -> torch.Tensor:
        """Bool ``(mb, nb)`` (shared) or ``(*lead, mb, nb)`` (per problem)."""
        if self.shared is not None:
            return self.shared.block(rows, cols)
        assert self.per_problem is not None
        parts = torch.stack([b.block(rows, cols) for b in self.per_problem])
        return parts.reshape(*self.lead, *parts.shape[1:])


@dataclass
class BlockProblem:
    """What :func:`smooth_blocks` needs besides the tensors.

    Attributes
    ----------
    block : callable
        ``block(q, k)`` for prepared queries ``(..., mb, e)`` and keys
        ``(..., nb, e)`` returns ``(..., mb, nb)``: log-weights, or the weights
        themselves when ``log_domain`` is False. It must not hold parameters
        that need gradients: fold those into the prepared points.
    mask : BlockMask, optional
        Visibility of each block.
    log_domain : bool
        Whether ``block`` gives log-weights (normalised by log-sum-exp).
    dot : bool
        Whether ``block(q, k)`` is exactly ``q @ k.T`` (a faster backward).
    dropout_p : float
        Probability of dropping each weight (attention dropout; the
        normaliser keeps every weight, as in ``scaled_dot_product_attention``).
    point_scales : tuple of torch.Tensor, optional
        Powers of two ``(sq, sk)`` ``(..., 1, 1)`` by which queries and keys
        are divided before ``block`` (homogeneous weights only).
    """

    block: Block
    mask: BlockMask | None = None
    log_domain: bool = True
    dot: bool = False
    dropout_p: float = 0.0
    seed: int = 0
    sizes: tuple[int, int] = (1, 1)
    point_scales: tuple[torch.Tensor, torch.Tensor] | None = None


def gradient_unit(scale: torch.Tensor) -> torch.Tensor:
    """The unit ``(..., 1, 1)`` in which the scores' gradients are formed: ``S``, at least 2**-64.

    The value part of ``dS`` is of order ``S`` (the values' power of two): in
    units of ``S`` it is of order one whatever the values' magnitude. The
    floor keeps the other parts (through ``lse``, or the returned weights),
    of order one in the caller's units, from overflowing when divided by it.
    """
    return scale.clamp(min=2.0**-64)


def rescaled_gradient(g: torch.Tensor, unit: torch.Tensor, divisor: torch.Tensor,
                      ) -> torch.Tensor:
    """``g * unit / divisor`` for powers of two, in the order that cannot overflow early.

    ``g`` is the gradient with respect to points divided by ``divisor``,
    given in units of ``unit`` (both ``(..., 1, 1)``).
    """
    ratio = unit / divisor  # a power of two, exact where it is representable
    ordered = torch.where(divisor > 1, (g / divisor) * unit, (g * unit) / divisor)
    return torch.where(torch.isfinite(ratio) & (ratio > 0), g * ratio, ordered)


def _scaled_points(spec: BlockProblem, qp: torch.Tensor,
                   kp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if spec.point_scales is None:
        return qp, kp
    sq, sk = spec.point_scales
    return qp / sq, kp / sk


def _block_sizes(lead: tuple[int, ...], m: int, n: int, itemsize: int) -> tuple[int, int]:
    config = get_config()
    groups = max(1, math.prod(lead))
    budget = max(1, block_elements(itemsize, buffers=4) // groups)
    nb = max(1, min(n, config.key_block, budget))
    mb = max(1, min(m, config.query_block, budget // nb))
    return mb, nb


def _keep(spec: BlockProblem, shape: torch.Size, r: int, c: int, dtype: torch.dtype,
          device: torch.device) -> torch.Tensor:
    """Dropout multipliers of block (r, c): the same in the forward and backward pass."""
    gen = torch.Generator(device=device)
    gen.manual_seed((spec.seed * 1_000_003 + r * 65_537 + c) % (2**63 - 1))
    keep = torch.rand(shape, generator=gen, device=device, dtype=dtype) >= spec.dropout_p
    return keep.to(dtype) / (1.0 - spec.dropout_p)


def _scores(spec: Any, qp: torch.Tensor, kp: torch.Tensor, bias: torch.Tensor | None,
            rows: slice, cols: slice, status: Visibility,
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Raw block and its visibility factor.

    Returns ``(raw, extra)``: log domain, ``extra`` is the additive term
    (bias, ``-inf`` where hidden) or None; weight domain, ``extra`` is the
    multiplicative factor ``exp(bias)`` (zero where hidden) or None.
    """
    raw = spec.block(qp[..., rows, :], kp[..., cols, :])
    extra = None
    if bias is not None:
        extra = bias[..., rows, cols]
    if status is Visibility.PARTIAL and spec.mask is not None:
        visible = spec.mask.block(rows, cols)
        hidden = torch.tensor(-math.inf, dtype=raw.dtype, device=raw.device)
        shown = extra if extra is not None else torch.zeros((), dtype=raw.dtype,
                                                               device=raw.device)
        extra = torch.where(visible, shown, hidden)
    if extra is not None and not spec.log_domain:
        extra = torch.exp(extra)
    return raw, extra


def _value_frame(v: torch.Tensor, dropout_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Centre ``c`` ``(..., 1, p)`` and power of two ``S`` ``(..., 1, 1)`` of each problem's values.

    The engine sums ``(v - c) / S``, of magnitude in ``[1, 2)``: the sums cannot
    overflow for values near the dtype's largest number nor lose tiny values to
    underflow, and the backward's ``v_j - out_i`` is formed without the
    cancellation of a large common offset. ``c`` is the midpoint of a column
    whose values share a sign (0 otherwise), rounded to a multiple of the
    unit in the last place of its largest value, so that ``v - c`` is exact
    for values of one magnitude and ``(v - c) + c`` gives ``v`` back. A
    weighted mean moves with its values; dropout breaks that (the dropped
    weights stay in the normaliser), so it keeps ``c = 0``.
    """
    lead = v.shape[:-2]
    if v.numel() == 0:
        return v.new_zeros((*lead, 1, v.shape[-1])), v.new_ones((*lead, 1, 1))
    vd = v.detach()
    low, high = vd.amin(-2, keepdim=True), vd.amax(-2, keepdim=True)
    if dropout_p > 0:
        centre = torch.zeros_like(low)
    else:
        mid = low / 2 + high / 2  # halved first: cannot overflow
        _, exponent = torch.frexp(torch.maximum(low.abs(), high.abs()))
        info = torch.finfo(v.dtype)
        # the unit in the last place, never below the smallest subnormal (it would be 0)
        ulp = torch.ldexp(torch.full_like(mid, info.eps), exponent - 1).clamp(
            min=info.smallest_normal * info.eps)
        one_sign = (low > 0) | (high < 0)
        centre = torch.where(one_sign & torch.isfinite(mid), torch.round(mid / ulp) * ulp,
                             torch.zeros_like(mid))
    top = (vd - centre).abs().amax(dim=(-2, -1), keepdim=True)
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    _, exponent = torch.frexp(top)  # top = mantissa * 2**exponent, mantissa in [0.5, 1)
    return centre, torch.ldexp(torch.ones_like(top), exponent - 1)


def _combine(spec: BlockProblem, raw: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
    if extra is None:
        return raw
    return raw + extra if spec.log_domain else raw * extra


def _forward(spec: BlockProblem, qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor,
             bias: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    lead = qp.shape[:-2]
    m, n = qp.shape[-2], kp.shape[-2]
    mb, nb = spec.sizes
    floor = exp_floor(qp.dtype)
    # detached points take the kernels' fast block paths (no autograd graph here)
    qp, kp = _scaled_points(spec, qp.detach(), kp.detach())
    centre, scale = _value_frame(v, spec.dropout_p)
    vs = (v.detach() - centre) / scale
    frame = v.new_zeros(*lead, m, v.shape[-1])
    stat = v.new_zeros(*lead, m)
    tops = v.new_zeros(*lead, m)
    totals = v.new_zeros(*lead, m)
    for ri, r0 in enumerate(range(0, m, mb)):
        rows = slice(r0, min(r0 + mb, m))
        size = rows.stop - rows.start
        acc = v.new_zeros(*lead, size, v.shape[-1])
        total = v.new_zeros(*lead, size)
        top = v.new_full((*lead, size), -math.inf)
        for ci, c0 in enumerate(range(0, n, nb)):
            cols = slice(c0, min(c0 + nb, n))
            status = spec.mask.status(rows, cols) if spec.mask is not None else Visibility.FULL
            if status is Visibility.EMPTY:
                continue
            raw, extra = _scores(spec, qp, kp, bias, rows, cols, status)
            s = _combine(spec, raw, extra)
            if spec.log_domain:
                new_top = torch.maximum(top, s.amax(-1))
                safe = torch.where(torch.isinf(new_top), torch.zeros_like(new_top), new_top)
                corr = torch.exp(top - safe)
                hidden = s == -math.inf
                w = (s - safe[..., None]).clamp_(min=floor).exp_().masked_fill_(hidden, 0.0)
                total = total * corr + w.sum(-1)
                acc = acc * corr[..., None]
                top = new_top
            else:
                w = s
                total = total + w.sum(-1)
            if spec.dropout_p > 0:
                w = w * _keep(spec, w.shape, ri, ci, w.dtype, w.device)
            acc = acc + w @ vs[..., cols, :]
        if spec.log_domain:
            empty = total == 0  # NaN (a NaN score) is not empty: it propagates
            safe_total = torch.where(empty, torch.ones_like(total), total)
            frame[..., rows, :] = torch.where(empty[..., None], torch.zeros_like(acc),
                                              acc / safe_total[..., None])
            stat[..., rows] = torch.where(empty, torch.full_like(total, -math.inf),
                                          top + torch.log(safe_total))
            tops[..., rows] = top
        else:
            empty = total == 0
            safe_total = torch.where(empty, torch.ones_like(total), total)
            frame[..., rows, :] = torch.where(empty[..., None], torch.zeros_like(acc),
                                              acc / safe_total[..., None])
            stat[..., rows] = total
        totals[..., rows] = total
    out = frame * scale + centre
    if spec.log_domain and spec.dropout_p == 0 and n:
        # a weighted mean lies within its values' range: keep the rounding of
        # the centring from taking it out (the backward does not see this)
        vd = v.detach()
        out = torch.minimum(torch.maximum(out, vd.amin(-2, keepdim=True)),
                            vd.amax(-2, keepdim=True))
    empty = totals == 0
    out = torch.where(empty[..., None], torch.zeros_like(out), out)
    return out, frame, stat, tops, totals


def _backward(spec: BlockProblem, qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor,
              bias: torch.Tensor | None, frame: torch.Tensor, stat: torch.Tensor,
              top: torch.Tensor, total: torch.Tensor, g_out: torch.Tensor,
              g_stat: torch.Tensor | None,
              needs: tuple[bool, bool, bool, bool]) -> tuple[torch.Tensor | None, ...]:
    m, n = qp.shape[-2], kp.shape[-2]
    mb, nb = spec.sizes
    need_q, need_k, need_v, need_b = needs
    qp, kp = _scaled_points(spec, qp, kp)
    dq = torch.zeros_like(qp) if need_q else None
    dk = torch.zeros_like(kp) if need_k else None
    dv = torch.zeros_like(v) if need_v else None
    db = torch.zeros_like(bias) if need_b and bias is not None else None
    # Values and outputs in the forward's frame, (v - c) / S: the products of
    # gradients and values (gv, delta) stay finite for values near the dtype's
    # largest number, and gv - delta does not cancel a common offset of the
    # values; each block's dS is multiplied by S once.
    centre, scale = _value_frame(v, spec.dropout_p)
    vs = (v.detach() - centre) / scale
    delta = (g_out * frame).sum(-1)
    # dS is formed in units of S (see gradient_unit): the kernel's own backward
    # then never meets a product of a huge dS and a coordinate (which would
    # overflow, and cancel to NaN) nor of a subnormal one, and dq, dk are
    # multiplied by the unit at the end.
    unit = gradient_unit(scale)
    inner = scale / unit  # 1 unless S is below the unit's floor
    # P = exp(s - top) / total, not exp(s - lse): top + log(total) can round
    # away log(total) when the scores are huge (masks of finfo.min, say).
    empty = total == 0
    inv = torch.where(empty, torch.zeros_like(total), 1.0 / torch.where(empty, 1.0, total))
    shift = torch.where(empty | torch.isinf(top), torch.full_like(top, math.inf), top)
    if spec.log_domain and g_stat is not None:
        g_stat = torch.where(empty, torch.zeros_like(g_stat), g_stat)
    for ri, r0 in enumerate(range(0, m, mb)):
        rows = slice(r0, min(r0 + mb, m))
        g = g_out[..., rows, :]
        d = delta[..., rows, None]
        for ci, c0 in enumerate(range(0, n, nb)):
            cols = slice(c0, min(c0 + nb, n))
            status = spec.mask.status(rows, cols) if spec.mask is not None else Visibility.FULL
            if status is Visibility.EMPTY:
                continue
            qb = qp[..., rows, :].detach()
            kb = kp[..., cols, :].detach()
            grad_qk = (need_q or need_k) and not spec.dot
            if grad_qk:
                qb.requires_grad_(need_q)
                kb.requires_grad_(need_k)
            with torch.set_grad_enabled(grad_qk):
                raw = spec.block(qb, kb)
            _, extra = _scores(_NoBlock(spec, raw), qp, kp, bias, rows, cols, status)
            gv = g @ vs[..., cols, :].transpose(-1, -2)
            keep = (_keep(spec, gv.shape, ri, ci, gv.dtype, gv.device)
                    if spec.dropout_p > 0 else None)
            if keep is not None:
                gv = gv * keep
            with torch.no_grad():
                if spec.log_domain:
                    s = _combine(spec, raw.detach(), extra)
                    p = torch.exp(s - shift[..., rows, None]) * inv[..., rows, None]
                    pk = p if keep is None else p * keep
                    ds = p * ((gv - d) * inner)
                    if g_stat is not None:
                        ds = ds + p * (g_stat[..., rows, None] / unit)
                    ds_raw, ds_bias = ds, ds
                else:
                    w = _combine(spec, raw.detach(), extra)
                    norm = inv[..., rows, None]
                    pk = (w if keep is None else w * keep) * norm
                    dw = ((gv - d) * inner) * norm
                    if g_stat is not None:
                        dw = dw + g_stat[..., rows, None] / unit
                    ds_raw = dw if extra is None else dw * extra
                    ds_bias = dw * w
                if dv is not None:
                    dv[..., cols, :] += pk.transpose(-1, -2) @ g
                if db is not None:
                    target = db[..., rows, cols]
                    target += (ds_bias * unit).sum_to_size(target.shape)
            if not (need_q or need_k):
                continue
            if spec.dot:
                if dq is not None:
                    dq[..., rows, :] += ds_raw @ kb
                if dk is not None:
                    dk[..., cols, :] += ds_raw.transpose(-1, -2) @ qb
            elif raw.requires_grad:
                wrt = [t for t, need in ((qb, need_q), (kb, need_k)) if need]
                grads = torch.autograd.grad(raw, wrt, ds_raw, allow_unused=True)
                it = iter(grads)
                if need_q:
                    gq = next(it)
                    if gq is not None:
                        dq[..., rows, :] += gq
                if need_k:
                    gk = next(it)
                    if gk is not None:
                        dk[..., cols, :] += gk
            # else: the block is constant in the points where it is differentiable
            # (uniform kernel, arg-max): its gradient is zero almost everywhere.
    one = torch.ones_like(unit)
    sq, sk = spec.point_scales if spec.point_scales is not None else (one, one)
    if dq is not None:
        dq = rescaled_gradient(dq, unit, sq)
    if dk is not None:
        dk = rescaled_gradient(dk, unit, sk)
    return dq, dk, dv, db


class _NoBlock:
    """A view of a BlockProblem whose block is already computed (to reuse ``_scores``)."""

    def __init__(self, spec: BlockProblem, raw: torch.Tensor) -> None:
        self.block = lambda q, k: raw
        self.mask = spec.mask
        self.log_domain = spec.log_domain


class _SmoothBlocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor,
                bias: torch.Tensor | None, spec: BlockProblem) -> tuple[torch.Tensor, torch.Tensor]:
        out, frame, stat, top, total = _forward(spec, qp, kp, v, bias)
        ctx.spec = spec
        ctx.save_for_backward(qp, kp, v, bias, frame, stat, top, total)
        return out, stat

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, g_stat: torch.Tensor | None) -> tuple[Any, ...]:
        qp, kp, v, bias, frame, stat, top, total = ctx.saved_tensors
        needs = tuple(ctx.needs_input_grad[:4])
        if g_out is None:
            g_out = torch.zeros_like(frame)
        dq, dk, dv, db = _backward(ctx.spec, qp, kp, v, bias, frame, stat, top, total,
                                   g_out.contiguous(),
                                   g_stat, needs)  # type: ignore[arg-type]
        return dq, dk, dv, db, None


def smooth_blocks(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                  block: Block, *, mask: BlockMask | None = None,
                  bias: torch.Tensor | None = None, log_domain: bool = True, dot: bool = False,
                  dropout_p: float = 0.0,
                  point_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel smoothing of prepared points in bounded memory, differentiable.

    Parameters
    ----------
    queries : torch.Tensor of shape (..., m, e)
        Queries in the kernel's coordinates.
    keys : torch.Tensor of shape (..., n, e)
        Keys in the kernel's coordinates.
    values : torch.Tensor of shape (..., n, p)
        Values; the leading dimensions of all three must match.
    block : callable
        ``block(q, k) -> (..., mb, nb)`` log-weights (or weights when
        ``log_domain=False``); it must hold no parameter that needs a gradient.
    mask : BlockMask, optional
        Which keys each query sees.
    bias : torch.Tensor, optional
        Additive log-weights broadcastable to ``(..., m, n)``; ``-inf`` hides a
        key. Differentiable.
    log_domain : bool, default True
        Whether ``block`` returns log-weights.
    dot : bool, default False
        Whether ``block(q, k) == q @ k.mT`` exactly (faster backward).
    dropout_p : float, default 0.0
        Attention dropout on the weights (the normaliser is unaffected).
    point_scales : tuple of torch.Tensor, optional
        Powers of two ``(sq, sk)`` broadcastable to ``(..., 1, 1)``: the block
        is evaluated on ``queries / sq`` and ``keys / sk``, which changes
        homogeneous weights (``(q.k)^d``) by one factor per problem that the
        normalisation cancels; the gradients come back in the caller's
        coordinates without forming them in the scaled ones.

    Returns
    -------
    out : torch.Tensor of shape (..., m, p)
        The smoothed values; rows that see no weight are zero.
    stat : torch.Tensor of shape (..., m)
        ``log sum_j K`` (``-inf`` for empty rows) in the log domain; the
        normaliser ``sum_j K`` (zero for empty rows) otherwise.

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(2, 5, 3), torch.randn(2, 7, 3), torch.randn(2, 7, 4)
    >>> out, lse = smooth_blocks(q, k, v, lambda a, b: a @ b.mT, dot=True)
    >>> torch.allclose(out, torch.softmax(q @ k.mT, -1) @ v, atol=1e-6)
    True
    """
    lead = queries.shape[:-2]
    if bias is not None:
        bias = bias.expand(*bias.shape[:-2], queries.shape[-2], keys.shape[-2])
    sizes = _block_sizes(lead, queries.shape[-2], keys.shape[-2], queries.element_size())
    seed = 0
    if dropout_p > 0:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    spec = BlockProblem(block, mask, log_domain, dot, float(dropout_p), seed, sizes,
                        point_scales)
    return _SmoothBlocks.apply(queries, keys, values, bias, spec)


class AutogradEngine:
    """Differentiable engine with bounded memory for any kernel and mask.

    The forward pass keeps only the output and ``lse``; the backward pass
    recomputes score blocks (flash-attention style). It runs when inputs
    require grad; it refuses kernel functions, which may hold parameters its
    backward cannot see.
    """

    name = "autograd"

    def refuse(self, job: Job) -> str | None:
        from ..kernels import CallableKernel

        if not job.requires_grad:
            return "inputs do not require grad; the streamed engine is faster without a backward"
        if isinstance(job.kernel.kernel, CallableKernel):
            return ("a kernel function may hold parameters that a recomputing backward "
                    "cannot see; the dense engine keeps the whole graph")
        return None

    def cost(self, job: Job) -> float:
        return 1.0 * job.m * job.n * (job.p + job.kernel.q.shape[1] + 4)

    def run(self, job: Job) -> SmoothState:
        kernel = job.kernel
        mask = BlockMask(job.mask, (), job.m, job.n) if job.mask is not None else None
        out, lse = smooth_blocks(kernel.q, kernel.k, job.values, kernel.kernel._block,
                                 mask=mask)
        empty = torch.isinf(lse)
        total = (~empty).to(out.dtype)
        return SmoothState(lse, total, out)
