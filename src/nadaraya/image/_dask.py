"""Image filters on dask arrays: one ``map_overlap`` with the halo the filter needs.

A filter whose output at a pixel depends on its input only within ``halo``
pixels of it (:mod:`nadaraya.engine.grid`) gives, on a chunk read
together with that halo, the same output on the chunk's own pixels as on the
whole image. :func:`map_image` runs the filter's region function on every
chunk through :func:`dask.array.map_overlap` with ``depth = halo`` and
``boundary="none"``: the region a chunk sees is the chunk grown by the halo
and clipped to the image, exactly the region of the in-memory filter's
blocks, so the filter's own border rule applies at the true border only.
For ``border="wrap"`` the axes cut into several chunks are read with
``boundary="periodic"`` and cropped to the ``outside`` pixels the in-memory
blocks read beyond the border (:meth:`~nadaraya.engine.grid.Block.read`).

Whatever a filter derives from the whole image (the data range, the noise
level, the default window from the image's size) is computed once by the
caller and closed over by the region function. Chunks smaller than the halo
(``map_overlap`` needs ``chunks >= depth``) are merged with their neighbours
first. Dask is imported here only, when a filter meets a dask array.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._config import config_context, get_config
from .._errors import NadarayaError
from ..engine.grid import Block
from ._image import Image, as_image, check_positive

__all__ = ["DaskImage", "dask_image", "data_range", "is_dask", "map_image", "refuse"]

#: A filter's computation on one region read, ``(c, h, w)`` -> ``(c, h, w)``, given
#: the region's block (image coordinates) and the regions of its extra inputs.
RegionFilter = Callable[[torch.Tensor, Block, Sequence[torch.Tensor]], torch.Tensor]


def is_dask(x: Any) -> bool:
    """Whether ``x`` is a dask array (without importing dask)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(x, module.Array)


@dataclass
class DaskImage:
    """A dask image checked like :func:`~nadaraya.image._image.as_image` checks an array.

    Attributes
    ----------
    array : dask.array.Array of shape (height, width) or (height, width, channels)
        The pixels, the channel axis in one chunk (bool read as uint8).
    dtype : numpy dtype
        The dtype of the filters' results.
    compute : torch.dtype
        The dtype the filters compute in (float64 for float64 images, else float32).
    """

    array: Any
    dtype: np.dtype
    compute: torch.dtype

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.array.shape[0]), int(self.array.shape[1])

    @property
    def channels(self) -> int:
        return 1 if self.array.ndim == 2 else int(self.array.shape[2])

    @property
    def integer(self) -> bool:
        return self.dtype.kind != "f"


def dask_image(image: Any, name: str = "image") -> DaskImage:
    """Check a dask image: the errors of :func:`~nadaraya.image._image.as_image` for its
    dtype, shape and channels, and known chunk sizes; the channel axis is put in one
    chunk (1 to 4 channels)."""
    shape = tuple(image.shape)
    if len(shape) not in (2, 3):
        raise NadarayaError(
            f"{name} must be 2-D (height, width) or 3-D (height, width, channels); got shape "
            f"{shape}. For a batch pass batch_axis, for a volume channel_axis=None "
            "(see nadaraya.image._layout)."
        )
    if any(isinstance(n, float) for n in shape) or any(
            n != n for axis in image.chunks for n in axis):
        raise NadarayaError(
            f"{name} is a dask array of unknown chunk sizes {image.chunks}; the filters need "
            f"them to place each chunk's halo. Call {name}.compute_chunk_sizes() first."
        )
    # the dtype and the channels, checked on one pixel: the in-memory filters' messages
    as_image(np.zeros((1, 1, *shape[2:]), dtype=image.dtype), name)
    if min(shape[:2]) < 1:
        raise NadarayaError(f"{name} is empty (shape {shape}).")
    array = image.astype(np.uint8) if image.dtype == np.bool_ else image
    if array.ndim == 3 and len(array.chunks[2]) > 1:
        array = array.rechunk({2: -1})
    dtype = np.dtype(array.dtype)
    return DaskImage(array, dtype, torch.float64 if dtype == np.float64 else torch.float32)


def data_range(img: DaskImage, given: float | None = None) -> float:
    """:func:`~nadaraya.image._image.data_range_of` of a dask image (one pass for floats)."""
    if given is not None:
        return check_positive(given, "data_range", "Pass e.g. 255 or 1.0.")
    if img.integer:
        return float(np.iinfo(img.dtype).max)
    import dask

    # as the in-memory filters see it: in the compute dtype (float16 widened exactly)
    pixels = img.array.astype(np.float64 if img.compute == torch.float64 else np.float32)
    top, bottom = (float(v) for v in dask.compute(pixels.max(), pixels.min()))
    return (top - bottom) or max(abs(top), abs(bottom)) or 1.0


def refuse(what: str, fix: str) -> NadarayaError:
    """The error for a parameter a dask image needs given."""
    return NadarayaError(f"{what} on a dask image would need the whole image in memory; {fix}")


def _least_chunks(chunks: Sequence[int], least: int) -> tuple[int, ...]:
    """``chunks`` merged with their neighbours until each is at least ``least`` (or the
    axis is one chunk)."""
    out: list[int] = []
    for n in chunks:
        if out and out[-1] < least:
            out[-1] += n
        else:
            out.append(n)
    if len(out) > 1 and out[-1] < least:
        last = out.pop()
        out[-1] += last
    return tuple(out)


def _starts(chunks: Sequence[int]) -> list[int]:
    return list(np.cumsum([0, *chunks]).tolist())


def map_image(region_filter: RegionFilter, img: DaskImage, halo: int, *,
              extras: Sequence[Any] = (), outside: int = 0, least: int = 1,
              wrap: bool = False) -> Any:
    """Apply ``region_filter`` to every chunk of ``img`` read with ``halo``, lazily.

    Parameters
    ----------
    region_filter : callable
        ``region_filter(region, block, extra_regions)``: the filter on the
        region read ``(c, h, w)`` of the compute dtype, ``block`` the region's
        place in the image (:class:`~nadaraya.engine.grid.Block`),
        ``extra_regions`` the same region of each of ``extras``. Returns the
        filtered region ``(c, h, w)``.
    img : DaskImage
    halo : int
        Pixels an output depends on beyond its own, per axis.
    extras : sequence of dask arrays of shape (height, width, channels')
        Further per-pixel inputs (a pilot estimate), chunked like the image
        (they are rechunked to it).
    outside, least : int
        As in :func:`~nadaraya.engine.grid.blocks`: pixels read
        beyond each image border a region meets (``wrap``), and the least
        side of a chunk.
    wrap : bool
        Whether the filter reads the far side of the image beyond its border.

    Returns
    -------
    dask.array.Array
        The filtered image: ``img``'s shape and chunks, after the merges
        that give every chunk at least ``max(halo, least)`` pixels (``halo +
        outside`` with ``wrap``); dtype ``img.dtype``.
    """
    import dask.array as da

    array = img.array
    height, width = img.shape
    # with "wrap", chunks of at least halo + outside pixels: only the first and last chunk
    # of an axis then read beyond the border, and the periodic boundary gives them that
    reach = halo + (outside if wrap else 0)
    chunks = [_least_chunks(c, max(reach, least, 1)) for c in array.chunks[:2]]
    if tuple(chunks) != tuple(array.chunks[:2]):
        array = array.rechunk({0: chunks[0], 1: chunks[1]})
    cut = [len(c) > 1 for c in chunks]
    # an axis in one chunk is read whole
    depth = {0: reach if cut[0] else 0, 1: reach if cut[1] else 0}
    boundary: dict[int, str] = {k: "periodic" if wrap and cut[k] else "none" for k in (0, 1)}
    if array.ndim == 3:
        depth[2], boundary[2] = 0, "none"
    extras = [e.rechunk(array.chunks[:2] + e.chunks[2:]) for e in extras]
    starts = [_starts(c) for c in chunks]
    budget = get_config().working_memory
    gray, dtype = array.ndim == 2, img.dtype

    def one(*regions: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
        assert block_info is not None
        i, j = block_info[0]["chunk-location"][:2]
        rows, cols = (starts[0][i], starts[0][i + 1]), (starts[1][j], starts[1][j + 1])
        spans = []
        crop = []
        for (lo, hi), n, k in ((rows, height, 0), (cols, width, 1)):
            if not cut[k]:
                spans.append((lo, hi))
                crop.append(slice(None))
                continue
            got_lo = lo - (reach if boundary[k] == "periodic" or lo > 0 else 0)
            want_lo = max(lo - halo, 0)
            want_hi = min(hi + halo, n)
            if wrap:  # beyond a border the in-memory blocks read ``outside`` pixels
                want_lo = want_lo - outside if want_lo == 0 else want_lo
                want_hi = want_hi + outside if want_hi == n else want_hi
            spans.append((want_lo, want_hi))
            crop.append(slice(want_lo - got_lo, want_hi - got_lo))
        block = Block(rows, cols, spans[0], spans[1], (height, width))
        with config_context(working_memory=budget):
            main = as_image(regions[0][crop[0], crop[1]])
            others = [as_image(r[crop[0], crop[1]], dtype=main.data.dtype).data
                      for r in regions[1:]]
            out = region_filter(main.data, block, others)
        rows_in, cols_in = block.inner
        # a copy of the chunk's own pixels: the region read is released
        return np.ascontiguousarray(Image(out, gray, dtype, False).back(
            out[:, rows_in, cols_in]))

    meta = np.empty((0,) * array.ndim, dtype=dtype)
    return da.map_overlap(one, array, *extras, depth=depth, boundary=boundary, trim=False,
                          chunks=array.chunks, dtype=dtype, meta=meta,
                          align_arrays=False)
