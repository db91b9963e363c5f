"""The grid engine's grouped path: offsets that differ only in their last coordinate.

Without patches, sub-pixel shifts or a noise offset, and with moments or a
per-key field or log-weight (LARK), the offsets ``(*prefix, lo..hi)`` are
taken together: their keys are one strided view of each array (a window
sliding along the last axis, :func:`group_view`), their scores one
operation over ``K`` stacked arrays and the moments one matrix product with
the monomials' coefficients (:func:`fold_group`), in the accumulators'
dtype (float64 for float32 values: the moments of the displacement cancel,
and their terms are exact products of the float32 weights and values). A
:class:`Group` holds one such set of offsets and its coefficients
(``_groups`` builds them); each query's offset in the bounded pass is the
largest log-weight in its window (``_window_max``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ._job import exp_floor
from ._lattice import monomials, power, window

if TYPE_CHECKING:
    from ._grid_tile import Tile

__all__ = ["Group", "fold_group", "group_view"]


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
    last: torch.Tensor            # (K,) the last coordinates lo..hi (values' dtype)
    value_coef: torch.Tensor      # (n_mono, K) scale_k o_k^a (accumulators' dtype)
    weight_coef: torch.Tensor     # (n_mono2 + 1, K) scale_k o_k^a, then scale_k


def _groups(offsets: list[tuple[int, ...]], d: int, degree: int,
            qx: list[list[float]] | None, dtype: torch.dtype, device: torch.device,
            acc_dtype: torch.dtype) -> list[Group]:
    """The offsets grouped by all but their last coordinate, with the moments' coefficients.

    Without a per-key field the position block is a constant per offset, a
    factor ``exp(-o^T Q_x o)`` of its coefficients (0 below the exponent floor).
    """
    mono = monomials(d, degree)
    mono2 = [a for a in monomials(d, 2 * degree) if any(a)]
    floor = exp_floor(dtype)
    by: dict[tuple[int, ...], list[int]] = {}
    for o in offsets:
        by.setdefault(o[:-1], []).append(o[-1])
    out = []
    for prefix, lasts in sorted(by.items()):
        lo, hi = min(lasts), max(lasts)
        width = hi - lo + 1
        value = torch.zeros(len(mono), width, dtype=torch.float64)
        weight = torch.zeros(len(mono2) + 1, width, dtype=torch.float64)
        for last in set(lasts):
            o = (*prefix, last)
            log_scale = 0.0 if qx is None else -sum(
                o[i] * o[j] * qx[i][j] for i in range(d) for j in range(d))
            if log_scale < floor:
                continue
            scale = math.exp(log_scale)
            k = last - lo
            value[:, k] = torch.tensor([scale * power(o, a) for a in mono], dtype=torch.float64)
            weight[:, k] = torch.tensor([scale * power(o, a) for a in mono2] + [scale],
                                        dtype=torch.float64)
        out.append(Group(prefix, lo, width,
                         torch.arange(lo, hi + 1, dtype=dtype, device=device),
                         value.to(dtype=acc_dtype, device=device),
                         weight.to(dtype=acc_dtype, device=device)))
    return out


def _window_max(x: torch.Tensor, pads: Sequence[int], offsets: list[tuple[int, ...]],
                shape: Sequence[int]) -> torch.Tensor:
    """``max_o x[q + o]`` over the bounding box of the offsets, for every query ``q``
    (``x`` padded by ``pads``); separable, one running maximum per axis."""
    for k, n in enumerate(shape):
        lo = min(o[k] for o in offsets)
        hi = max(o[k] for o in offsets)
        out = x.narrow(k, pads[k] + lo, n).clone()
        for u in range(lo + 1, hi + 1):
            torch.maximum(out, x.narrow(k, pads[k] + u, n), out=out)
        x = out
    return x


def group_view(tile: Tile, x: torch.Tensor, group: Group, prefix_start: Sequence[int]
               ) -> torch.Tensor:
    """``x`` ``(*lead, *grid)`` at the keys of every offset of ``group``: ``(K, *lead,
    *tile_shape)``, overlapping windows sliding along the last axis.

    ``prefix_start``: where the tile's keys start on the leading grid axes of ``x``.
    """
    d = tile.plan.ndim
    lead = x.ndim - d
    grid_strides = x.stride()[lead:]
    start = [*prefix_start, tile.base[-1] + group.lo]
    offset = x.storage_offset() + sum(a * st for a, st in zip(start, grid_strides,
                                                               strict=True))
    return x.as_strided((group.width, *x.shape[:lead], *tile.size),
                        (grid_strides[-1], *x.stride()[:lead], *grid_strides), offset)


def fold_group(tile: Tile, group: Group) -> None:
    """Add the keys of every offset of ``group`` (grouped path)."""
    plan = tile.plan
    d = plan.ndim
    k = group.width
    start = [tile.base[i] + group.prefix[i] for i in range(d - 1)]
    score = tile.scratch("score", (k, *tile.size))
    along = group.last.reshape(k, *([1] * d))
    if plan.field is not None:
        # s = P1 - o_l (P2 + o_l F_ll): P1 and P2 hold the prefix's terms
        region = [*tile.size[:-1], plan.values.shape[-1]]
        at = [*start, 0]
        p1 = tile.scratch("p1", region)
        if plan.keylog is None:
            p1.zero_()
        else:
            p1.copy_(window(plan.keylog, at, region))
        p2 = tile.scratch("p2", region).zero_()
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
        torch.addcmul(group_view(tile, p2, group, zero), group_view(tile, last, group, zero),
                      along, out=score)
        torch.addcmul(group_view(tile, p1, group, zero), score, along, value=-1.0,
                      out=score)
    elif plan.keylog is None:
        score.zero_()
    else:
        score.copy_(group_view(tile, plan.keylog, group, start))
    if plan.guide is not None:
        # the value block: -||L y(q) - L y(q + o)||^2
        query = tile.key_view(plan.guide, [0] * d)
        keys = group_view(tile, plan.guide, group, start)
        diff = tile.scratch("diff", score.shape)
        for c in range(plan.guide.shape[0]):
            torch.sub(keys[:, c], query[c], out=diff)
            score.addcmul_(diff, diff, value=-plan.guide_scale)
    if plan.top is not None:
        score.sub_(window(plan.top, [tile.a, *([0] * (d - 1))], tile.size))
    if plan.field is not None or plan.keylog is not None or plan.guide is not None:
        score.clamp_(min=tile.floor)  # exp stays off subnormals
    weight = score.exp_()
    if plan.keep is not None:
        weight.mul_(group_view(tile, plan.keep, group, start))
    if tile.wide:
        # products and sums in the accumulators' dtype: the moments' terms cancel
        weight = tile.scratch("wide weight", weight.shape, plan.acc_dtype).copy_(weight)
    vals = group_view(tile, plan.values, group, start)
    wv = tile.scratch("wv", vals.shape, plan.acc_dtype)
    if plan.p == 1:
        torch.mul(weight, vals[:, 0], out=wv[:, 0])
    else:
        torch.mul(weight.unsqueeze(1), vals, out=wv)
    n = tile.total.numel()
    n1 = len(plan.mono) * plan.p
    tile.acc[:n1].view(len(plan.mono), plan.p * n).addmm_(group.value_coef,
                                                         wv.view(k, plan.p * n))
    tile.store[n1:].view(-1, n).addmm_(group.weight_coef, weight.view(k, n))
