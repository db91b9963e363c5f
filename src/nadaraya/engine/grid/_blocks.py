"""Grid filters in blocks: bounded memory for any image size, results unchanged.

A filter whose output at a pixel depends on its input only within ``halo``
pixels of it (per axis: the window, the patch, and for a pipeline the sum
of its stages' reaches) gives, on a block of pixels read together with that
halo, the same output on the block's own pixels as on the whole image: the
same arithmetic per pixel. :func:`blocks` cuts an image into such blocks, as
few as the working-memory budget allows (bands of full rows, or tiles when
bands would spend more on their halo; slabs, tiles along two axes or cubes for
a volume), and a face runs its filter block by block (:func:`run_blocks`),
writing each block's pixels into one output.

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
from ..._errors import NadarayaError
from ._lattice import _pad_index

__all__ = ["BLOCK_SHARE", "Block", "blocks", "run_blocks"]

# The share of the working-memory budget a block's own arrays take; the engine calls inside a
# block run with the rest.
BLOCK_SHARE = 0.75


@dataclass(frozen=True)
class Block:
    """A block of an image's (or a volume's) pixels and the region read to compute them.

    Attributes
    ----------
    rows, cols : tuple of int
        The block's pixels on the last two axes, ``[start, stop)``.
    read_rows, read_cols : tuple of int
        The pixels read on those axes: the block grown by the halo, clipped to
        the image, then grown by ``outside`` beyond each image border it meets.
    shape : tuple of int
        The image's ``(height, width)``, or a volume's ``(*lead, height, width)``.
    lead, read_lead : tuple of (int, int), default ()
        The block's pixels and those read on the axes before the rows (the
        depth of a volume); empty for an image.
    """

    rows: tuple[int, int]
    cols: tuple[int, int]
    read_rows: tuple[int, int]
    read_cols: tuple[int, int]
    shape: tuple[int, ...]
    lead: tuple[tuple[int, int], ...] = ()
    read_lead: tuple[tuple[int, int], ...] = ()

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """The block's pixels, ``[start, stop)`` on every axis."""
        return (*self.lead, self.rows, self.cols)

    @property
    def read_spans(self) -> tuple[tuple[int, int], ...]:
        """The pixels read, ``[start, stop)`` on every axis."""
        return (*self.read_lead, self.read_rows, self.read_cols)

    @property
    def size(self) -> int:
        """The number of the block's own pixels."""
        return math.prod(hi - lo for lo, hi in self.spans)

    @property
    def own(self) -> tuple[slice, ...]:
        """Where the block's pixels sit in the image."""
        return tuple(slice(lo, hi) for lo, hi in self.spans)

    @property
    def inner(self) -> tuple[slice, ...]:
        """Where the block's pixels sit in the region read."""
        return tuple(slice(lo - rlo, hi - rlo)
                     for (lo, hi), (rlo, _) in zip(self.spans, self.read_spans, strict=True))

    def _within(self) -> bool:
        return all(lo >= 0 and hi <= n
                   for (lo, hi), n in zip(self.read_spans, self.shape, strict=True))

    def read(self, x: torch.Tensor, border: str = "reflect") -> torch.Tensor:
        """``x`` ``(..., *shape)`` on the region read; beyond the image's borders
        (``outside``), through ``border``. A view when nothing lies outside."""
        spans = self.read_spans
        if self._within():
            return x[(..., *(slice(lo, hi) for lo, hi in spans))]
        nd = len(spans)
        for axis, ((lo, hi), n) in enumerate(zip(spans, self.shape, strict=True)):
            x = x.index_select(axis - nd, _indices(lo, hi, n, border, x.device))
        return x

    def inside(self, device: torch.device | str | None = None) -> torch.Tensor | None:
        """Bool ``(*read shape)``: which pixels read are the image's own (None when
        all are)."""
        if self._within():
            return None
        spans = self.read_spans
        nd = len(spans)
        out: torch.Tensor | None = None
        for axis, ((lo, hi), n) in enumerate(zip(spans, self.shape, strict=True)):
            r = torch.arange(lo, hi, device=device)
            ok = ((r >= 0) & (r < n)).reshape([-1 if a == axis else 1 for a in range(nd)])
            out = ok if out is None else out & ok
        assert out is not None
        return out


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


def _root(x: float, k: int) -> int:
    """The largest integer ``s`` with ``s^k <= x`` (``x >= 0``)."""
    if k == 2:
        return math.isqrt(int(x))
    s = int(x ** (1.0 / k))
    while s > 0 and s**k > x:
        s -= 1
    while (s + 1) ** k <= x:
        s += 1
    return s


def blocks(shape: Sequence[int], halo: int, bytes_per_pixel: float, *, outside: int = 0,
           least: int = 1, budget: float | None = None) -> list[Block]:
    """Cut an image of ``shape`` ``(height, width)`` (or a volume, ``(depth, height,
    width)``, any number of axes) into blocks that fit the budget.

    Parameters
    ----------
    shape : sequence of int
        The image's size on each of its axes (at least 2).
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
        One block, the whole image, when it fits; else the image cut along its
        first ``k`` axes into blocks of equal sides (bands of full rows for an
        image, slabs of full planes for a volume, up to tiles and cubes), with
        the ``k`` whose halo costs least. Where the budget cannot hold a block
        of ``max(2 least, halo)`` pixels a side and its halo, blocks of that
        side are used all the same (the budget is exceeded rather than the
        work multiplied).

    Examples
    --------
    >>> from nadaraya.engine.grid import blocks
    >>> parts = blocks((40, 40, 40), 2, 8.0, budget=8.0 * 20**3)
    >>> len(parts) > 1, parts[0].read_spans[0]
    (True, (0, 15))
    """
    dims = tuple(int(n) for n in shape)
    if len(dims) < 2:
        raise NadarayaError(f"shape must have at least 2 axes (height, width); got "
                            f"{tuple(shape)}. Pass an image's or a volume's shape.")
    if budget is None:
        budget = BLOCK_SHARE * get_config().working_memory * 2**20
    pixels = max(budget / max(bytes_per_pixel, 1e-9), 1.0)
    if math.prod(dims) <= pixels:
        whole = tuple((0, n) for n in dims)
        return [_block(whole, whole, dims)]
    grown = 2 * halo
    # a block narrower than the halo would read nine times its pixels or more: no block
    # is (the budget gives way first)
    smallest = max(2 * least, halo, 1)
    best: tuple[float, int, int] | None = None  # (cost, k, side)
    for k in range(1, len(dims) + 1):
        rest = math.prod(n + 2 * outside for n in dims[k:])
        side = _root(pixels / rest, k) - grown
        if side < smallest:
            continue
        cost = ((side + grown) / side) ** k
        if best is None or cost < best[0]:
            best = (cost, k, side)
    if best is None:
        k, side = len(dims), max(_root(pixels, len(dims)) - grown, smallest)
    else:
        _, k, side = best
    axes = [_split(n, side) if a < k else [(0, n)] for a, n in enumerate(dims)]
    out = []
    for spans in itertools.product(*axes):
        read = tuple(_grow(span, halo, outside, n) for span, n in zip(spans, dims, strict=True))
        out.append(_block(spans, read, dims))
    return out


def _block(spans: Sequence[tuple[int, int]], read: Sequence[tuple[int, int]],
           shape: tuple[int, ...]) -> Block:
    return Block(spans[-2], spans[-1], read[-2], read[-1], shape, tuple(spans[:-2]),
                 tuple(read[:-2]))


def _grow(span: tuple[int, int], halo: int, outside: int, n: int) -> tuple[int, int]:
    lo, hi = max(span[0] - halo, 0), min(span[1] + halo, n)
    return (lo - outside if lo == 0 else lo, hi + outside if hi == n else hi)


@contextmanager
def _engine_share() -> Iterator[None]:
    """The engine calls of a block run with the budget's remaining share."""
    with config_context(working_memory=(1.0 - BLOCK_SHARE) * get_config().working_memory):
        yield


def run_blocks(filter_block: Callable[[Block], torch.Tensor], out: torch.Tensor, halo: int,
               bytes_per_pixel: float, *, outside: int = 0, least: int = 1,
               ndim: int = 2) -> torch.Tensor:
    """Fill ``out`` ``(..., *shape)`` block by block (see :func:`blocks`).

    ``filter_block(block)`` returns the filter's output on the block's region
    read, ``(..., *read shape)``; its pixels of the block are copied into
    ``out``. ``ndim``: the number of image axes at the end of ``out`` (2 for
    images, 3 for volumes). Returns ``out``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.engine.grid import run_blocks
    >>> vol = torch.arange(4 * 5 * 6.0).reshape(1, 4, 5, 6)
    >>> out = run_blocks(lambda b: b.read(vol) * 2, torch.empty_like(vol), 1, 8.0, ndim=3)
    >>> bool((out == 2 * vol).all())
    True
    """
    parts = blocks(out.shape[out.ndim - ndim:], halo, bytes_per_pixel, outside=outside,
                   least=least)
    with _engine_share():
        for block in parts:
            result = filter_block(block)
            out[(..., *block.own)] = result[(..., *block.inner)]
            del result
    return out
