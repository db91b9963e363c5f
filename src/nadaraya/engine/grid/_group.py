"""The grid engine's grouped path: offsets that differ only in their last coordinate.

Without patches, sub-pixel shifts or a noise offset, and with moments or a
per-key field or log-weight (LARK), the offsets ``(*prefix, lo..hi)`` are
taken together: their keys are one strided view of each array (a window
sliding along the last axis, :func:`group_view`), their scores one
operation over ``K`` stacked arrays and the moments one matrix product with
the monomials' coefficients (:func:`fold_group`), in the accumulators'
dtype (float64 for float32 values: the moments of the displacement cancel,
and their terms are exact products of the float32 weights and values). The groups
themselves (:class:`~._grouping.Group`) are made with the plan.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ._grouping import Group
from ._lattice import window
from ._tile import Tile

__all__ = ["fold_group", "group_view"]


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
