"""The batched engine's distance path: Laplacian attention by matrix products, forward and backward.

The Laplacian's scores ``-||q - k||`` have no dot-product form, but their
squared distances do: ``||q||^2 + ||k||^2 - 2 q.k``, one matrix product per
block of queries. :class:`_DistanceSmooth` computes, for every (batch, head)
problem at once and one block of query rows at a time (all keys of a row in
one block, within the working-memory budget)::

    s = bias - ||q - k||,   P = softmax(s),   out = P v

keeping only the rows' maximum score and normaliser for the backward pass,
which recomputes each block and forms every gradient by matrix products::

    dS = P * (g . v_j - g . out_i)            W = dS / ||q_i - k_j||   (0 where q_i = k_j)
    dq = -(rowsum(W) q - W k)     dk = W^T q - colsum(W) k     dv = P^T g

Exactness. The product form loses digits to cancellation where two points
are close compared with their length: the rounding of ``||q - k||^2`` is
about ``e eps (||q||^2 + ||k||^2)``. Pairs closer than half that length
(``||q - k||^2 < (||q||^2 + ||k||^2) / 4``) are measured again from their
differences, and their gradients formed from their differences too, so
every distance and gradient keeps the error of the direct formula within a
small factor. Points are divided by a power of two per problem near their
largest magnitude (exact), so tiny and huge points neither underflow nor
overflow in the squares. Under ``torch.compile`` the close pairs are not
measured again (their number depends on the data): the distances there
carry the product form's rounding, ``sqrt(e eps) (||q|| + ||k||)`` at most.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..autograd import BlockMask
from ..autograd._problem import working_config

__all__: list[str] = []

_Close = tuple[torch.Tensor, ...] | None  # indices of close pairs

# pairs with ||q - k||^2 below this fraction of ||q||^2 + ||k||^2 are measured directly
_CLOSE = 0.25
# beyond this fraction of close pairs in a block, the whole block is measured directly
_MOSTLY_CLOSE = 0.125
# scores per block (all problems and keys of a block of query rows)
_BLOCK = 2**23


def _unit(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A power of two ``(..., 1, 1)`` near the largest magnitude of each problem's points."""
    top = q.new_zeros(*q.shape[:-2], 1, 1)
    for x in (q, k):
        if x.numel():
            low, high = torch.aminmax(x.detach().flatten(-2), dim=-1, keepdim=True)
            top = torch.maximum(top, torch.maximum(-low, high)[..., None])
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    _, exponent = torch.frexp(top)
    return torch.ldexp(torch.ones_like(top), exponent - 1)


def _compiling() -> bool:
    return bool(torch.compiler.is_compiling())


def _squared(qa: torch.Tensor, ka: torch.Tensor, qb: torch.Tensor, k: torch.Tensor,
             qn: torch.Tensor, kn: torch.Tensor, top: torch.Tensor, check: bool,
             ) -> tuple[torch.Tensor, _Close, bool, torch.Tensor | None]:
    """Squared distances ``(..., mb, n)`` of scaled points, the close pairs' indices,
    whether every distance outside them is positive, and the rows' least squared
    distance where no pair was measured again (else None).

    ``qa = [q, ||q||^2, 1]`` and ``ka = [-2 k, 1, ||k||^2]`` give them by one
    product. A block whose rows' least distance is beyond a quarter of
    ``||q||^2`` plus the largest ``||k||^2`` of its problem (``top``) has no
    close pair, which one pass over the rows' minima shows (the usual case);
    otherwise the close pairs (every pair at distance 0 among them) are
    measured from their differences, or the whole block directly where they
    are many, and their indices returned. ``check=False``: the caller knows
    the block has no close pair (the forward pass found none).
    """
    lead, mb, n = qa.shape[:-2], qa.shape[-2], ka.shape[-2]
    problems = math.prod(lead)
    r2 = torch.bmm(qa.reshape(problems, mb, qa.shape[-1]),
                   ka.reshape(problems, n, ka.shape[-1]).mT).view(*lead, mb, n)
    if _compiling() or not r2.numel():
        return r2.clamp_(min=0.0), None, False, None
    if not check:
        return r2, None, True, None
    least = r2.amin(-1, keepdim=True)
    if bool((least > _CLOSE * (qn[..., None] + top)).all()):
        return r2, None, True, least
    close = torch.le(r2, _CLOSE * (qn[..., None] + kn[..., None, :]))
    where = close.nonzero(as_tuple=True)
    if where[0].numel() > _MOSTLY_CLOSE * close.numel():
        direct = torch.cdist(qb, k, compute_mode="donot_use_mm_for_euclid_dist")
        return direct.square_(), where, True, None
    diff = qb[where[:-1]] - k[(*where[:-2], where[-1])]
    r2[where] = diff.square().sum(-1)
    return r2.clamp_(min=0.0), where, True, None


def _extra(bias: torch.Tensor | None, mask: BlockMask | None, rows: slice, n: int,
           dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
    """The additive term of a block of rows: the bias, ``-inf`` where the mask hides."""
    extra = bias[..., rows, :] if bias is not None else None
    if mask is None:
        return extra
    visible = mask.block(rows, slice(0, n))
    shown = extra if extra is not None else torch.zeros((), dtype=dtype, device=device)
    return torch.where(visible, shown, torch.tensor(-math.inf, dtype=dtype, device=device))


def _rows(lead: tuple[int, ...], m: int, n: int, itemsize: int) -> int:
    """Query rows per block: about ``_BLOCK`` scores, within the working-memory budget."""
    problems = max(1, math.prod(lead))
    memory = working_config().working_memory * 2**20
    budget = min(_BLOCK, max(1, int(memory // (itemsize * 6))))
    return max(1, min(m, budget // max(1, problems * n)))


class _Points:
    """Scaled points of every problem and their augmented forms, for the blocks' products."""

    def __init__(self, q: torch.Tensor, k: torch.Tensor, unit: torch.Tensor) -> None:
        self.q, self.k = q.detach() / unit, k.detach() / unit
        self.qn = self.q.square().sum(-1, keepdim=True)
        kn = self.k.square().sum(-1, keepdim=True)
        self.kn = kn[..., 0]
        # (..., 1, 1); no key: 0
        self.top = kn.amax(-2, keepdim=True).mT if kn.shape[-2] else kn.new_zeros(
            *kn.shape[:-2], 1, 1)
        one_q, one_k = torch.ones_like(self.qn), torch.ones_like(kn)
        self.qa = torch.cat([self.q, self.qn, one_q], -1)
        self.ka = torch.cat([-2.0 * self.k, one_k, kn], -1)
        self.q1 = torch.cat([self.q, one_q], -1)
        self.k1 = torch.cat([self.k, one_k], -1)

    def distances(self, rows: slice, check: bool = True,
                  ) -> tuple[torch.Tensor, _Close, bool, torch.Tensor | None]:
        """Scaled distances ``(..., mb, n)`` of a block of rows, its close pairs, whether
        every other distance is positive, and the rows' least distance (or None)."""
        r2, where, positive, least = _squared(
            self.qa[..., rows, :], self.ka, self.q[..., rows, :], self.k,
            self.qn[..., rows, 0], self.kn, self.top, check)
        return r2.sqrt_(), where, positive, None if least is None else least.sqrt()


def _weights(d: torch.Tensor, least: torch.Tensor | None, unit: torch.Tensor,
             extra: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``exp(s - top)`` and ``top`` (0 for a row that sees nothing) of ``s = extra - unit d``."""
    if extra is None:  # top = -unit min d
        top = (d.amin(-1, keepdim=True) if least is None else least) * -unit
        return d.mul_(-unit).sub_(top).exp_(), top
    s = torch.addcmul(extra, d, unit, value=-1.0)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    return s.sub_(top).exp_(), top


class _DistanceSmooth(torch.autograd.Function):
    """``softmax(bias - unit d) v`` by blocks of rows, its backward by matrix products.

    The forward keeps, per row, the largest score ``top`` and the total
    ``sum exp(s - top)``; the backward recomputes ``exp(s - top)`` and folds
    ``1 / total`` into the incoming gradient's rows, so the weights are never
    normalised block by block. It also keeps which blocks held close pairs:
    the backward measures only those again.
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                bias: torch.Tensor | None, mask: BlockMask | None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        lead, m, n, p = q.shape[:-2], q.shape[-2], k.shape[-2], v.shape[-1]
        unit = _unit(q, k)
        pts = _Points(q, k, unit)
        vd = v.detach()
        v1 = torch.cat([vd, torch.ones_like(vd[..., :1])], -1)  # the totals by the product
        out = v.new_empty(*lead, m, p)
        tops = v.new_zeros(*lead, m)
        totals = v.new_ones(*lead, m)
        close: list[bool] = []
        plain = bias is None and mask is None  # no row is empty: torch's softmax (one kernel)
        mb = _rows(tuple(lead), m, n, q.element_size())
        for r0 in range(0, m, mb):
            rows = slice(r0, min(r0 + mb, m))
            d, where, _, least = pts.distances(rows)
            close.append(where is not None)
            if plain:
                out[..., rows, :] = torch.softmax(d.mul_(-unit), -1) @ vd
                continue
            extra = _extra(bias, mask, rows, n, q.dtype, q.device)
            w, top = _weights(d, least, unit, extra)
            acc = w @ v1
            total = acc[..., p:]
            empty = total == 0
            out[..., rows, :] = torch.where(empty, torch.zeros_like(acc[..., :p]),
                                            acc[..., :p] / torch.where(empty, 1.0, total))
            tops[..., rows] = top[..., 0]
            totals[..., rows] = total[..., 0]
        ctx.mask = mask
        ctx.plain = plain
        ctx.close = close
        ctx.mark_non_differentiable(totals)
        ctx.save_for_backward(q, k, v, bias, out, tops, totals, unit)
        return out, totals

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, _: Any) -> tuple[torch.Tensor | None, ...]:
        q, k, v, bias, out, tops, totals, unit = ctx.saved_tensors
        need_q, need_k, need_v, need_b = ctx.needs_input_grad[:4]
        lead, m, n, e = q.shape[:-2], q.shape[-2], k.shape[-2], q.shape[-1]
        pts = _Points(q, k, unit)
        inv = torch.where(totals == 0, torch.zeros_like(totals),
                          1.0 / torch.where(totals == 0, 1.0, totals))[..., None]
        # rows of [g, -g.out] / total times [v, 1]^T: (g.v_j - g.out_i) / total, so that
        # dS = exp(s - top) * that, and dv = exp(s - top)^T (g / total); torch's softmax
        # gives the normalised weights at once
        g_out = g_out if ctx.plain else g_out * inv
        g1 = torch.cat([g_out, -(g_out * out).sum(-1, keepdim=True)], -1)
        v1 = torch.cat([v.detach(), torch.ones_like(v[..., :1])], -1)
        shift = tops[..., None]
        dq = torch.zeros_like(pts.q) if need_q else None
        dk = torch.zeros_like(pts.k) if need_k else None
        dv = torch.zeros_like(v) if need_v else None
        db = torch.zeros(*lead, m, n, dtype=q.dtype, device=q.device) if need_b else None
        mb = _rows(tuple(lead), m, n, q.element_size())
        for block, r0 in enumerate(range(0, m, mb)):
            rows = slice(r0, min(r0 + mb, m))
            d, where, positive, _ = pts.distances(rows, check=ctx.close[block])
            if ctx.plain:
                w = torch.softmax(d * -unit, -1)
            else:
                extra = _extra(bias, ctx.mask, rows, n, q.dtype, q.device)
                s = (d * -unit if extra is None else torch.addcmul(extra, d, unit, value=-1.0))
                w = s.sub_(shift[..., rows, :]).exp_()
            if dv is not None:
                dv += w.mT @ g_out[..., rows, :]
            ds = (g1[..., rows, :] @ v1.mT).mul_(w)
            if db is not None:
                db[..., rows, :] = ds
            if need_q or need_k:
                _point_gradients(ds, d, where, positive, pts, rows, dq, dk, e)
        if db is not None and bias is not None:
            db = db.sum_to_size(bias.shape)
        return dq, dk, dv, db, None


def _point_gradients(ds: torch.Tensor, d: torch.Tensor, where: _Close, positive: bool,
                     pts: _Points, rows: slice, dq: torch.Tensor | None,
                     dk: torch.Tensor | None, e: int) -> None:
    """Add a block's gradients of the scores ``-unit d`` to ``dq`` and ``dk`` (in place).

    ``W = dS / d``: ``dq = -(rowsum(W) q - W k)``, ``dk = W^T q - colsum(W) k``,
    the sums by the products with ``[k, 1]`` and ``[q, 1]``; close pairs from
    their differences.
    """
    close = None
    if where is not None:
        dc = d[where]
        close = torch.where(dc > 0, ds[where] / torch.where(dc > 0, dc, 1.0),
                            torch.zeros_like(dc))
    if positive:  # every pair at distance 0 is a close one
        w = ds.div_(d)
    else:
        w = torch.where(d > 0, ds / torch.where(d > 0, d, 1.0), torch.zeros_like(d))
    if where is not None:
        w[where] = 0.0
    qb = pts.q[..., rows, :]
    if dq is not None:
        t = w @ pts.k1
        dq[..., rows, :] += t[..., :e] - t[..., e:] * qb
    if dk is not None:
        u = w.mT @ pts.q1[..., rows, :]
        dk += u[..., :e] - u[..., e:] * pts.k
    if where is not None and close is not None:
        part = close[:, None] * (qb[where[:-1]] - pts.k[(*where[:-2], where[-1])])
        if dq is not None:
            dq.index_put_((*where[:-2], where[-2] + rows.start), -part, accumulate=True)
        if dk is not None:
            dk.index_put_((*where[:-2], where[-1]), part, accumulate=True)


def smooth_distance(q: torch.Tensor, k: torch.Tensor, values: torch.Tensor, *,
                    mask: BlockMask | None = None, bias: torch.Tensor | None = None,
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Laplacian smoothing ``softmax(bias - ||q - k||) v`` of every problem, differentiable.

    Parameters
    ----------
    q : torch.Tensor of shape (..., m, e)
        Queries in the kernel's coordinates (divided by the bandwidth).
    k : torch.Tensor of shape (..., n, e)
        Keys, same leading dimensions.
    values : torch.Tensor of shape (..., n, p)
        Values (the caller centres them).
    mask : BlockMask, optional
        Which keys each query sees.
    bias : torch.Tensor, optional
        Additive log-weights broadcastable to ``(..., m, n)``; ``-inf`` hides.

    Returns
    -------
    out : torch.Tensor of shape (..., m, p)
        Zero for rows that see no key.
    total : torch.Tensor of shape (..., m)
        The rows' normaliser relative to their largest weight (0: no key seen).

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(2, 5, 3), torch.randn(2, 7, 3), torch.randn(2, 7, 4)
    >>> out, _ = smooth_distance(q, k, v)
    >>> ref = torch.softmax(-torch.cdist(q, k), -1) @ v
    >>> bool(torch.allclose(out, ref, atol=1e-5))
    True
    """
    if bias is not None:
        bias = bias.expand(*bias.shape[:-2], q.shape[-2], k.shape[-2])
    out, total = _DistanceSmooth.apply(q, k, values, bias, mask)
    return out, total
