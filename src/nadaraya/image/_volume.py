"""The bilateral filter and non-local means on 3-D volumes (microscopy stacks, MRI).

The same kernels as in 2-D with three position axes: ``t = [z, row, column;
values]`` for the bilateral filter, ``t = [z, row, column; cubic patch]`` for
non-local means, summed by the grid engine over a 3-D window of offsets
(:func:`nadaraya.engine.grid.grid_smooth`, which tiles the volume along its
first axis within the working-memory budget). Voxels are taken as cubes:
resample an anisotropic volume first, or scale its spacing into the sigmas.
"""

from __future__ import annotations

from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import BORDERS, grid_smooth, window_offsets
from ..kernels.quadratic import QuadraticKernel, nlm_kernel
from ._dask import is_dask, refuse
from ._layout import VolumeImage, as_volume
from ._progress import done

__all__ = ["bilateral_volume", "nlm_volume"]


def _volume(volume: Any) -> VolumeImage:
    if is_dask(volume):
        raise refuse("a volume (3 spatial axes)", "compute it first (volume.compute()), or "
                     "filter its slices as a batch with batch_axis=0.")
    return as_volume(volume)


def _mean(values: torch.Tensor, state: Any) -> torch.Tensor:
    return state.mean().T.reshape(values.shape)


def bilateral_volume(volume: Any, kernel: QuadraticKernel, radius: int, window: str,
                     border: str) -> Any:
    """:func:`~nadaraya.image.bilateral` of a ``(depth, height, width[, channels])`` volume.

    ``kernel`` is the bilateral kernel with 3 position axes
    (:func:`~nadaraya.kernels.quadratic.bilateral_kernel` with ``ndim=3``);
    ``radius`` bounds the 3-D window. Returns the volume's shape, dtype and range.
    """
    vol = _volume(volume)
    offsets = window_offsets(radius, 3, window, device=vol.data.device)
    state = grid_smooth(vol.data, kernel, offsets, border=border, keys_outside=True)
    done(vol.data[0].numel())
    return vol.back(_mean(vol.data, state))


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
    kernel = nlm_kernel(h, patch, vol.channels, sigma=sigma)
    offsets = window_offsets(search_radius, 3, device=vol.data.device)
    state = grid_smooth(vol.data, kernel, offsets, border=border, keys_outside=False)
    done(vol.data[0].numel())
    return vol.back(_mean(vol.data, state))
