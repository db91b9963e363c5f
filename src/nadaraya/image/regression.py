"""Classic kernel regression of images (Takeda, Farsiu and Milanfar 2007).

``t = [x]`` and ``Q = Q_x = I / (2 h^2)``: a Gaussian of standard deviation
``h`` pixels on positions alone. Order 0 is the Nadaraya-Watson mean (a
Gaussian blur normalised at the border); order 2 fits a local quadratic by
weighted least squares, which keeps ridges and corners sharper. The image
is fitted in blocks read with the window's radius as halo
(:mod:`nadaraya.engine.grid`): the working-memory budget bounds the
temporaries, and the result is the unblocked one, bit for bit for order 0
and to a few units in the last place for orders 1 and 2 (their moments are
matrix products, whose rounding follows the block's size).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import Block, run_blocks, window_offsets
from ..kernels.quadratic import classic_kernel
from ._dask import dask_image, is_dask, map_image
from ._image import as_image, check_positive
from ._layout import apply_layout, needs_layout
from ._poly import fit_numbers, local_fit
from ._progress import tracked

__all__ = ["default_radius", "kernel_regression"]


def default_radius(h: float, shape: tuple[int, int] | None = None) -> int:
    """Window radius covering three standard deviations: ``ceil(3 h)``, at least 1.

    With the image's ``shape`` (height, width), at most its larger side: a
    wider window reads only mirrored copies of the image (and a scale near
    the float range would ask for more offsets than memory holds).
    """
    reach = 3.0 * h if shape is None else min(3.0 * h, float(max(shape)))
    return max(1, math.ceil(reach - 1e-9))


def check_order(order: Any) -> int:
    if order not in (0, 1, 2) or isinstance(order, bool):
        raise NadarayaError(f"order must be 0, 1 or 2; got {order!r}.")
    return int(order)


def kernel_regression(image: Any, h: float, order: int = 0, *,
                      radius: int | None = None, channel_axis: int | None = -1,
                      batch_axis: int | None = None) -> Any:
    """Classic kernel regression: a local polynomial fit with a Gaussian of positions.

    At each pixel ``x``, minimise ``sum_j K(x, x_j) (y_j - P(x_j - x))^2`` over
    polynomials ``P`` of degree ``order``, with
    ``K = exp(-(x - x_j)^T Q_x (x - x_j))``, ``Q_x = I / (2 h^2)``, over the
    pixels ``j`` of a square window clipped to the image. Order 0 is the
    Nadaraya-Watson weighted mean.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a dask array gives a dask array, lazily (see :mod:`nadaraya.image`).
    h : float
        Standard deviation of the Gaussian, in pixels.
    order : {0, 1, 2}, default 0
        Degree of the local polynomial (2: local quadratic).
    radius : int, optional
        Half-side of the window; default ``ceil(3 h)``, at most the image's
        larger side. Near the border the
        window is clipped to the image.

    channel_axis : int or None, default -1
        The axis of the channels (scikit-image's ``channel_axis``); a 2-D
        image is gray whatever it says. None: no channels.
    batch_axis : int, optional
        An axis of independent images, each filtered on its own (see
        :mod:`nadaraya.image._layout`).

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import kernel_regression
    >>> ramp = np.add.outer(np.arange(16.0), np.arange(16.0))
    >>> np.allclose(kernel_regression(ramp, h=1.5, order=2), ramp)
    True
    """
    if needs_layout(image, channel_axis, batch_axis):
        return apply_layout(image, channel_axis, batch_axis, lambda x: kernel_regression(
            x, h, order, radius=radius), what="kernel_regression")
    dask = is_dask(image)
    img: Any = dask_image(image) if dask else as_image(image)
    h = check_positive(h, "h", "Pass the Gaussian's standard deviation in pixels.")
    order = check_order(order)
    if radius is None:
        radius = default_radius(h, img.shape)
    if not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    offsets = window_offsets(radius, 2, device=None if dask else img.device)
    kernel = classic_kernel(h)

    def region(values: torch.Tensor, block: Block, extras: Any = ()) -> torch.Tensor:
        return local_fit(values, kernel, offsets, order).value

    if dask:
        return map_image(region, img, radius)
    # an integer image is converted block by block, as the blocks are read
    per_pixel = img.itemsize * fit_numbers(img.channels, order) + img.read_bytes
    return img.back(run_blocks(tracked(lambda block: region(img.read(block), block)),
                               img.empty(), radius, per_pixel))
