"""The autograd engine's forward and backward passes over key blocks.

See :mod:`nadaraya.engine.autograd._engine` for the method: the forward folds key
blocks into the online log-sum-exp state; the backward recomputes each score block
and hands ``dS`` to the kernel's block formula through autograd.
"""

from __future__ import annotations

import math

import torch

from ...masks import Visibility
from .._job import exp_floor
from ._problem import (
    BlockProblem,
    _combine,
    _keep,
    _scaled_points,
    _scores,
    _value_frame,
    gradient_unit,
    rescaled_gradient,
)

__all__: list[str] = []


class _NoBlock:
    """A view of a BlockProblem whose block is already computed (to reuse ``_scores``)."""

    def __init__(self, spec: BlockProblem, raw: torch.Tensor) -> None:
        self.block = lambda q, k: raw
        self.mask = spec.mask
        self.log_domain = spec.log_domain


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
                    # s <= top in the forward; a block recomputed with a gradient that
                    # rounds one ulp higher (1e23 for scores of 1e39) must not make
                    # exp overflow (NaN stays NaN)
                    p = torch.exp((s - shift[..., rows, None]).clamp_(max=0.0))
                    p = p * inv[..., rows, None]
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


