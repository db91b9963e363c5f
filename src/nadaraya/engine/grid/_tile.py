"""The grid engine's inner loop: one tile of queries, the offsets folded in.

See :mod:`nadaraya.engine.grid._smooth` for the method. A
:class:`~nadaraya.engine.grid._plan.Plan` holds the padded inputs; a
:class:`Tile` accumulates the online log-sum-exp state of one block of rows,
either in the bounded pass (a fixed offset, the kernel's upper bound, or per
query the window's largest log-weight on the grouped path) or in the exact
pass (a running maximum per query). Here the offsets are folded one at a
time (:meth:`Tile.fold`); :mod:`._run` chooses between that, the fast
path's loop (:mod:`._fast`) and the grouped path's (:mod:`._group`). Work
arrays are kept per tile and reused from offset to offset.

The accumulators are of the plan's ``acc_dtype`` (float64 for float32
values): the fast path sums a few offsets in the values' dtype and adds
these partial sums to them, the grouped path forms its products and sums in
their dtype, the general path adds every term to them. :meth:`Tile.finish`
writes the normalized state: the weighted means in the values' units and
``log sum K`` as the offset.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._job import exp_floor
from ._lattice import power, window
from ._plan import Plan, scale_pow2

__all__ = ["Tile"]


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
        adt = plan.acc_dtype
        # whether the accumulators are wider than the values
        self.wide = adt != dt
        if self.grouped:
            # [acc; total] in one array: the weight moments and the total are
            # adjacent rows, reduced by one matrix product
            store = torch.zeros(n_mom + 1, *self.size, dtype=adt, device=dev)
            self.store, self.acc, self.total = store, store[:n_mom], store[n_mom]
        else:
            self.acc = torch.zeros(n_mom, *self.size, dtype=adt, device=dev)
            self.total = torch.zeros(self.size, dtype=adt, device=dev)
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

    def scratch(self, name: str, size: Sequence[int],
                dtype: torch.dtype | None = None) -> torch.Tensor:
        """A work array of ``size`` (and ``dtype``, default the values') kept for the
        tile's later offsets (its contents are overwritten by the next use of the same
        name)."""
        key = (name, tuple(size), dtype)
        buf = self._scratch.get(key)
        if buf is None:
            buf = torch.empty(key[1], dtype=dtype or self.plan.values.dtype,
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

        The general path (the fast path's loop is :func:`~nadaraya.engine.grid._fast._run_fast`).
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

    def finish(self, offset: torch.Tensor, total: torch.Tensor, acc: torch.Tensor) -> None:
        """Write the tile's normalized state into ``offset`` and ``total`` ``(*size)`` and
        ``acc`` ``(n_columns, *size)`` (arrays of the values' dtype).

        ``total`` is 1 where a key has weight (0 elsewhere), ``acc`` the
        weighted means (0 where empty) in the values' units, ``offset`` the
        log of the sum of the weights (``-inf`` where empty). The value
        columns of degree 0 are weighted means of the values, clamped to the
        range of the values in the query's window against rounding: a
        constant stays itself, and the largest finite number finite.
        """
        plan = self.plan
        t = self.total
        if self.grouped:
            top: torch.Tensor | float = (
                0.0 if plan.top is None else
                window(plan.top, [self.a, *([0] * (plan.ndim - 1))], self.size))
        elif self.exact:
            top = self.top
            t.masked_fill_(torch.isinf(top), 0.0)
        else:
            top = plan.bound
        has = t > 0
        mean = self.acc / torch.where(has, t, 1.0)
        mean.masked_fill_(~has, 0.0)
        p = plan.p
        if plan.value_low is not None and plan.value_high is not None:
            at = [self.a, *([0] * (plan.ndim - 1))]
            torch.maximum(mean[:p], window(plan.value_low, at, self.size), out=mean[:p])
            torch.minimum(mean[:p], window(plan.value_high, at, self.size), out=mean[:p])
        scale_pow2(mean[:p * len(plan.mono)], plan.value_exp)
        acc.copy_(mean)
        total.copy_(has)
        offset.copy_(torch.log(t).add_(top))


def _monomial(delta: list[torch.Tensor], a: Sequence[int]) -> torch.Tensor:
    out = None
    for k, e in enumerate(a):
        for _ in range(e):
            out = delta[k].clone() if out is None else out.mul_(delta[k])
    return out
