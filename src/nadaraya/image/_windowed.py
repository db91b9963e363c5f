"""A window filter on the grid engine, in blocks: what the bilateral filter and kernel_filter share.

The image (in memory or a dask array) is filtered with one grid kernel over a
window of offsets, keys beyond the border read through it; in memory, in
blocks read with the window's radius as halo (:mod:`nadaraya.engine.grid`), so
the working-memory budget bounds the temporaries and the result is the
unblocked one bit for bit; a dask image through ``map_overlap`` with that halo.
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine.grid import Block, grid_smooth, run_blocks, window_offsets
from ..kernels.quadratic import QuadraticKernel
from ._dask import map_image
from ._progress import tracked

__all__ = ["windowed_filter"]

# Temporary numbers per pixel and channel of a block (padded values, their window ranges,
# state, mean), and per pixel (total, offset, the engine's tile): 7.2 in all for one channel,
# measured by benchmarks/bench_peak_memory.py, with a margin.
_PER_CHANNEL, _PER_PIXEL = 6, 3


def windowed_filter(img: Any, dask: bool, kernel: QuadraticKernel, radius: int, window: str,
                    border: str) -> Any:
    """Filter a checked image with ``kernel`` over a window of ``radius``.

    Parameters
    ----------
    img : Image or DaskImage
        From :func:`~nadaraya.image._image.as_image` or
        :func:`~nadaraya.image._dask.dask_image`.
    dask : bool
        Whether ``img`` is a dask image.
    kernel : QuadraticKernel
        The grid kernel on ``t = [row, column, channels]``.
    radius : int
        The window's radius (>= 1).
    window : {"disk", "square"}
    border : {"reflect", "symmetric", "edge", "wrap"}

    Returns
    -------
    ndarray, torch.Tensor or dask array
        Same shape, dtype and range as the caller's image.
    """
    offsets = window_offsets(radius, 2, window, device=None if dask else img.device)

    def region(values: torch.Tensor, block: Block, extras: Any = ()) -> torch.Tensor:
        state = grid_smooth(values, kernel, offsets, border=border, keys_outside=True)
        return state.mean().T.reshape(values.shape)

    # keys beyond the border are read through it; "wrap" reads the far side of the image
    outside = radius if border == "wrap" else 0
    if dask:
        return map_image(region, img, radius, outside=outside, wrap=border == "wrap")
    # an integer image is converted block by block, as the blocks are read
    per_pixel = img.itemsize * (_PER_CHANNEL * img.channels + _PER_PIXEL) + img.read_bytes
    out = run_blocks(tracked(lambda block: region(img.read(block, border), block)),
                     img.empty(), radius, per_pixel, outside=outside)
    return img.back(out)
