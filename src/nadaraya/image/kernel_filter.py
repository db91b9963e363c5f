"""An image filtered with a kernel object: the bilateral filter and its relatives as kernels.

The same :class:`~nadaraya.kernels.Kernel` that a regressor fits with and an
attention module trains serves here: over ``t = [row, column, channels...]``,
``Gaussian(s).on([0, 1]) * Gaussian(c).on([2])`` is the bilateral filter of a
gray image, ``Gaussian(h).on([0, 1])`` classic kernel regression, a Gaussian
with a metric on the position a steered (anisotropic) window. The kernel is read
as the quadratic form the grid engine computes (:mod:`._form`), and the image is
filtered in blocks read with the window's radius as halo
(:mod:`nadaraya.engine.grid`), as :func:`~nadaraya.image.bilateral` is.
"""

from __future__ import annotations

from typing import Any

from .._errors import NadarayaError
from ..engine.grid import BORDERS
from ..kernels import Kernel
from ._dask import dask_image, is_dask
from ._form import quadratic_form
from ._image import as_image
from ._layout import apply_layout, needs_layout
from ._windowed import windowed_filter

__all__ = ["kernel_filter"]

def kernel_filter(image: Any, kernel: Kernel, radius: int, *, window: str = "square",
                  border: str = "reflect", channel_axis: int | None = -1,
                  batch_axis: int | None = None) -> Any:
    """Smooth an image with a kernel on ``t = [row, column, channels...]``.

    ``out(x) = sum_j K(t_x, t_j) y_j / sum_j K(t_x, t_j)`` over the pixels ``j``
    of a window around ``x``, where ``t_j`` is pixel ``j``'s position (in
    pixels) followed by its channel values (in the image's units: 0-255 for
    uint8). Pixels beyond the border are read through ``border`` and counted
    as neighbours, as OpenCV's filters do.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a torch tensor stays on its device; a dask array gives a dask array,
        lazily (see :mod:`nadaraya.image`).
    kernel : Kernel
        A kernel whose scores are a quadratic form of ``t - t'``: a Gaussian
        (one bandwidth, one per column, or a metric), products of Gaussians on
        column groups (``.on(columns)``), or a
        :class:`~nadaraya.kernels.quadratic.QuadraticKernel`. Columns 0 and 1
        are the row and column; 2 onwards the channels. A learnable kernel is
        used at its current bandwidth.
    radius : int
        Half-side of the window (``window="square"``) or its radius (``"disk"``).
    window : {"square", "disk"}, default "square"
        Offsets with ``|o_k| <= radius`` or ``||o|| <= radius``.
    border : {"reflect", "symmetric", "edge", "wrap"}, default "reflect"
        How pixels beyond the border are read.

    channel_axis : int or None, default -1
        The axis of the channels (scikit-image's ``channel_axis``); a 2-D
        image is gray whatever it says. None: no channels.
    batch_axis : int, optional
        An axis of independent images, each filtered on its own (see
        :mod:`nadaraya.image._layout`).

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image`` (uint8 results are rounded).

    Raises
    ------
    NadarayaError
        If the kernel is not such a form (a Laplacian, a softmax kernel...),
        couples position and channel columns, or reads columns the image does
        not have.

    Examples
    --------
    The bilateral filter of a gray image, as a product of two Gaussians:

    >>> import numpy as np
    >>> from nadaraya.image import bilateral, kernel_filter
    >>> from nadaraya.kernels import Gaussian
    >>> img = np.random.default_rng(0).integers(0, 256, (32, 32), dtype=np.uint8)
    >>> k = Gaussian(3.0).on([0, 1]) * Gaussian(30.0).on([2])
    >>> out = kernel_filter(img, k, radius=4, window="disk")
    >>> bool((out == bilateral(img, 30.0, 3.0, radius=4)).all())
    True
    """
    if needs_layout(image, channel_axis, batch_axis):
        return apply_layout(image, channel_axis, batch_axis, lambda x: kernel_filter(
            x, kernel, radius, window=window, border=border), what="kernel_filter")
    dask = is_dask(image)
    img: Any = dask_image(image) if dask else as_image(image)
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    if border not in BORDERS:
        raise NadarayaError(f"border must be one of {', '.join(map(repr, BORDERS))}; "
                            f"got {border!r}.")
    channels = img.channels
    return windowed_filter(img, dask, quadratic_form(kernel, channels), radius, window,
                           border)
