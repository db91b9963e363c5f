"""The distance pass's tiles: which scores a step computes at once, and on which thread.

The distance pass (:mod:`._distance`) computes the ``(m, n)`` scores of
every problem a tile at a time: a few rows of one problem (or every row of a
few), all keys of a row, about ``_TILE`` scores, so that the elementwise
steps between two matrix products (square root, exponential, the division
by the distance) read and write memory in cache. Tiles run in worker
threads (:func:`~nadaraya.engine._threads.map_blocks`), each operation on
one thread: torch's own threads would meet at a barrier after each of the
many small operations, where a busy machine stalls them. Under
``torch.compile``, which traces every tile, they are fewer and larger, and
run in turn.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TypeVar

import torch

from .._threads import map_blocks
from ..autograd import BlockMask
from ..autograd._problem import working_config

__all__: list[str] = []

T = TypeVar("T")
R = TypeVar("R")

# scores per tile: the elementwise steps between two products stay in cache
_TILE = 2**18
# under torch.compile, which traces every tile: fewer, larger ones
_COMPILED_TILE = 2**23
# worker blocks per thread, at most
_BLOCKS = 16


def _compiling() -> bool:
    return bool(torch.compiler.is_compiling())


def _tiles(problems: int, m: int, n: int, itemsize: int) -> list[tuple[slice, slice]]:
    """The tiles ``(problems, rows)`` of the score matrices, about ``_TILE`` scores each.

    All keys of a row lie in one tile; a tile takes as many rows of one
    problem as fit (every row of several problems where one problem's rows
    are fewer), within the working-memory budget.
    """
    if not n:
        return []
    memory = working_config().working_memory * 2**20
    tile = _COMPILED_TILE if _compiling() else _TILE
    size = max(1, min(tile, int(memory // (itemsize * 6))))
    mb = max(1, min(m, size // max(1, n)))
    per = max(1, min(problems, size // max(1, mb * n))) if mb == m else 1
    return [(slice(p0, min(p0 + per, problems)), slice(r0, min(r0 + mb, m)))
            for p0 in range(0, problems, per) for r0 in range(0, m, mb)]


# a worker's share: (problems, their tiles' rows, whether it holds every row of them)
_Segment = tuple[slice, list[slice], bool]


def _blocks(tiles: list[tuple[slice, slice]]) -> list[list[_Segment]]:
    """The tiles in blocks for the worker threads, in segments of one group of problems.

    A segment that holds every row of its problems sums their keys' gradients
    itself; where the groups are fewer than twice the threads, the rows of
    each are split among several segments. ``_BLOCKS`` blocks per thread at
    most: a worker held back by a busy machine delays the end by one block.
    """
    groups: dict[int, tuple[slice, list[slice]]] = {}
    for ps, rows in tiles:
        groups.setdefault(ps.start, (ps, []))[1].append(rows)
    threads = 1 if _compiling() else torch.get_num_threads()
    parts = max(1, -(-2 * threads // max(1, len(groups))))
    segments: list[_Segment] = []
    for ps, rows in groups.values():
        size = -(-len(rows) // min(parts, len(rows)))
        chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
        segments += [(ps, chunk, len(chunks) == 1) for chunk in chunks]
    per = max(1, len(segments) // (_BLOCKS * threads))
    return [segments[i:i + per] for i in range(0, len(segments), per)]


def _map(fn: Callable[[T], R], blocks: list[T], device: torch.device) -> list[R]:
    """:func:`~nadaraya.engine._threads.map_blocks`; in turn under ``torch.compile``."""
    if _compiling():
        return [fn(block) for block in blocks]
    return map_blocks(fn, blocks, device=device)


class _Scratch:
    """Tiles of memory a worker reuses: a fresh tile of a megabyte costs page faults."""

    def __init__(self, count: int, size: int, like: torch.Tensor) -> None:
        self.flat = [like.new_empty(size) for _ in range(count)]

    @staticmethod
    def of(kept: dict[int, _Scratch], count: int, size: int, like: torch.Tensor) -> _Scratch:
        """The calling thread's scratch in ``kept`` (one call's), made on first use."""
        ident = 0 if _compiling() else threading.get_ident()  # compiled: one thread
        if ident not in kept:
            kept[ident] = _Scratch(count, size, like)
        return kept[ident]

    def __call__(self, i: int, *shape: int) -> torch.Tensor:
        return self.flat[i][:math.prod(shape)].view(shape)


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
    if mask.per_problem is not None:  # a binding per problem: the tile's problems only
        visible = torch.stack([mask.per_problem[i].block(rows, slice(0, n))
                               for i in range(ps.start, ps.stop)])
    else:
        visible = _pick(mask.block(rows, slice(0, n)), lead, ps)
    shown = extra if extra is not None else torch.zeros((), dtype=dtype, device=device)
    return torch.where(visible, shown, torch.tensor(-math.inf, dtype=dtype, device=device))
