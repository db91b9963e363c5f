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

from .._threads import map_blocks
from ..autograd import BlockMask
from ..autograd._problem import working_config

__all__: list[str] = []

_Close = tuple[torch.Tensor, ...] | None  # indices of close pairs

# pairs with ||q - k||^2 below this fraction of ||q||^2 + ||k||^2 are measured directly
_CLOSE = 0.25
# beyond this fraction of close pairs in a block, the whole block is measured directly
_MOSTLY_CLOSE = 0.125
# scores per tile: the elementwise steps between two products stay in cache
_TILE = 2**18


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
             ) -> tuple[torch.Tensor, _Close, torch.Tensor | None]:
    """Squared distances ``(g, mb, n)`` of scaled points, the close pairs' indices, and
    the rows' least squared distance where no pair was measured again (else None).

    ``qa = [q, ||q||^2, 1]`` and ``ka = [-2 k, 1, ||k||^2]`` give them by one
    product. A tile whose rows' least distance is beyond a quarter of
    ``||q||^2`` plus the largest ``||k||^2`` of its problem (``top``) has no
    close pair, which one pass over the rows' minima shows (the usual case);
    otherwise the close pairs (every pair at distance 0 among them) are
    measured from their differences, or the whole tile directly where they
    are many, and their indices returned (None where there is none: every
    distance is then positive). ``check=False``: the caller knows the tile
    has no close pair (the forward pass found none).
    """
    r2 = torch.bmm(qa, ka.mT)
    if _compiling() or not r2.numel():
        return r2.clamp_(min=0.0), None, None
    if not check:
        return r2, None, None
    least = r2.amin(-1, keepdim=True)
    if bool((least > _CLOSE * (qn[..., None] + top)).all()):
        return r2, None, least
    close = torch.le(r2, _CLOSE * (qn[..., None] + kn[..., None, :]))
    where = close.nonzero(as_tuple=True)
    if where[0].numel() == 0:
        return r2, None, None
    if where[0].numel() > _MOSTLY_CLOSE * close.numel():
        direct = torch.cdist(qb, k, compute_mode="donot_use_mm_for_euclid_dist")
        return direct.square_(), where, None
    diff = qb[where[:-1]] - k[where[0], where[-1]]
    r2[where] = diff.square().sum(-1)
    return r2.clamp_(min=0.0), where, None


def _tiles(problems: int, m: int, n: int, itemsize: int) -> list[tuple[slice, slice]]:
    """The tiles ``(problems, rows)`` of the score matrices, about ``_TILE`` scores each.

    All keys of a row lie in one tile; a tile takes as many rows of one
    problem as fit (every row of several problems where one problem's rows
    are fewer), within the working-memory budget.
    """
    if not n:
        return []
    memory = working_config().working_memory * 2**20
    size = max(1, min(_TILE, int(memory // (itemsize * 6))))
    mb = max(1, min(m, size // max(1, n)))
    per = max(1, min(problems, size // max(1, mb * n))) if mb == m else 1
    return [(slice(p0, min(p0 + per, problems)), slice(r0, min(r0 + mb, m)))
            for p0 in range(0, problems, per) for r0 in range(0, m, mb)]


def _blocks(tiles: list[tuple[slice, slice]]) -> list[tuple[list[tuple[slice, slice]], bool]]:
    """The tiles in blocks for the worker threads, and whether each block holds every
    tile of its problems (its keys' gradients are then its own to sum).

    A block is the tiles of a group of problems; where the groups are fewer than
    twice the threads, the rows of each are split among several blocks.
    """
    groups: dict[int, list[tuple[slice, slice]]] = {}
    for tile in tiles:
        groups.setdefault(tile[0].start, []).append(tile)
    parts = max(1, -(-2 * torch.get_num_threads() // max(1, len(groups))))
    blocks = []
    for group in groups.values():
        size = -(-len(group) // min(parts, len(group)))
        chunks = [group[i:i + size] for i in range(0, len(group), size)]
        blocks += [(chunk, len(chunks) == 1) for chunk in chunks]
    return blocks


def _pick(t: torch.Tensor | None, lead: tuple[int, ...], ps: slice) -> torch.Tensor | None:
    """The problems ``ps`` (of the flattened leading dimensions) of ``(..., mb, n)``."""
    if t is None or t.dim() == 2:
        return t  # one block for every problem
    index = torch.unravel_index(torch.arange(ps.start, ps.stop, device=t.device), lead)
    return t.expand(*lead, *t.shape[-2:])[index]


def _extra(bias: torch.Tensor | None, mask: BlockMask | None, lead: tuple[int, ...],
           ps: slice, rows: slice, n: int, dtype: torch.dtype, device: torch.device,
           ) -> torch.Tensor | None:
    """The additive term of a tile: the bias, ``-inf`` where the mask hides."""
    extra = _pick(bias[..., rows, :], lead, ps) if bias is not None else None
    if mask is None:
        return extra
    visible = _pick(mask.block(rows, slice(0, n)), lead, ps)
    shown = extra if extra is not None else torch.zeros((), dtype=dtype, device=device)
    return torch.where(visible, shown, torch.tensor(-math.inf, dtype=dtype, device=device))


class _Points:
    """Scaled points of a group of problems ``(g, ., e)``, their augmented forms.

    ``qa = [q, 1, ||q||^2]`` and ``ka = [-2 k, ||k||^2, 1]`` give the squared
    distances by one product; ``q1 = [q, 1]`` and ``k1 = [k, 1]`` the
    gradients' sums. Points are divided by ``unit`` (see :func:`_unit`).
    """

    def __init__(self, q: torch.Tensor, k: torch.Tensor) -> None:
        g, m, e = q.shape
        n = k.shape[-2]
        self.unit = _unit(q, k)
        self.qa = q.new_empty(g, m, e + 2)
        self.ka = k.new_empty(g, n, e + 2)
        self.k1 = k.new_empty(g, n, e + 1)
        self.q = torch.div(q, self.unit, out=self.qa[..., :e])
        self.k = torch.div(k, self.unit, out=self.k1[..., :e])
        self.q1 = self.qa[..., :e + 1]
        self.qa[..., e] = 1.0
        self.k1[..., e] = 1.0
        self.ka[..., e + 1] = 1.0
        self.qn = torch.linalg.vecdot(self.q, self.q, out=self.qa[..., e + 1])  # (g, m)
        self.kn = torch.linalg.vecdot(self.k, self.k, out=self.ka[..., e])  # (g, n)
        torch.mul(self.k, -2.0, out=self.ka[..., :e])
        # (g, 1, 1); no key: 0
        self.top = (self.kn.amax(-1) if n else self.kn.new_zeros(g))[:, None, None]

    def distances(self, rows: slice, check: bool = True,
                  ) -> tuple[torch.Tensor, _Close, torch.Tensor | None]:
        """Scaled distances ``(g, mb, n)`` of a tile, its close pairs (None: every
        distance is positive), and the rows' least distance (or None)."""
        r2, where, least = _squared(self.qa[:, rows], self.ka, self.q[:, rows], self.k,
                                    self.qn[:, rows], self.kn, self.top, check)
        return r2.sqrt_(), where, None if least is None else least.sqrt_()


def _augmented(x: torch.Tensor, last: torch.Tensor | float) -> torch.Tensor:
    """``[x, last]`` along the last dimension (``last`` of shape ``x.shape[:-1]``)."""
    out = x.new_empty(*x.shape[:-1], x.shape[-1] + 1)
    out[..., :-1] = x
    out[..., -1] = last
    return out


def _weights(d: torch.Tensor, least: torch.Tensor | None, unit: torch.Tensor,
             extra: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``exp(s - top)`` (in the place of ``d``) and ``top`` (0 for a row that sees
    nothing) of ``s = extra - unit d``."""
    if extra is None:  # top = -unit min d
        top = (d.amin(-1, keepdim=True) if least is None else least) * -unit
        return torch.addcmul(top.neg(), d, unit, value=-1.0, out=d).exp_(), top
    s = torch.addcmul(extra, d, unit, value=-1.0, out=d)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    return s.sub_(top).exp_(), top


class _DistanceSmooth(torch.autograd.Function):
    """``softmax(bias - unit d) v`` by tiles, its backward by matrix products.

    The forward keeps, per row, the largest score ``top`` and the total
    ``sum exp(s - top)``; the backward recomputes ``exp(s - top)`` and folds
    ``1 / total`` into the incoming gradient's rows, so the weights are never
    normalised tile by tile. It also keeps which tiles held close pairs: the
    backward measures only those again. The tiles run in worker threads
    (:func:`~nadaraya.engine._threads.map_blocks`), each operation of a
    tile on one thread, in cache.
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                bias: torch.Tensor | None, mask: BlockMask | None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        lead, m, n, p = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2], v.shape[-1]
        problems = math.prod(lead)
        e = q.shape[-1]
        q3, k3 = q.detach().reshape(problems, m, e), k.detach().reshape(problems, n, e)
        v3 = v.detach().reshape(problems, n, p)
        blocks = _blocks(_tiles(problems, m, n, q.element_size()))
        new = v.new_empty if blocks else v.new_zeros  # every row is in a tile; no key: 0
        out, tops, totals = new(problems, m, p), new(problems, m, 1), new(problems, m, 1)
        bd = bias.detach() if bias is not None else None

        def run(block: tuple[list[tuple[slice, slice]], bool]) -> list[bool]:
            close = []
            ps = block[0][0][0]
            with torch.no_grad():
                pts = _Points(q3[ps], k3[ps])
                v1 = _augmented(v3[ps], 1.0)  # the totals by the product
                for _, rows in block[0]:
                    d, where, least = pts.distances(rows)
                    close.append(where is not None)
                    extra = _extra(bd, mask, lead, ps, rows, n, q.dtype, q.device)
                    w, top = _weights(d, least, pts.unit, extra)
                    acc = torch.bmm(w, v1)
                    total = acc[..., p:]
                    if extra is None:  # every row sees its nearest key, of weight 1
                        torch.div(acc[..., :p], total, out=out[ps, rows])
                    else:
                        empty = total == 0
                        out[ps, rows] = torch.where(empty, 0.0, acc[..., :p] / torch.where(
                            empty, 1.0, total))
                    tops[ps, rows] = top
                    totals[ps, rows] = total
            return close

        ctx.blocks = blocks
        ctx.close = map_blocks(run, blocks, device=q.device)
        ctx.mask = mask
        totals = totals.view(*lead, m)
        ctx.mark_non_differentiable(totals)
        ctx.save_for_backward(q, k, v, bias, out, tops, totals)
        return out.view(*lead, m, p), totals

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, _: Any) -> tuple[torch.Tensor | None, ...]:
        q, k, v, bias, out, tops, totals = ctx.saved_tensors
        need_q, need_k, need_v, need_b = ctx.needs_input_grad[:4]
        lead, m, n, e, p = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        problems = math.prod(lead)
        q3, k3 = q.detach().reshape(problems, m, e), k.detach().reshape(problems, n, e)
        v3, g3 = v.detach().reshape(problems, n, p), g_out.reshape(problems, m, p)
        totals = totals.reshape(problems, m, 1)
        bd = bias.detach() if bias is not None else None
        blocks: list[tuple[list[tuple[slice, slice]], bool]] = ctx.blocks
        # a block that holds every row of its problems sums their keys' gradients in
        # place; the others return theirs, added here
        summed = all(own for _, own in blocks) and bool(blocks)
        dq = (q.new_empty if blocks else q.new_zeros)(problems, m, e) if need_q else None
        dk = (k.new_empty if summed else k.new_zeros)(problems, n, e) if need_k else None
        dv = (v.new_empty if summed else v.new_zeros)(problems, n, p) if need_v else None
        db = q.new_zeros(problems, m, n) if need_b else None

        def run(job: tuple[tuple[list[tuple[slice, slice]], bool], list[bool]],
                ) -> tuple[slice, torch.Tensor | None, torch.Tensor | None] | None:
            (tiles, own), close = job
            ps = tiles[0][0]
            with torch.no_grad():
                pts = _Points(q3[ps], k3[ps])
                kb = None if dk is None else dk[ps].zero_() if own else torch.zeros_like(dk[ps])
                vb = None if dv is None else dv[ps].zero_() if own else torch.zeros_like(dv[ps])
                # rows of [g, -g.out] / total times [v, 1]^T: (g.v_j - g.out_i) / total,
                # so that dS = exp(s - top) * that, and dv = exp(s - top)^T (g / total)
                t = totals[ps]
                gs = g3[ps] * torch.where(t == 0, 0.0, 1.0 / torch.where(t == 0, 1.0, t))
                g1 = _augmented(gs, torch.linalg.vecdot(gs, out[ps]).neg_())
                v1 = _augmented(v3[ps], 1.0)
                shift = tops[ps].neg()
                for (_, rows), check in zip(tiles, close, strict=True):
                    d, where, _ = pts.distances(rows, check=check)
                    extra = _extra(bd, ctx.mask, lead, ps, rows, n, q.dtype, q.device)
                    if extra is None:
                        w = torch.addcmul(shift[:, rows], d, pts.unit, value=-1.0).exp_()
                    else:
                        w = torch.addcmul(extra, d, pts.unit, value=-1.0).add_(
                            shift[:, rows]).exp_()
                    if vb is not None:
                        vb.baddbmm_(w.mT, gs[:, rows])
                    ds = torch.bmm(g1[:, rows], v1.mT).mul_(w)
                    if db is not None:
                        db[ps, rows] = ds
                    if dq is not None or kb is not None:
                        _point_gradients(ds, d, where, pts, rows,
                                         None if dq is None else dq[ps, rows], kb)
            return None if own else (ps, kb, vb)

        parts = map_blocks(run, list(zip(blocks, ctx.close, strict=True)), device=q.device)
        for part in parts:
            if part is not None:
                ps, kb, vb = part
                if kb is not None and dk is not None:
                    dk[ps] += kb
                if vb is not None and dv is not None:
                    dv[ps] += vb
        if db is not None and bias is not None:
            db = db.view(*lead, m, n).sum_to_size(bias.shape)
        return (None if dq is None else dq.view(q.shape), None if dk is None else dk.view(k.shape),
                None if dv is None else dv.view(v.shape), db, None)


def _point_gradients(ds: torch.Tensor, d: torch.Tensor, where: _Close, pts: _Points,
                     rows: slice, dq: torch.Tensor | None, dk: torch.Tensor | None) -> None:
    """A tile's gradients of the scores ``-unit d``: written to ``dq`` (the tile's
    rows), added to ``dk`` (the group's keys).

    ``W = dS / d``: ``dq = W k - rowsum(W) q``, ``dk = W^T q - colsum(W) k``,
    the sums by the products with ``[k, 1]`` and ``[q, 1]``; close pairs
    (every pair at distance 0 among them: gradient 0 there) from their
    differences. ``ds`` is overwritten.
    """
    e = pts.q.shape[-1]
    close = None
    if where is not None:
        dc = d[where]
        close = torch.where(dc > 0, ds[where] / torch.where(dc > 0, dc, 1.0),
                            torch.zeros_like(dc))
    if where is None and _compiling():  # not measured again: a distance may be 0
        w = torch.where(d > 0, ds / torch.where(d > 0, d, 1.0), torch.zeros_like(d))
    else:  # every distance outside the close pairs is positive
        w = ds.div_(d)
    if where is not None:
        w[where] = 0.0
    qb = pts.q[:, rows]
    if dq is not None:
        t = torch.bmm(w, pts.k1)
        torch.addcmul(t[..., :e], t[..., e:], qb, value=-1.0, out=dq)
    if dk is not None:
        u = torch.bmm(w.mT, pts.q1[:, rows])
        dk.add_(torch.addcmul(u[..., :e], u[..., e:], pts.k, value=-1.0))
    if where is not None and close is not None:
        part = close[:, None] * (qb[where[:-1]] - pts.k[where[0], where[-1]])
        if dq is not None:
            dq.index_put_(where[:-1], -part, accumulate=True)
        if dk is not None:
            dk.index_put_((where[0], where[-1]), part, accumulate=True)


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
