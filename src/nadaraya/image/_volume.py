"""The bilateral filter and non-local means on 3-D volumes (microscopy stacks, MRI).

The same kernels as in 2-D with three position axes: ``t = [z, row, column;
values]`` for the bilateral filter, ``t = [z, row, column; cubic patch]`` for
non-local means, summed by the grid engine over a 3-D window of offsets
(:func:`nadaraya.engine.grid.grid_smooth`). A volume larger than the
working-memory budget is cut into blocks along all three axes, each read with
the halo its voxels depend on (:func:`nadaraya.engine.grid.run_blocks`): the
budget bounds the temporaries and the result is the uncut one bit for bit.
Voxels are taken as cubes: resample an anisotropic volume first, or scale its
spacing into the sigmas.
"""

from __future__ import annotations

from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import BORDERS, Block, grid_smooth, run_blocks, window_offsets
from ..kernels.quadratic import QuadraticKernel, nlm_kernel
from ._dask import is_dask, refuse
from ._layout import VolumeImage, as_volume
from ._progress import tracked

__all__ = ["bilateral_volume", "nlm_volume"]


def _volume(volume: Any) -> VolumeImage:
    if is_dask(volume):
        raise refuse("a volume (3 spatial axes)", "compute it first (volume.compute()), or "
                     "filter its slices as a batch with batch_axis=0.")
    return as_volume(volume)


def _mean(values: torch.Tensor, state: Any) -> torch.Tensor:
    return state.mean().T.reshape(values.shape)


def _blocked(data: torch.Tensor, region: Any, halo: int, per_channel: int, per_voxel: int,
             outside: int = 0, least: int = 1) -> torch.Tensor:
    """``region(block)`` of ``data`` ``(c, D, H, W)`` block by block, ``(c, D, H, W)``;
    ``per_channel`` and ``per_voxel`` temporary numbers per voxel of a region read."""
    per_pixel = data.element_size() * (per_channel * data.shape[0] + per_voxel)
    return run_blocks(tracked(region), torch.empty_like(data), halo, per_pixel,
                      outside=outside, least=least, ndim=3)


def bilateral_volume(volume: Any, kernel: QuadraticKernel, radius: int, window: str,
                     border: str) -> Any:
    """:func:`~nadaraya.image.bilateral` of a ``(depth, height, width[, channels])`` volume.

    ``kernel`` is the bilateral kernel with 3 position axes
    (:func:`~nadaraya.kernels.quadratic.bilateral_kernel` with ``ndim=3``);
    ``radius`` bounds the 3-D window. Returns the volume's shape, dtype and range.
    """
    from ._windowed import _PER_CHANNEL, _PER_PIXEL

    vol = _volume(volume)
    data = vol.data
    offsets = window_offsets(radius, 3, window, device=data.device)

    def region(block: Block) -> torch.Tensor:
        values = block.read(data, border)
        state = grid_smooth(values, kernel, offsets, border=border, keys_outside=True)
        return _mean(values, state)

    # keys beyond the border are read through it; "wrap" reads the far side
    out = _blocked(data, region, radius, _PER_CHANNEL, _PER_PIXEL,
                   outside=radius if border == "wrap" else 0)
    return vol.back(out)


def nlm_volume(volume: Any, h: float, patch: torch.Tensor, search_radius: int | None,
               sigma: float, border: str) -> Any:
    """:func:`~nadaraya.image.non_local_means` of a ``(depth, height, width[, channels])``
    volume with cubic patch weights ``patch`` ``(P, P, P)``; returns the volume's shape,
    dtype and range."""
    vol = _volume(volume)
    size = int(patch.shape[0])
    shape = tuple(int(s) for s in vol.data.shape[1:])
    if size > min(shape):
        raise NadarayaError(f"patch_size {size} is larger than the volume {shape}; use a "
                            f"patch_size of at most {min(shape) - (min(shape) + 1) % 2}.")
    if search_radius is None:
        raise NadarayaError("search_radius=None (every voxel against every voxel) is for 2-D "
                            "images; give volumes an integer search_radius.")
    if border not in BORDERS:
        raise NadarayaError(f"border must be one of {', '.join(map(repr, BORDERS))}; "
                            f"got {border!r}.")
    from .nlm import _PER_CHANNEL, _PER_PIXEL, filter_region, nlm_halo

    kernel = nlm_kernel(h, patch, vol.channels, sigma=sigma)
    data = vol.data
    offsets = window_offsets(search_radius, 3, device=data.device)

    def region(block: Block) -> torch.Tensor:
        return filter_region(block.read(data, border), kernel, offsets, border,
                             block.inside(data.device))

    # "wrap" reads the far side of the volume: the patches beyond a border a block meets
    out = _blocked(data, region, nlm_halo(kernel, offsets), _PER_CHANNEL, _PER_PIXEL,
                   outside=size // 2 if border == "wrap" else 0, least=size)
    return vol.back(out)
