"""The grid engine's inner loop: one tile of queries, the offsets folded in.

See :mod:`nadaraya.engine._grid` for the method. A :class:`Plan` holds the
padded inputs; a :class:`Tile` accumulates the online log-sum-exp state of
one block of rows, either in the bounded pass (a fixed offset, the kernel's
upper bound, or per query the window's largest log-weight on the grouped
path) or in the exact pass (a running maximum per query). Work arrays are
kept per tile and reused from offset to offset.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._job import exp_floor
from ._state import SmoothState

__all__ = ["Group", "Plan", "Tile", "power", "run_tile", "weak", "window"]


def window(x: torch.Tensor, start: Sequence[int], size: Sequence[int]) -> torch.Tensor:
    if len(start) == 2:
        a, b = start
        return x[..., a:a + size[0], b:b + size[1]]
    lead = x.ndim - len(start)
    index = (slice(None),) * lead + tuple(slice(a, a + n) for a, n in zip(start, size, strict=True))
    return x[index]


@dataclass
class Group:
    """Offsets that differ only in their last coordinate, ``o = (*prefix, lo + k)``.

    Their keys are one strided view of an array (a window sliding along the
    last axis), so the scores of all of them are one operation, and the
    moments one matrix product with the coefficients (zero columns for the
    ``k`` not in the window).
    """

    prefix: tuple[int, ...]
    lo: int
    width: int                    # K = hi - lo + 1
    last: torch.Tensor            # (K,) the last coordinates lo..hi
    value_coef: torch.Tensor      # (n_mono, K) scale_k o_k^a
    weight_coef: torch.Tensor     # (n_mono2 + 1, K) scale_k o_k^a, then scale_k


@dataclass
class Plan:
    """The padded inputs of one grid smoothing and the offsets' schedule.

    Arrays are padded by ``pads`` on both sides of every grid axis so that
    every offset's view of every tile is a plain slice.
    """

    shape: tuple[int, ...]
    pads: tuple[int, ...]
    values: torch.Tensor          # (p, *padded)
    guide: torch.Tensor | None    # (c', *padded) L y with L^T L = Q_v; None when Q_v = 0
    guide_scale: float            # squared differences of the guide are multiplied by it
    valid: torch.Tensor | None    # (*padded) bool, None when every key is valid
    logw: torch.Tensor | None     # (*padded)
    field: torch.Tensor | None    # (d, d, *padded) per-key Q_x
    shift: torch.Tensor | None    # (d, *padded) sub-pixel key positions
    qx: torch.Tensor              # (d, d)
    patch: list[list[float]] | torch.Tensor | None  # separable factors or full weights
    prad: tuple[int, ...]
    noise: float
    bound: float
    zero: bool
    pairs: list[tuple[int, ...]]
    singles: list[tuple[int, ...]]
    ext: tuple[int, ...]
    mono: list[tuple[int, ...]]
    mono2: list[tuple[int, ...]]
    symmetric: bool
    counts: torch.Tensor | None     # (*padded) valid as numbers, for degree 0 with hidden keys
    clamp: bool                     # whether scores can fall below the exponent floor
    groups: list[Group] | None = None   # the grouped path (no guide, no shifts)
    keylog: torch.Tensor | None = None  # (*padded) log w (grouped path)
    top: torch.Tensor | None = None     # grid_shape: per-query bound of keylog (grouped path)
    keep: torch.Tensor | None = None    # (*padded) valid as numbers (grouped path)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def p(self) -> int:
        return self.values.shape[0]


Scratch = Callable[[str, Sequence[int]], torch.Tensor]


def _sqnorm(a: torch.Tensor, b: torch.Tensor, scratch: Scratch) -> torch.Tensor:
    """``sum_c (a_c - b_c)^2`` over the leading (channel) axis, in a scratch array."""
    out = scratch("r2", a.shape[1:])
    torch.sub(a[0], b[0], out=out)
    out.mul_(out)
    if a.shape[0] > 1:
        diff = scratch("diff", a.shape[1:])
        for c in range(1, a.shape[0]):
            torch.sub(a[c], b[c], out=diff)
            out.addcmul_(diff, diff)
    return out


def _filter(x: torch.Tensor, patch: Any, prad: Sequence[int], scratch: Scratch) -> torch.Tensor:
    """Correlate ``x`` (grid axes only) with the patch weights, keeping the valid part."""
    d = x.ndim
    if isinstance(patch, list):
        for k, g in enumerate(patch):
            n = x.shape[k] - 2 * prad[k]
            size = list(x.shape)
            size[k] = n
            start = [0] * d
            out = torch.mul(window(x, start, size), g[0], out=scratch(f"filter{k}", size))
            for u in range(1, len(g)):
                start[k] = u
                out.add_(window(x, start, size), alpha=g[u])
            x = out
        return x
    size = [x.shape[k] - 2 * prad[k] for k in range(d)]
    out = None
    for u in itertools.product(*(range(s) for s in patch.shape)):
        w = float(patch[u])
        if w == 0:
            continue
        if out is None:
            out = torch.mul(window(x, u, size), w, out=scratch("filter", size))
        else:
            out.add_(window(x, u, size), alpha=w)
    return out if out is not None else scratch("filter", size).zero_()


class Tile:
    """The queries of one tile of rows and the accumulators of its state.

    The bounded pass (``exact=False``) uses the kernel's upper bound as the
    fixed offset; there a weight that factors as ``exp(-o^T Q_x o)`` times a
    pixel array keeps the constant out of the arrays (a scalar per offset).
    The exact pass keeps a running maximum per query.
    """

    def __init__(self, plan: Plan, rows: tuple[int, int], exact: bool,
                 into: tuple[torch.Tensor, torch.Tensor] | None = None,
                 scratch: dict[Any, torch.Tensor] | None = None) -> None:
        self.plan = plan
        self.a, self.b = rows
        self.size = (self.b - self.a, *plan.shape[1:])
        self.exact = exact
        dev, dt = plan.values.device, plan.values.dtype
        n_mom = plan.p * len(plan.mono) + len(plan.mono2)
        # the fast path: weights multiply the values and add to the total, one
        # offset at a time (degree 0, no per-key weights, fixed offset)
        self.fast = (len(plan.mono) == 1 and plan.logw is None and plan.field is None
                     and plan.shift is None and not exact)
        self.grouped = plan.groups is not None and not exact
        if into is not None and self.fast:
            # accumulate in the caller's arrays: acc (p, *size) and total (*size)
            self.acc, self.total = into[0].zero_(), into[1].zero_()
        elif self.grouped:
            # [acc; total] in one array: the weight moments and the total are
            # adjacent rows, reduced by one matrix product
            store = torch.zeros(n_mom + 1, *self.size, dtype=dt, device=dev)
            self.store, self.acc, self.total = store, store[:n_mom], store[n_mom]
        else:
            self.acc = torch.zeros(n_mom, *self.size, dtype=dt, device=dev)
            self.total = torch.zeros(self.size, dtype=dt, device=dev)
        if exact:
            self.top = torch.full(self.size, -math.inf, dtype=dt, device=dev)
        self._scratch: dict[Any, torch.Tensor] = {} if scratch is None else scratch
        self._zero = torch.zeros((), dtype=dt, device=dev)
        self.floor = exp_floor(dt)
        # scores factor into a per-offset constant and a pixel array
        self.split = (not exact and not plan.noise and plan.field is None
                      and plan.shift is None)
        # the pair-score region: the tile grown by ext on every side
        self.e_start = [self.a - plan.ext[0], *(-e for e in plan.ext[1:])]
        self.e_size = [self.size[k] + 2 * plan.ext[k] for k in range(plan.ndim)]
        self.base = [self.a + plan.pads[0], *plan.pads[1:]]
        self._qx = plan.qx.tolist()
        self._positions: dict[tuple[int, ...], float] = {}

    def scratch(self, name: str, size: Sequence[int]) -> torch.Tensor:
        """A work array of ``size`` kept for the tile's later offsets (its contents are
        overwritten by the next use of the same name)."""
        key = (name, tuple(size))
        buf = self._scratch.get(key)
        if buf is None:
            buf = torch.empty(key[1], dtype=self.plan.values.dtype,
                              device=self.plan.values.device)
            self._scratch[key] = buf
        return buf

    def key_view(self, x: torch.Tensor, o: Sequence[int]) -> torch.Tensor:
        """``x`` (padded) at the keys ``q + o`` of this tile's queries."""
        return window(x, [b + v for b, v in zip(self.base, o, strict=True)], self.size)

    def position(self, o: Sequence[int]) -> float:
        """``o^T Q_x o`` (0 with a per-key field or sub-pixel shifts: added per key)."""
        plan = self.plan
        if plan.field is not None or plan.shift is not None:
            return 0.0
        value = self._positions.get(o)
        if value is None:
            value = float(sum(o[i] * o[j] * self._qx[i][j]
                              for i in range(plan.ndim) for j in range(plan.ndim)))
            self._positions[o] = value
        return value

    def pair_score(self, o: Sequence[int]) -> torch.Tensor | None:
        """The symmetric part of the score of ``(y, y + o)`` on the grown region.

        ``-r^2`` from the value / patch block (and, unless :attr:`split`, the
        position block and the noise offset), clamped at the exponent floor;
        None when it is a constant.
        """
        plan = self.plan
        pos = 0.0 if self.split else self.position(o)
        negated = False
        if plan.guide is None:
            if self.split:
                return None
            r2 = self.scratch("r2", self.e_size).fill_(pos)
        else:
            z_start = [self.e_start[k] - plan.prad[k] + plan.pads[k] for k in range(plan.ndim)]
            z_size = [self.e_size[k] + 2 * plan.prad[k] for k in range(plan.ndim)]
            a = window(plan.guide, z_start, z_size)
            b = window(plan.guide, [z_start[k] + o[k] for k in range(plan.ndim)], z_size)
            if plan.patch is None and plan.guide.shape[0] == 1 and not pos and not plan.noise:
                # one channel: -scale (a - b)^2 in two passes
                r2 = torch.sub(a[0], b[0], out=self.scratch("r2", z_size))
                torch.addcmul(self._zero, r2, r2, value=-plan.guide_scale, out=r2)
                negated = True
            else:
                r2 = _sqnorm(a, b, self.scratch)
                if plan.guide_scale != 1.0:
                    r2.mul_(plan.guide_scale)
                if plan.patch is not None:
                    r2 = _filter(r2, plan.patch, plan.prad, self.scratch)
                if pos:
                    r2.add_(pos)
        if plan.noise:
            r2.sub_(plan.noise).clamp_(min=0.0)
        if not negated:
            r2.neg_()
        # the bounded pass keeps exp off subnormals; the exact pass needs true scores
        if self.exact or not (plan.clamp or (pos and -pos < self.floor + 1.0)):
            return r2
        return r2.clamp_(min=self.floor)

    def pair_weight(self, o: Sequence[int]) -> torch.Tensor | None:
        """``exp`` of :meth:`pair_score` on the grown region (fast path only)."""
        score = self.pair_score(o)
        return None if score is None else score.exp_()

    def fold(self, score: torch.Tensor | None, o: Sequence[int], at: Sequence[int]) -> None:
        """Add the keys ``q + o``; their pair score is ``score`` read at ``q + at``.

        The general path (the fast path's loop is :func:`_run_fast`).
        """
        plan = self.plan
        dt, dev = plan.values.dtype, plan.values.device
        s = None
        if score is not None:
            start = [at[k] + plan.ext[k] for k in range(plan.ndim)]
            s = window(score, start, self.size)
        delta = None  # per-key displacements; None when they are the constant o
        if plan.shift is not None:
            delta = [self.key_view(plan.shift[k], o) + float(o[k]) for k in range(plan.ndim)]
        if plan.shift is not None or plan.field is not None:
            s = torch.zeros(self.size, dtype=dt, device=dev) if s is None else s.clone()
            for i in range(plan.ndim):
                for j in range(i, plan.ndim):
                    twice = 1.0 if i == j else 2.0
                    if plan.field is not None:
                        q = self.key_view(plan.field[i, j], o)
                        if delta is None:
                            s.add_(q, alpha=-twice * o[i] * o[j])
                        else:
                            s.sub_(q * delta[i] * delta[j] * twice)
                    elif float(plan.qx[i, j]):
                        s.addcmul_(delta[i], delta[j], value=-twice * float(plan.qx[i, j]))
        scale = 1.0
        if self.split:
            scale = math.exp(-self.position(o) - plan.bound)
        if plan.logw is not None:
            lw = self.key_view(plan.logw, o)
            s = lw.clone() if s is None else s + lw
        valid = None if plan.valid is None else self.key_view(plan.valid, o)
        if self.exact:
            s = s.clone() if s is not None else torch.zeros(self.size, dtype=dt, device=dev)
            if valid is not None:
                s.masked_fill_(~valid, -math.inf)
            new_top = torch.maximum(self.top, s)
            safe = torch.where(torch.isinf(new_top), torch.zeros_like(new_top), new_top)
            rescale = torch.exp(self.top - safe)
            self.total.mul_(rescale)
            self.acc.mul_(rescale)
            self.top = new_top
            w = s.sub_(safe).clamp_(min=self.floor).exp_()
        elif s is not None:
            if not self.split and plan.bound:
                s = s - plan.bound
            w = torch.exp(s.clamp(min=self.floor) if (delta is not None or plan.logw is not None)
                          else s)
        else:
            w = None
        if valid is not None:
            if w is None:
                w = valid.to(dt)
            else:
                w.masked_fill_(~valid, 0.0)
        vals = self.key_view(plan.values, o)
        if w is None:
            self.total.add_(scale)
        else:
            self.total.add_(w, alpha=scale)
        col = 0
        for a in plan.mono:
            block = self.acc[col:col + plan.p]
            col += plan.p
            if delta is not None and any(a):
                m = _monomial(delta, a)
                m.mul_(scale) if w is None else m.mul_(w).mul_(scale)
                block.addcmul_(vals, m.expand_as(vals))
                continue
            coef = scale * power(o, a)
            if coef == 0.0:
                continue
            if w is None:
                block.add_(vals, alpha=coef)
            else:
                block.addcmul_(vals, w.expand_as(vals), value=coef)
        for a in plan.mono2:
            if delta is not None:
                m = _monomial(delta, a)
                self.acc[col].add_(m if w is None else m.mul_(w), alpha=scale)
            else:
                coef = scale * power(o, a)
                if coef != 0.0:
                    if w is None:
                        self.acc[col].add_(coef)
                    else:
                        self.acc[col].add_(w, alpha=coef)
            col += 1

    def group_view(self, x: torch.Tensor, group: Group, prefix_start: Sequence[int]
                   ) -> torch.Tensor:
        """``x`` ``(*lead, *grid)`` at the keys of every offset of ``group``: ``(K, *lead,
        *tile_shape)``, overlapping windows sliding along the last axis.

        ``prefix_start``: where the tile's keys start on the leading grid axes of ``x``.
        """
        d = self.plan.ndim
        lead = x.ndim - d
        grid_strides = x.stride()[lead:]
        start = [*prefix_start, self.base[-1] + group.lo]
        offset = x.storage_offset() + sum(a * st for a, st in zip(start, grid_strides,
                                                                   strict=True))
        return x.as_strided((group.width, *x.shape[:lead], *self.size),
                            (grid_strides[-1], *x.stride()[:lead], *grid_strides), offset)

    def fold_group(self, group: Group) -> None:
        """Add the keys of every offset of ``group`` (grouped path)."""
        plan = self.plan
        d = plan.ndim
        k = group.width
        start = [self.base[i] + group.prefix[i] for i in range(d - 1)]
        score = self.scratch("score", (k, *self.size))
        along = group.last.reshape(k, *([1] * d))
        if plan.field is not None:
            # s = P1 - o_l (P2 + o_l F_ll): P1 and P2 hold the prefix's terms
            region = [*self.size[:-1], plan.values.shape[-1]]
            at = [*start, 0]
            p1 = self.scratch("p1", region)
            if plan.keylog is None:
                p1.zero_()
            else:
                p1.copy_(window(plan.keylog, at, region))
            p2 = self.scratch("p2", region).zero_()
            for i in range(d - 1):
                for j in range(i, d - 1):
                    twice = 1.0 if i == j else 2.0
                    c = twice * group.prefix[i] * group.prefix[j]
                    if c:
                        p1.add_(window(plan.field[i, j], at, region), alpha=-c)
                if group.prefix[i]:
                    p2.add_(window(plan.field[i, d - 1], at, region),
                            alpha=2.0 * group.prefix[i])
            zero = [0] * (d - 1)
            last = window(plan.field[d - 1, d - 1], at, region)
            torch.addcmul(self.group_view(p2, group, zero), self.group_view(last, group, zero),
                          along, out=score)
            torch.addcmul(self.group_view(p1, group, zero), score, along, value=-1.0,
                          out=score)
        elif plan.keylog is None:
            score.zero_()
        else:
            score.copy_(self.group_view(plan.keylog, group, start))
        if plan.guide is not None:
            # the value block: -||L y(q) - L y(q + o)||^2
            query = self.key_view(plan.guide, [0] * d)
            keys = self.group_view(plan.guide, group, start)
            diff = self.scratch("diff", score.shape)
            for c in range(plan.guide.shape[0]):
                torch.sub(keys[:, c], query[c], out=diff)
                score.addcmul_(diff, diff, value=-plan.guide_scale)
        if plan.top is not None:
            score.sub_(window(plan.top, [self.a, *([0] * (d - 1))], self.size))
        if plan.field is not None or plan.keylog is not None or plan.guide is not None:
            score.clamp_(min=self.floor)  # exp stays off subnormals
        weight = score.exp_()
        if plan.keep is not None:
            weight.mul_(self.group_view(plan.keep, group, start))
        vals = self.group_view(plan.values, group, start)
        wv = self.scratch("wv", vals.shape)
        if plan.p == 1:
            torch.mul(weight, vals[:, 0], out=wv[:, 0])
        else:
            torch.mul(weight.unsqueeze(1), vals, out=wv)
        n = self.total.numel()
        n1 = len(plan.mono) * plan.p
        self.acc[:n1].view(len(plan.mono), plan.p * n).addmm_(
            group.value_coef, wv.view(k, plan.p * n))
        self.store[n1:].view(-1, n).addmm_(group.weight_coef, weight.view(k, n))

    def state(self) -> SmoothState:
        m = self.total.numel()
        if self.grouped:
            top = (torch.zeros_like(self.total) if self.plan.top is None else
                   window(self.plan.top, [self.a, *([0] * (self.plan.ndim - 1))], self.size))
        elif self.exact:
            top = self.top
            empty = torch.isinf(top)
            self.total[empty] = 0.0
            self.acc[:, empty] = 0.0
        else:
            top = torch.full_like(self.total, self.plan.bound)
        return SmoothState(top.reshape(m), self.total.reshape(m),
                           self.acc.reshape(self.acc.shape[0], m).T)


def power(o: Sequence[int], a: Sequence[int]) -> float:
    out = 1.0
    for v, e in zip(o, a, strict=True):
        out *= float(v) ** e
    return out


def _monomial(delta: list[torch.Tensor], a: Sequence[int]) -> torch.Tensor:
    out = None
    for k, e in enumerate(a):
        for _ in range(e):
            out = delta[k].clone() if out is None else out.mul_(delta[k])
    return out


def run_tile(plan: Plan, rows: tuple[int, int], exact: bool,
             into: tuple[torch.Tensor, torch.Tensor] | None = None,
             scratch: dict[Any, torch.Tensor] | None = None) -> Tile:
    """Fold every offset into the state of the queries in ``rows``.

    ``into``: arrays ``acc`` ``(p, *tile_shape)`` and ``total`` ``tile_shape``
    the fast path accumulates in (they are overwritten); ``scratch``: work
    arrays to share with other tiles.
    """
    tile = Tile(plan, rows, exact, into, scratch)
    if tile.grouped:
        for group in plan.groups or []:
            tile.fold_group(group)
        return tile
    if tile.fast:
        _run_fast(tile)
        return tile
    pair = tile.pair_score
    zero = (0,) * plan.ndim
    if plan.zero:
        tile.fold(pair(zero), zero, zero)
    for o in plan.pairs:
        score = pair(o)
        tile.fold(score, o, zero)
        neg = tuple(-v for v in o)
        tile.fold(score, neg, neg)  # the pair (x, x - o) is the pair (x - o, x)
    for o in plan.singles:
        tile.fold(pair(o), o, zero)
    return tile


def _run_fast(tile: Tile) -> None:
    """The fast path's loop: per offset, ``acc += scale w v(q + o)`` and ``total += scale w``.

    The same as :meth:`Tile.fold` on the fast path, with each view made by one
    ``as_strided`` call (the loop runs once per offset and tile: its Python
    cost is a fixed price per offset).
    """
    plan = tile.plan
    d = plan.ndim
    acc, total = tile.acc, tile.total
    size = tuple(tile.size)
    scale = {o: math.exp(-tile.position(o)) if tile.split else 1.0
             for o in [*plan.pairs, *plan.singles, (0,) * d]}
    values = plan.values
    channel_stride = values.stride(0)
    value_strides = values.stride()[1:]
    value_base = values.storage_offset() + sum(b * st for b, st in zip(tile.base, value_strides,
                                                                     strict=True))
    counts = plan.counts
    if counts is not None:
        count_base = counts.storage_offset() + sum(
            b * st for b, st in zip(tile.base, counts.stride(), strict=True))
    channels = [acc[c] for c in range(plan.p)]

    def add(weight: torch.Tensor | None, o: Sequence[int], u: Sequence[int], sc: float) -> None:
        shift = sum(v * st for v, st in zip(o, value_strides, strict=True))
        count = None
        if counts is not None:
            count = counts.as_strided(size, counts.stride(), count_base + sum(
                v * st for v, st in zip(o, counts.stride(), strict=True)))
        if weight is None:
            vals = values.as_strided((plan.p, *size), values.stride(), value_base + shift)
            acc.add_(vals, alpha=sc)
            if count is None:
                total.add_(sc)
            else:
                total.add_(count, alpha=sc)
            return
        w = weight.as_strided(size, weight.stride(), weight.storage_offset() + sum(
            (v + e) * st for v, e, st in zip(u, plan.ext, weight.stride(), strict=True)))
        for c, out in enumerate(channels):
            vals = values.as_strided(size, value_strides, value_base + shift + c * channel_stride)
            out.addcmul_(vals, w, value=sc)
        if count is None:
            total.add_(w, alpha=sc)
        else:
            total.addcmul_(count, w, value=sc)

    pair_weight = tile.pair_weight
    guide = plan.guide
    if (guide is not None and guide.shape[0] == 1 and plan.patch is None and tile.split
            and not plan.noise):
        # one channel, no patch (the bilateral filter): exp(-scale (a - b)^2), where a is
        # the guide on the grown region and b the same shifted by o
        strides = guide.stride()[1:]
        region = tuple(tile.e_size)
        start = guide.storage_offset() + sum(
            (e + p) * st for e, p, st in zip(tile.e_start, plan.pads, strides, strict=True))
        here = guide.as_strided(region, strides, start)
        buf = tile.scratch("r2", region)
        clamp = plan.clamp

        def pair_weight(o: Sequence[int]) -> torch.Tensor:
            there = guide.as_strided(region, strides, start + sum(
                v * st for v, st in zip(o, strides, strict=True)))
            torch.sub(here, there, out=buf)
            torch.addcmul(tile._zero, buf, buf, value=-plan.guide_scale, out=buf)
            if clamp:
                buf.clamp_(min=tile.floor)
            return buf.exp_()

    zero = (0,) * d
    if plan.zero:
        add(pair_weight(zero), zero, zero, scale[zero])
    for o in plan.pairs:
        weight = pair_weight(o)
        neg = tuple(-v for v in o)
        add(weight, o, zero, scale[o])
        add(weight, neg, neg, scale[o])  # the pair (x, x - o) is the pair (x - o, x)
    for o in plan.singles:
        add(pair_weight(o), o, zero, scale[o])


def weak(plan: Plan, tile: Tile, n_keys: int) -> bool:
    """Whether some query's total is too small for the fixed offset to be exact."""
    floor = exp_floor(tile.total.dtype)
    eps = torch.finfo(tile.total.dtype).eps
    limit = math.exp(floor + math.log(max(n_keys, 1)) - math.log(eps) + 5.0)
    return bool(tile.total.min() <= limit)
