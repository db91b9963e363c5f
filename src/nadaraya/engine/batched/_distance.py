"""The batched engine's distance path: Laplacian attention by matrix products, forward and backward.

The Laplacian's scores ``-||q - k||`` have no dot-product form, but their
squared distances do: ``||q||^2 + ||k||^2 - 2 q.k``, one matrix product per
tile of scores. :class:`_DistanceSmooth` computes, tile by tile (a few query
rows and all keys of one problem, in cache: :mod:`._tiling`), in worker
threads::

    s = bias - ||q - k||,   P = softmax(s),   out = P v

keeping only the rows' maximum score and normaliser for the backward pass,
which recomputes each tile's distances and weights and forms every gradient
by matrix products::

    dS = P * (g . v_j - g . out_i)            W = dS / ||q_i - k_j||   (0 where q_i = k_j)
    dq = -(rowsum(W) q - W k)     dk = W^T q - colsum(W) k     dv = P^T g

Per tile that is two products forward and five backward, the elementwise
steps between them on the tile in cache (``exp(s - max s)`` taken as
``exp2``, torch's faster one); the keys' and values' gradients are summed
transposed (``[q, 1]^T W``, ``g^T P``: the faster products), and a worker
reuses its scratch tiles, so no step touches fresh memory.

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
from ._tiling import _blocks, _compiling, _extra, _map, _Scratch, _Segment, _tiles

__all__: list[str] = []

_Close = tuple[torch.Tensor, ...] | None  # indices of close pairs
_LOG2E = math.log2(math.e)

# pairs with ||q - k||^2 below this fraction of ||q||^2 + ||k||^2 are measured directly
_CLOSE = 0.25
# beyond this fraction of close pairs in a block, the whole block is measured directly
_MOSTLY_CLOSE = 0.125


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


def _squared(r2: torch.Tensor, qb: torch.Tensor, k: torch.Tensor, qn: torch.Tensor,
             kn: torch.Tensor, top: torch.Tensor, check: bool,
             ) -> tuple[torch.Tensor, _Close, torch.Tensor | None]:
    """Squared distances ``(g, mb, n)`` of scaled points, the close pairs' indices, and
    the rows' least squared distance where no pair was measured again (else None).

    ``r2``: the product of ``[q, 1, ||q||^2]`` and ``[-2 k, ||k||^2, 1]``, in
    place. A tile whose rows' least distance is beyond a quarter of
    ``||q||^2`` plus the largest ``||k||^2`` of its problem (``top``) has no
    close pair, which one pass over the rows' minima shows (the usual case);
    otherwise the close pairs (every pair at distance 0 among them) are
    measured from their differences, or the whole tile directly where they
    are many, and their indices returned (None where there is none: every
    distance is then positive). ``check=False``: the caller knows the tile
    has no close pair (the forward pass found none).
    """
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


class _Points:
    """Scaled points of a group of problems ``(g, ., e)``, their augmented forms.

    ``qa = [q, 1, ||q||^2]`` and ``ka = [-2 k, ||k||^2, 1]`` give the squared
    distances by one product; ``q1 = [q, 1]`` the keys' gradients with their
    sums. Points are divided by ``unit`` (see :func:`_unit`).
    """

    def __init__(self, q: torch.Tensor, k: torch.Tensor, unit: torch.Tensor | None = None,
                 ) -> None:
        g, m, e = q.shape
        n = k.shape[-2]
        self.unit = _unit(q, k) if unit is None else unit
        self.qa = q.new_empty(g, m, e + 2)
        self.ka = k.new_empty(g, n, e + 2)
        # (slices written by assignment: torch.compile takes no strided out=)
        self.qa[..., :e] = q / self.unit
        self.q, self.k = self.qa[..., :e], k / self.unit
        self.q1 = self.qa[..., :e + 1]
        self.qa[..., e] = 1.0
        self.ka[..., e + 1] = 1.0
        self.qa[..., e + 1] = torch.linalg.vecdot(self.q, self.q)
        self.ka[..., e] = torch.linalg.vecdot(self.k, self.k)
        self.ka[..., :e] = -2.0 * self.k
        self.qn, self.kn = self.qa[..., e + 1], self.ka[..., e]  # (g, m), (g, n)
        # (g, 1, 1); no key: 0
        self.top = (self.kn.amax(-1) if n else self.kn.new_zeros(g))[:, None, None]

    def distances(self, rows: slice, scratch: _Scratch, check: bool = True,
                  ) -> tuple[torch.Tensor, _Close, torch.Tensor | None]:
        """Scaled distances ``(g, mb, n)`` of a tile (in the first scratch tile, or
        a new one), its close pairs (None: every distance is positive), and the
        rows' least distance (or None)."""
        qa = self.qa[:, rows]
        g, mb, n = qa.shape[0], qa.shape[1], self.ka.shape[1]
        r2 = torch.bmm(qa, self.ka.mT, out=scratch(0, g, mb, n))
        r2, where, least = _squared(r2, self.q[:, rows], self.k, self.qn[:, rows], self.kn,
                                    self.top, check)
        return r2.sqrt_(), where, None if least is None else least.sqrt_()


def _exp(x: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """``exp(scale x)`` in place, as ``2**(scale log2(e) x)`` (torch's ``exp2`` is the
    faster; the product's rounding is that of the argument's own, ``eps |x|``)."""
    return x.mul_(scale * _LOG2E).exp2_()


def _weights(d: torch.Tensor, least: torch.Tensor | None, unit: torch.Tensor,
             extra: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``exp(s - top)`` (in the place of ``d``) and ``top`` (0 for a row that sees
    nothing) of ``s = extra - unit d``."""
    if extra is None:  # top = -unit min d: exp(unit (min d - d))
        nearest = d.amin(-1, keepdim=True) if least is None else least
        return _exp(torch.sub(nearest, d, out=d), unit), nearest * -unit
    s = d.mul_(-unit).add_(extra)  # (the product is exact: unit is a power of two)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    return _exp(s.sub_(top), 1.0), top


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
        problems, e = math.prod(lead), q.shape[-1]
        q3, k3 = q.detach().reshape(problems, m, e), k.detach().reshape(problems, n, e)
        v3 = v.detach().reshape(problems, n, p)
        tiles = _tiles(problems, m, n, q.element_size())
        largest = max((ps.stop - ps.start) * (rows.stop - rows.start) * n for ps, rows in tiles) \
            if tiles else 0
        new = v.new_empty if tiles else v.new_zeros  # every row is in a tile; no key: 0
        out, tops, totals = new(problems, m, p), new(problems, m, 1), new(problems, m, 1)
        units = q3.new_ones(problems, 1, 1)  # the forward's, for the backward
        bd = bias.detach() if bias is not None else None

        scratches: dict[int, _Scratch] = {}

        def run(block: list[_Segment]) -> list[list[bool]]:
            flags = []
            scratch = _Scratch.of(scratches, 1, largest, q3)
            with torch.no_grad():
                for ps, tile_rows, _ in block:
                    close = []
                    pts = _Points(q3[ps], k3[ps])
                    units[ps] = pts.unit
                    vg = v3[ps]
                    for rows in tile_rows:
                        d, where, least = pts.distances(rows, scratch)
                        close.append(where is not None)
                        extra = _extra(bd, mask, lead, ps, rows, n, q.dtype, q.device)
                        w, top = _weights(d, least, pts.unit, extra)
                        acc = torch.bmm(w, vg)
                        total = w.sum(-1, keepdim=True)
                        if extra is None:  # every row sees its nearest key, of weight 1
                            out[ps, rows] = acc / total
                        else:
                            empty = total == 0
                            out[ps, rows] = torch.where(
                                empty, 0.0, acc / torch.where(empty, 1.0, total))
                        tops[ps, rows] = top
                        totals[ps, rows] = total
                    flags.append(close)
            return flags

        blocks = _blocks(tiles)
        ctx.blocks, ctx.largest = blocks, largest
        ctx.close = _map(run, blocks, q.device)
        ctx.mask = mask
        totals = totals.view(*lead, m)
        ctx.mark_non_differentiable(totals)
        ctx.save_for_backward(q, k, v, bias, out, tops, totals, units)
        return out.view(*lead, m, p), totals

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, _: Any) -> tuple[torch.Tensor | None, ...]:
        q, k, v, bias, out, tops, totals, units = ctx.saved_tensors
        need_q, need_k, need_v, need_b = ctx.needs_input_grad[:4]
        lead, m, n, e, p = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        problems = math.prod(lead)
        q3, k3 = q.detach().reshape(problems, m, e), k.detach().reshape(problems, n, e)
        v3, g3 = v.detach().reshape(problems, n, p), g_out.reshape(problems, m, p)
        totals = totals.reshape(problems, m, 1)
        bd = bias.detach() if bias is not None else None
        blocks: list[list[_Segment]] = ctx.blocks
        # a segment that holds every row of its problems writes their keys' gradients;
        # the others return theirs, added here
        summed = bool(blocks) and all(own for block in blocks for _, _, own in block)
        dq = (q.new_empty if blocks else q.new_zeros)(problems, m, e) if need_q else None
        dk = (k.new_empty if summed else k.new_zeros)(problems, n, e) if need_k else None
        dv = (v.new_empty if summed else v.new_zeros)(problems, n, p) if need_v else None
        db = q.new_zeros(problems, m, n) if need_b else None

        scratches: dict[int, _Scratch] = {}

        def run(job: tuple[list[_Segment], list[list[bool]]],
                ) -> list[tuple[slice, torch.Tensor | None, torch.Tensor | None]]:
            block, flags = job
            parts = []
            scratch = _Scratch.of(scratches, 3, ctx.largest, q3)
            with torch.no_grad():
                for (ps, tile_rows, own), close in zip(block, flags, strict=True):
                    pts = _Points(q3[ps], k3[ps], units[ps])
                    g = ps.stop - ps.start
                    # transposed sums (the faster products): the keys' gradients as
                    # [q, 1]^T W, turned into dk at the end, and the values' as g^T P
                    ub = None if dk is None else q3.new_zeros(g, e + 1, n)
                    vb = None if dv is None else q3.new_zeros(g, p, n)
                    # (g.v_j - g.out_i) / total, so that dS = exp(s - top) * that, and
                    # dv = exp(s - top)^T (g / total)
                    t = totals[ps]
                    gs = g3[ps] * torch.where(t == 0, 0.0, 1.0 / torch.where(t == 0, 1.0, t))
                    centre = torch.linalg.vecdot(gs, out[ps]).neg_()[..., None]
                    vt = v3[ps].mT
                    shift = tops[ps].neg()  # unit min d where nothing is hidden
                    for rows, check in zip(tile_rows, close, strict=True):
                        d, where, _ = pts.distances(rows, scratch, check=check)
                        shape = d.shape
                        extra = _extra(bd, ctx.mask, lead, ps, rows, n, q.dtype, q.device)
                        w = scratch(1, *shape)
                        if extra is None:  # as the forward: exp(unit (min d - d))
                            _exp(torch.sub(shift[:, rows] / pts.unit, d, out=w), pts.unit)
                        else:
                            torch.mul(d, -pts.unit, out=w).add_(extra).add_(shift[:, rows])
                            _exp(w, 1.0)
                        if vb is not None:
                            vb.baddbmm_(gs[:, rows].mT, w)
                        ds = torch.baddbmm(centre[:, rows], gs[:, rows], vt,
                                           out=scratch(2, *shape)).mul_(w)
                        if db is not None:
                            db[ps, rows] = ds
                        if dq is not None or ub is not None:
                            _point_gradients(ds, d, where, pts, rows,
                                             None if dq is None else dq[ps, rows], ub)
                    kb = None
                    if ub is not None and dk is not None:
                        kb = torch.addcmul(ub[:, :e].mT, ub[:, e:].mT, pts.k, value=-1.0)
                        kb = dk[ps].copy_(kb) if own else kb
                    if vb is not None and dv is not None:
                        vb = dv[ps].copy_(vb.mT) if own else vb.mT
                    if not own:
                        parts.append((ps, kb, vb))
            return parts

        jobs = list(zip(blocks, ctx.close, strict=True))
        for parts in _map(run, jobs, q.device):
            for ps, kb, vb in parts:
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
    rows), ``[q, 1]^T W`` added to ``dk`` (``(g, e + 1, n)``, the group's keys).

    ``W = dS / d``: ``dq = W k - rowsum(W) q``, ``dk = W^T q - colsum(W) k``,
    the column sums by the product with ``[q, 1]``; close pairs
    (every pair at distance 0 among them: gradient 0 there) from their
    differences, added to the first ``e`` columns of ``dk``. ``ds`` is
    overwritten.
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
        dq.copy_(torch.addcmul(torch.bmm(w, pts.k), w.sum(-1, keepdim=True), qb, value=-1.0))
    if dk is not None:
        dk.baddbmm_(pts.q1[:, rows].mT, w)
    if where is not None and close is not None:
        part = close[:, None] * (qb[where[:-1]] - pts.k[where[0], where[-1]])
        if dq is not None:
            dq.index_put_(where[:-1], -part, accumulate=True)
        if dk is not None:
            dk[:, :e].mT.index_put_((where[0], where[-1]), part, accumulate=True)


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
