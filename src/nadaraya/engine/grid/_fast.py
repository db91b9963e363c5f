"""The grid engine's fast path: degree 0, no per-key weights, a fixed offset.

Per offset ``o``, ``acc += scale w v(q + o)`` and ``total += scale w`` over
a tile of queries, with ``w`` the pair weight of
:meth:`~nadaraya.engine.grid._tile.Tile.pair_weight` (one array serving the
offsets ``o`` and ``-o``) and ``scale = exp(-o^T Q_x o)`` when the position
block is kept out of the arrays (else 1). The bilateral filter and non-local
means run here.

When the tile's accumulators are wider than the values (float64 for float32
values), the terms of ``_PARTIAL`` offsets are summed in the values' dtype
and that partial sum is added to the accumulators: the rounding of the long
sum is float64's, at the price of one wide addition per ``_PARTIAL`` offsets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._tile import Tile

__all__: list[str] = []

# Offsets whose terms are summed in the values' dtype before a wider accumulator takes them.
_PARTIAL = 16


def _run_fast(tile: Tile) -> None:
    """The fast path's loop: per offset, ``acc += scale w v(q + o)`` and ``total += scale w``.

    The same as :meth:`~nadaraya.engine.grid._tile.Tile.fold` on the fast path, with each
    view made by one ``as_strided`` call (the loop runs once per offset and tile: its Python
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
    if tile.wide:
        acc = tile.scratch("fast acc", (plan.p, *size)).zero_()
        total = tile.scratch("fast total", size).zero_()
    channels = [acc[c] for c in range(plan.p)]
    pending = 0

    def flush() -> None:
        nonlocal pending
        tile.acc.add_(acc)
        tile.total.add_(total)
        acc.zero_()
        total.zero_()
        pending = 0

    def add(weight: torch.Tensor | None, o: Sequence[int], u: Sequence[int], sc: float) -> None:
        nonlocal pending
        put(weight, o, u, sc)
        if tile.wide:
            pending += 1
            if pending == _PARTIAL:
                flush()

    def put(weight: torch.Tensor | None, o: Sequence[int], u: Sequence[int], sc: float) -> None:
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
    if pending:
        flush()
