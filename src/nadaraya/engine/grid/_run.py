"""The grid engine's loop over one tile: the general, fast or grouped path, and its weak queries.

:func:`run_tile` folds every offset into a :class:`~._tile.Tile` by the path
its plan allows (the grouped path of :mod:`._group`, the fast path of
:mod:`._fast`, or the general :meth:`~._tile.Tile.fold`); :func:`weak` finds
the queries the bounded pass cannot state exactly.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._job import exp_floor
from ._fast import _run_fast
from ._group import fold_group
from ._plan import Plan
from ._tile import Tile

__all__ = ["run_tile", "weak"]


def run_tile(plan: Plan, rows: tuple[int, int], exact: bool,
             scratch: dict[Any, torch.Tensor] | None = None) -> Tile:
    """Fold every offset into the state of the queries in ``rows``.

    ``scratch``: work arrays to share with other tiles.
    """
    tile = Tile(plan, rows, exact, scratch)
    if tile.grouped:
        for group in plan.groups or []:
            fold_group(tile, group)
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


def weak(plan: Plan, tile: Tile, n_keys: int) -> torch.Tensor | None:
    """The queries whose total is too small for the fixed offset to be exact, bool
    ``(*tile_shape)``, or None when there are none.

    A query without a key in its window (hidden keys, the window outside the
    grid) is empty whatever the offset and is not weak. The exact pass
    replaces the weak queries only, so that a query's arithmetic does not
    depend on the others of its tile.
    """
    dtype = plan.values.dtype
    limit = math.exp(exp_floor(dtype) + math.log(max(n_keys, 1))
                     - math.log(torch.finfo(dtype).eps) + 5.0)
    low = tile.total <= limit
    if not bool(low.any()):
        return None
    if plan.valid is not None:
        zero = (0,) * plan.ndim
        has = torch.zeros_like(low)
        for o in [*([zero] if plan.zero else []), *plan.pairs,
                  *(tuple(-v for v in o) for o in plan.pairs), *plan.singles]:
            has |= tile.key_view(plan.valid, o)
        low &= has
    return low if bool(low.any()) else None
