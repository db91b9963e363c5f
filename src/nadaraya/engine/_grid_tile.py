"""The grid engine's inner loop: one tile of queries, the offsets folded in.

See :mod:`nadaraya.engine._grid` for the method. A :class:`Plan` holds the
padded inputs; a :class:`Tile` accumulates the online log-sum-exp state of
one block of rows, either in the bounded pass (a fixed offset, the kernel's
upper bound) or in the exact pass (a running maximum per query).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._job import exp_floor
from ._state import SmoothState

__all__ = ["BATCH", "Plan", "Tile", "run_tile", "weak", "window"]

#: Offsets stacked before one matrix product reduces them into the moments.
BATCH = 8


def window(x: torch.Tensor, start: Sequence[int], size: Sequence[int]) -> torch.Tensor:
    if len(start) == 2:
        a, b = start
        return x[..., a:a + size[0], b:b + size[1]]
    lead = x.ndim - len(start)
    index = (slice(None),) * lead + tuple(slice(a, a + n) for a, n in zip(start, size, strict=True))
    return x[index]


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
    augmented: torch.Tensor | None  # (p + 1, *padded): [v * valid, valid] for degree 0
    clamp: bool                     # whether scores can fall below the exponent floor

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def p(self) -> int:
        return self.values.shape[0]


def _sqnorm(diff: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean norm over the leading (channel) axis, in place of ``diff``."""
    out = diff[0].square_()
    for c in range(1, diff.shape[0]):
        out.addcmul_(diff[c], diff[c])
    return out


def _filter(x: torch.Tensor, patch: Any, prad: Sequence[int]) -> torch.Tensor:
    """Correlate ``x`` (grid axes only) with the patch weights, keeping the valid part."""
    d = x.ndim
    if isinstance(patch, list):
        for k, g in enumerate(patch):
            n = x.shape[k] - 2 * prad[k]
            size = list(x.shape)
            size[k] = n
            start = [0] * d
            out = window(x, start, size) * g[0]
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
        term = window(x, u, size) * w
        out = term if out is None else out.add_(term)
    return out if out is not None else x.new_zeros(size)


class Tile:
    """The queries of one tile of rows and the accumulators of its state.

    The bounded pass (``exact=False``) uses the kernel's upper bound as the
    fixed offset; there a weight that factors as ``exp(-o^T Q_x o)`` times a
    pixel array keeps the constant out of the arrays (a scalar per offset).
    The exact pass keeps a running maximum per query.
    """

    def __init__(self, plan: Plan, rows: tuple[int, int], exact: bool) -> None:
        self.plan = plan
        self.a, self.b = rows
        self.size = (self.b - self.a, *plan.shape[1:])
        self.exact = exact
        dev, dt = plan.values.device, plan.values.dtype
        n_mom = plan.p * len(plan.mono) + len(plan.mono2)
        # the fast path: one product with [v * valid, valid] gives acc and total
        self.fast = (plan.augmented is not None and plan.logw is None and plan.field is None
                     and plan.shift is None and not exact)
        if self.fast:
            both = torch.zeros(plan.p + 1, *self.size, dtype=dt, device=dev)
            self.both, self.acc, self.total = both, both[:plan.p], both[plan.p]
        else:
            self.acc = torch.zeros(n_mom, *self.size, dtype=dt, device=dev)
            self.total = torch.zeros(self.size, dtype=dt, device=dev)
        self.top = torch.full(self.size, -math.inf if exact else plan.bound, dtype=dt,
                              device=dev)
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
        # moments with constant displacements: weights of BATCH offsets are
        # stacked and reduced with one matrix product per block of moments
        self.batched = not exact and len(plan.mono) > 1 and plan.shift is None
        if self.batched:
            self.buf_wv = torch.empty(BATCH, plan.p, *self.size, dtype=dt, device=dev)
            self.buf_w = torch.empty(BATCH, *self.size, dtype=dt, device=dev)
            self.coefs: list[tuple[list[float], list[float]]] = []

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
        if plan.guide is None:
            if self.split:
                return None
            r2 = torch.full(self.e_size, pos, dtype=plan.values.dtype,
                            device=plan.values.device)
        else:
            z_start = [self.e_start[k] - plan.prad[k] + plan.pads[k] for k in range(plan.ndim)]
            z_size = [self.e_size[k] + 2 * plan.prad[k] for k in range(plan.ndim)]
            a = window(plan.guide, z_start, z_size)
            b = window(plan.guide, [z_start[k] + o[k] for k in range(plan.ndim)], z_size)
            r2 = _sqnorm(a - b)
            if plan.patch is not None:
                r2 = _filter(r2, plan.patch, plan.prad)
            if pos:
                r2.add_(pos)
        if plan.noise:
            r2.sub_(plan.noise).clamp_(min=0.0)
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

        On the fast path ``score`` is already the weight (:meth:`pair_weight`).
        """
        plan = self.plan
        dt, dev = plan.values.dtype, plan.values.device
        s = None
        if score is not None:
            start = [at[k] + plan.ext[k] for k in range(plan.ndim)]
            s = window(score, start, self.size)
        if self.fast:
            aug = self.key_view(plan.augmented, o)
            scale = math.exp(-self.position(o)) if self.split else 1.0
            if s is None:
                self.both.add_(aug, alpha=scale)
            else:
                self.both.addcmul_(aug, s, value=scale)
            return
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
        if self.batched:
            k = len(self.coefs)
            if w is None:
                self.buf_w[k].fill_(1.0)
                self.buf_wv[k].copy_(vals)
            else:
                self.buf_w[k].copy_(w)
                torch.mul(vals, w, out=self.buf_wv[k])
            self.coefs.append(([scale * _power(o, a) for a in plan.mono],
                               [scale] + [scale * _power(o, a) for a in plan.mono2]))
            if len(self.coefs) == BATCH:
                self.flush()
            return
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
            coef = scale * _power(o, a)
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
                coef = scale * _power(o, a)
                if coef != 0.0:
                    if w is None:
                        self.acc[col].add_(coef)
                    else:
                        self.acc[col].add_(w, alpha=coef)
            col += 1

    def flush(self) -> None:
        """Reduce the stacked offsets into the moments (batched path)."""
        if not self.batched or not self.coefs:
            return
        plan = self.plan
        k = len(self.coefs)
        dt, dev = self.total.dtype, self.total.device
        c1 = torch.tensor([c[0] for c in self.coefs], dtype=dt, device=dev).T  # (n1, k)
        c2 = torch.tensor([c[1] for c in self.coefs], dtype=dt, device=dev).T  # (1 + n2, k)
        n = self.total.numel()
        n1 = len(plan.mono)
        wv = self.buf_wv[:k].reshape(k, plan.p * n)
        w = self.buf_w[:k].reshape(k, n)
        self.acc[:n1 * plan.p].view(n1, plan.p * n).addmm_(c1, wv)
        self.total.view(1, n).addmm_(c2[:1], w)
        self.acc[n1 * plan.p:].view(len(plan.mono2), n).addmm_(c2[1:], w)
        self.coefs = []

    def state(self) -> SmoothState:
        self.flush()
        m = self.total.numel()
        top = self.top
        if self.exact:
            empty = torch.isinf(top)
            self.total[empty] = 0.0
            self.acc[:, empty] = 0.0
        else:
            top = torch.full_like(self.total, self.plan.bound)
        return SmoothState(top.reshape(m), self.total.reshape(m),
                           self.acc.reshape(self.acc.shape[0], m).T)


def _power(o: Sequence[int], a: Sequence[int]) -> float:
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


def run_tile(plan: Plan, rows: tuple[int, int], exact: bool) -> Tile:
    """Fold every offset into the state of the queries in ``rows``."""
    tile = Tile(plan, rows, exact)
    pair = tile.pair_weight if tile.fast else tile.pair_score
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


def weak(plan: Plan, tile: Tile, n_keys: int) -> bool:
    """Whether some query's total is too small for the fixed offset to be exact."""
    tile.flush()
    floor = exp_floor(tile.total.dtype)
    eps = torch.finfo(tile.total.dtype).eps
    limit = math.exp(floor + math.log(max(n_keys, 1)) - math.log(eps) + 5.0)
    return bool((tile.total <= limit).any())
