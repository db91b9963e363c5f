"""Grid filters in blocks: bounded memory for any image size, results unchanged.

A filter whose output at a pixel depends on its input only within ``halo``
pixels of it (per axis: the window, the patch, and for a pipeline the sum
of its stages' reaches) gives, on a block of pixels read together with that
halo, the same output on the block's own pixels as on the whole image: the
same arithmetic per pixel. :func:`blocks` cuts an image into such blocks, as
few as the working-memory budget allows (bands of full rows, or tiles when
bands would spend more on their halo), and a face runs its filter block by
block (:func:`run_blocks`), writing each block's pixels into one output.

Image borders stay the filter's: a block's halo is clipped to the image, so
where a block meets the border the filter sees the border, and the border
modes ``"reflect"``, ``"symmetric"`` and ``"edge"`` read pixels within the
halo. ``"wrap"`` reads the far side of the image: :meth:`Block.read` then
takes ``outside`` more pixels beyond each border the block meets, read
through the border mode, and :meth:`Block.inside` marks the image's own.

The budget (:func:`nadaraya.config_context`) is shared: a block's arrays
take :data:`BLOCK_SHARE` of it, and the engine calls within a block the
rest (their own tiles).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..._config import config_context, get_config
from ._lattice import _pad_index

__all__ = ["BLOCK_SHARE", "Block", "blocks", "run_blocks"]

# The share of the working-memory budget a block's own arrays take; the engine calls inside a
# block run with the rest.
BLOCK_SHARE = 0.75


@dataclass(frozen=True)
class Block:
    """A block of an image's pixels and the region read to compute them.

    Attributes
    ----------
    rows, cols : tuple of int
        The block's pixels, ``[start, stop)`` on each axis.
    read_rows, read_cols : tuple of int
        The pixels read: the block grown by the halo, clipped to the image,
        then grown by ``outside`` beyond each image border it meets.
    shape : tuple of int
        The image's ``(height, width)``.
    """

    rows: tuple[int, int]
    cols: tuple[int, int]
    read_rows: tuple[int, int]
    read_cols: tuple[int, int]
    shape: tuple[int, int]

    @property
    def inner(self) -> tuple[slice, slice]:
        """Where the block's pixels sit in the region read."""
        return (slice(self.rows[0] - self.read_rows[0], self.rows[1] - self.read_rows[0]),
                slice(self.cols[0] - self.read_cols[0], self.cols[1] - self.read_cols[0]))

    def read(self, x: torch.Tensor, border: str = "reflect") -> torch.Tensor:
        """``x`` ``(..., height, width)`` on the region read; beyond the image's
        borders (``outside``), through ``border``. A view when nothing lies outside."""
        (r0, r1), (c0, c1) = self.read_rows, self.read_cols
        height, width = self.shape
        if r0 >= 0 and c0 >= 0 and r1 <= height and c1 <= width:
            return x[..., r0:r1, c0:c1]
        rows = _indices(r0, r1, height, border, x.device)
        cols = _indices(c0, c1, width, border, x.device)
        return x.index_select(-2, rows).index_select(-1, cols)

    def inside(self, device: torch.device | str | None = None) -> torch.Tensor | None:
        """Bool ``(read height, read width)``: which pixels read are the image's own
        (None when all are)."""
        (r0, r1), (c0, c1) = self.read_rows, self.read_cols
        height, width = self.shape
        if r0 >= 0 and c0 >= 0 and r1 <= height and c1 <= width:
            return None
        r = torch.arange(r0, r1, device=device)
        c = torch.arange(c0, c1, device=device)
        return ((r >= 0) & (r < height))[:, None] & ((c >= 0) & (c < width))[None, :]


def _indices(lo: int, hi: int, n: int, border: str, device: torch.device) -> torch.Tensor:
    """The pixels of ``[0, n)`` read at the positions ``lo .. hi - 1`` through ``border``."""
    before, after = max(-lo, 0), max(hi - n, 0)
    return _pad_index(n, before, after, border, device)[lo + before:hi + before]


def _split(n: int, size: int) -> list[tuple[int, int]]:
    """``[0, n)`` in as few parts of at most ``size`` as can be, of equal sizes (to one):
    no part is shorter than ``min(n, size // 2)``."""
    parts = -(-n // max(size, 1))
    cuts = [n * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(cuts))


def blocks(shape: Sequence[int], halo: int, bytes_per_pixel: float, *, outside: int = 0,
           least: int = 1, budget: float | None = None) -> list[Block]:
    """Cut an image of ``shape`` ``(height, width)`` into blocks that fit the budget.

    Parameters
    ----------
    shape : (int, int)
    halo : int
        Pixels each block reads beyond its own on every side (within the image).
    bytes_per_pixel : float
        Temporary bytes the filter holds per pixel of a region read.
    outside : int, default 0
        Pixels read beyond each image border a block meets (when the image
        is cut at all; a whole image is read as it is).
    least : int, default 1
        The least side of a block, on an image at least that large (so that
        a patch fits in every region read).
    budget : float, optional
        Bytes for a block's region; default :data:`BLOCK_SHARE` of the
        working-memory budget.

    Returns
    -------
    list of Block
        One block, the whole image, when it fits; else bands of full rows,
        or tiles when the halo would cost bands more than tiles. Where the
        budget cannot hold a block of ``max(2 least, halo)`` pixels a side and
        its halo, blocks of that side are used all the same (the budget is
        exceeded rather than the work multiplied).
    """
    height, width = int(shape[0]), int(shape[1])
    if budget is None:
        budget = BLOCK_SHARE * get_config().working_memory * 2**20
    pixels = max(budget / max(bytes_per_pixel, 1e-9), 1.0)
    if height * width <= pixels:
        return [Block((0, height), (0, width), (0, height), (0, width), (height, width))]
    grown = 2 * halo
    # bands: full rows; tiles: squares. A block narrower than the halo would read nine
    # times its pixels or more: no block is (the budget gives way first)
    smallest = max(2 * least, halo, 1)
    band = int(pixels // (width + 2 * outside)) - grown
    side = math.isqrt(int(pixels)) - grown
    band_cost = (band + grown) / band if band >= 1 else math.inf
    tile_cost = ((side + grown) / side) ** 2 if side >= 1 else math.inf
    if band >= smallest and band_cost <= tile_cost:
        row_parts, col_parts = _split(height, band), [(0, width)]
    else:
        side = max(side, smallest)
        row_parts, col_parts = _split(height, side), _split(width, side)
    out = []
    for r in row_parts:
        for c in col_parts:
            out.append(Block(r, c, _grow(r, halo, outside, height),
                             _grow(c, halo, outside, width), (height, width)))
    return out


def _grow(span: tuple[int, int], halo: int, outside: int, n: int) -> tuple[int, int]:
    lo, hi = max(span[0] - halo, 0), min(span[1] + halo, n)
    return (lo - outside if lo == 0 else lo, hi + outside if hi == n else hi)


@contextmanager
def _engine_share() -> Iterator[None]:
    """The engine calls of a block run with the budget's remaining share."""
    with config_context(working_memory=(1.0 - BLOCK_SHARE) * get_config().working_memory):
        yield


def run_blocks(filter_block: Callable[[Block], torch.Tensor], out: torch.Tensor, halo: int,
               bytes_per_pixel: float, *, outside: int = 0, least: int = 1) -> torch.Tensor:
    """Fill ``out`` ``(..., height, width)`` block by block (see :func:`blocks`).

    ``filter_block(block)`` returns the filter's output on the block's region
    read, ``(..., read height, read width)``; its pixels of the block are
    copied into ``out``. Returns ``out``.
    """
    parts = blocks(out.shape[-2:], halo, bytes_per_pixel, outside=outside, least=least)
    with _engine_share():
        for block in parts:
            result = filter_block(block)
            rows, cols = block.inner
            out[..., block.rows[0]:block.rows[1], block.cols[0]:block.cols[1]] = (
                result[..., rows, cols])
            del result
    return out
