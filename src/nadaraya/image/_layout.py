"""scikit-image's array conventions: ``channel_axis``, volumes and batches.

A filter's own code sees one image in a canonical layout: ``(height, width)``
or ``(height, width, channels)``, or for a volume ``(depth, height, width)``
or ``(depth, height, width, channels)``. :func:`apply_layout` brings the
caller's array there and back:

* ``channel_axis`` (default ``-1``): the axis holding the channels. A 2-D
  array is gray whatever it says; a 3-D array has channels on that axis; a
  4-D array is a volume with channels on that axis. ``None``: no channel
  axis, so a 3-D array is a gray volume (scikit-image's meaning).
* ``batch_axis`` (default ``None``): an axis indexing independent images
  (or volumes), each filtered on its own; axes are numbered in the caller's
  array, before the batch axis is taken out.

NumPy arrays, torch tensors and dask arrays are moved with their own
``moveaxis``; results have the caller's axis order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._dask import is_dask
from ._image import Image, as_image

__all__ = ["VolumeImage", "apply_layout", "as_volume", "check_axis", "needs_layout"]

Filter = Callable[[Any], Any]


def _module(x: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``moveaxis`` and ``stack`` of the array's own library."""
    if isinstance(x, torch.Tensor):
        return torch.movedim, torch.stack
    if is_dask(x):
        import dask.array as da

        return da.moveaxis, da.stack
    return np.moveaxis, np.stack


def check_axis(axis: Any, ndim: int, name: str) -> int:
    """``axis`` as a non-negative index into ``ndim`` axes, or a NadarayaError naming ``name``."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not (
            -ndim <= int(axis) < ndim):
        raise NadarayaError(f"{name} must be an integer axis of the image's {ndim} axes "
                            f"(-{ndim} to {ndim - 1}) or None; got {axis!r}.")
    return int(axis) % ndim


def needs_layout(image: Any, channel_axis: Any, batch_axis: Any) -> bool:
    """Whether ``image`` is not in the default layout (2-D, or channels last)."""
    ndim = getattr(image, "ndim", None)
    if ndim is None:
        ndim = np.ndim(image)
    return batch_axis is not None or channel_axis != -1 or int(ndim) > 3


def apply_layout(image: Any, channel_axis: int | None, batch_axis: int | None,
                 planar: Filter, volume: Filter | None = None, *,
                 name: str = "image", what: str = "this filter") -> Any:
    """Run ``planar`` (2-D images) or ``volume`` (3-D volumes) in the canonical layout.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
    channel_axis, batch_axis : int or None
        See :mod:`nadaraya.image._layout`.
    planar : callable
        Filters one ``(height, width[, channels])`` image.
    volume : callable, optional
        Filters one ``(depth, height, width[, channels])`` volume; None:
        volumes are refused.
    name, what : str
        How messages name the image and the filter.

    Returns
    -------
    Same kind, shape and axis order as ``image``.

    Examples
    --------
    >>> import numpy as np
    >>> apply_layout(np.zeros((3, 4, 5)), 0, None, lambda x: x + 1).shape
    (3, 4, 5)
    """
    if not isinstance(image, torch.Tensor) and not is_dask(image):
        image = np.asarray(image)
    ndim = int(image.ndim)
    if batch_axis is None and channel_axis == -1 and ndim <= 3:
        return planar(image)  # the default layout: nothing to move
    if ndim < 2:
        raise NadarayaError(f"{name} must have at least 2 axes; got shape {tuple(image.shape)}.")
    move, stack = _module(image)
    batch = None if batch_axis is None else check_axis(batch_axis, ndim, "batch_axis")
    chan = None if channel_axis is None else check_axis(channel_axis, ndim, "channel_axis")
    if chan is not None and chan == batch:
        raise NadarayaError(f"channel_axis and batch_axis name the same axis ({chan}); give "
                            "them different axes, or channel_axis=None.")
    spatial = ndim - (batch is not None) - (chan is not None)
    if chan is not None and ndim - (batch is not None) == 2:
        chan, spatial = None, 2  # a 2-D image is gray whatever channel_axis says
    if spatial not in (2, 3):
        raise NadarayaError(
            f"{name} of shape {tuple(image.shape)} with channel_axis={channel_axis!r} and "
            f"batch_axis={batch_axis!r} has {spatial} spatial axes; expected 2 (an image) or "
            "3 (a volume). Set channel_axis (and batch_axis for a batch).")
    if spatial == 3 and volume is None:
        raise NadarayaError(f"{what} filters 2-D images only; got a volume (3 spatial axes "
                            f"of {name} with shape {tuple(image.shape)}). Pass channel_axis "
                            "if one axis holds channels, or use bilateral or non_local_means.")
    run = planar if spatial == 2 else volume
    source = [a for a in (batch, chan) if a is not None]
    target = ([0] if batch is not None else []) + ([-1] if chan is not None else [])
    moved = move(image, source, target) if source else image

    def one(x: Any) -> Any:
        if chan is not None and int(x.shape[-1]) > 4 and spatial == 2:
            raise NadarayaError(f"{name} has {int(x.shape[-1])} channels on channel_axis "
                                f"{channel_axis}; expected 1 to 4.")
        return run(x)

    out = one(moved) if batch is None else stack([one(x) for x in moved])
    return move(out, target, source) if source else out


@dataclass
class VolumeImage(Image):
    """An :class:`~nadaraya.image._image.Image` whose data are ``(channels, depth, height,
    width)``; ``layout`` is the caller's shape, which :meth:`back` restores."""

    layout: tuple[int, ...] = ()

    def back(self, out: torch.Tensor) -> Any:
        planar = out.reshape(out.shape[0], -1, out.shape[-1])
        return super().back(planar).reshape(self.layout)


def as_volume(volume: Any, name: str = "image") -> VolumeImage:
    """A checked volume ``(depth, height, width[, channels])`` as a :class:`VolumeImage`.

    The values are checked as :func:`~nadaraya.image._image.as_image` checks an
    image (dtype, finiteness, 1 to 4 channels).
    """
    is_torch = isinstance(volume, torch.Tensor)
    v = volume if is_torch else np.asarray(volume)
    if v.ndim not in (3, 4) or min(v.shape) < 1:
        raise NadarayaError(f"{name} must be a volume (depth, height, width[, channels]); got "
                            f"shape {tuple(v.shape)}.")
    depth = int(v.shape[0])
    img = as_image(v.reshape(depth * v.shape[1], *v.shape[2:]), name)  # slices stacked
    data = img.data.reshape(img.channels, depth, -1, img.data.shape[-1])
    return VolumeImage(data, img.gray, img.dtype, img.is_torch, tuple(v.shape))
