"""The bilateral filter (Tomasi and Manduchi 1998) as a quadratic-form kernel.

``t = [x; y(x)]`` (position and the pixel's channels) and

    Q = blockdiag(I / (2 sigma_spatial^2), I_c / (2 sigma_color^2))

so ``K = exp(-||x_i - x_j||^2 / (2 sigma_spatial^2) - ||y_i - y_j||^2 / (2 sigma_color^2))``.
Volumes (3 position axes) run through :mod:`nadaraya.image._volume`.
The image is filtered in blocks read with the window's radius as halo
(:mod:`nadaraya.engine.grid`): the working-memory budget bounds the
temporaries, and the result is the unblocked one bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ..kernels.quadratic import bilateral_kernel
from ._dask import dask_image, is_dask
from ._image import as_image, check_positive
from ._layout import apply_layout
from ._volume import bilateral_volume
from ._windowed import windowed_filter

__all__ = ["bilateral"]

def opencv_radius(sigma_spatial: float, shape: tuple[int, ...] | None = None) -> int:
    """OpenCV's window radius when ``d <= 0``: ``max(round(1.5 sigma_spatial), 1)``.

    With the image's ``shape`` (height, width) or the volume's, at most its
    larger side (see :func:`~nadaraya.image.regression.default_radius`).
    """
    reach = 1.5 * sigma_spatial if shape is None else min(1.5 * sigma_spatial,
                                                          float(max(shape)))
    return max(round(reach), 1)


def _kernel(sigma_spatial: float, sigma_color: float, ndim: int = 2) -> Any:
    """The bilateral kernel; its range errors name this function's ``sigma_spatial``."""
    try:
        return bilateral_kernel(sigma_spatial, sigma_color, ndim=ndim)
    except NadarayaError as exc:
        raise NadarayaError(str(exc).replace("sigma_space", "sigma_spatial")) from None


def _sigma_color(image: Any) -> float:
    """scikit-image's default ``sigma_color``: the standard deviation of the image."""
    if is_dask(image):
        return float(image.astype("float64").std().compute())
    if isinstance(image, torch.Tensor):
        return float(image.detach().double().std(unbiased=False))
    return float(np.asarray(image, dtype=np.float64).std())


def bilateral(image: Any, sigma_color: float | None = None, sigma_spatial: float = 1.0,
              radius: int | None = None, *, channel_axis: int | None = -1,
              batch_axis: int | None = None, window: str = "disk", border: str = "reflect",
              sigma_space: float | None = None) -> Any:
    """Edge-preserving smoothing: neighbours weigh by distance and by colour difference.

    ``out(x) = sum_j K(t_x, t_j) y_j / sum_j K(t_x, t_j)`` over the pixels ``j``
    of a window around ``x``, with ``t = [position; colour]`` and the
    quadratic form ``Q = blockdiag(I / (2 sigma_spatial^2), I_c / (2 sigma_color^2))``.
    With the defaults it follows OpenCV's ``cv2.bilateralFilter(img, 0,
    sigma_color, sigma_spatial)``: a disk window of radius
    ``max(round(1.5 sigma_spatial), 1)``, borders mirrored without repeating
    the edge pixel (BORDER_REFLECT_101) and those mirrored pixels counted as
    neighbours. For colour images the colour distance is Euclidean over the
    channels (OpenCV's 8-bit version uses the sum of absolute differences).

    The two sigmas come in scikit-image's order and names,
    ``denoise_bilateral(image, sigma_color=..., sigma_spatial=...)``, and
    OpenCV's, ``bilateralFilter(src, d, sigmaColor, sigmaSpace)``; the
    window (their ``win_size`` and ``d``) is ``radius``, after them.
    Earlier versions took ``(image, sigma_space, sigma_color)``: positional
    calls written for them must swap the two numbers; the keyword
    ``sigma_space=`` is still accepted as another name of ``sigma_spatial``.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        An image ``(height, width)`` or with a channel axis (see
        ``channel_axis``), a volume ``(depth, height, width[, channels])``
        with ``channel_axis=None`` or 4 axes, or a batch of them
        (``batch_axis``); uint8, uint16 or float in any range. A torch tensor
        stays on its device (CUDA included); a 2-D dask array gives a dask
        array, lazily (see :mod:`nadaraya.image`).
    sigma_color : float, optional
        Standard deviation of the colour Gaussian, in the image's units
        (0-255 for uint8); default the standard deviation of the image's
        values (scikit-image's default).
    sigma_spatial : float, default 1.0
        Standard deviation of the spatial Gaussian, in pixels (voxels).
    radius : int, optional
        Window radius in pixels; default ``max(round(1.5 sigma_spatial), 1)``
        (OpenCV's ``d = 0``; pass ``d // 2`` to match a given ``d``), at most
        the image's larger side.
    channel_axis : int or None, default -1
        The axis of the channels (scikit-image's ``channel_axis``); a 2-D
        image is gray whatever it says. None: no channels, a 3-D array is a
        gray volume.
    batch_axis : int, optional
        An axis of independent images (or volumes), each filtered on its own.
    window : {"disk", "square"}, default "disk"
        Offsets with ``||o|| <= radius`` (OpenCV) or ``|o_k| <= radius``.
    border : {"reflect", "symmetric", "edge", "wrap"}, default "reflect"
        How pixels beyond the border are read.
    sigma_space : float, optional
        Another name of ``sigma_spatial``, as a keyword.

    Returns
    -------
    ndarray, torch.Tensor or dask array
        Same shape, dtype, range and axis order as ``image`` (integer results
        are rounded).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import bilateral
    >>> img = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
    >>> bilateral(img, 30, 3).dtype
    dtype('uint8')
    >>> vol = np.random.default_rng(0).random((8, 16, 16))
    >>> bilateral(vol, sigma_color=0.2, sigma_spatial=1.0, channel_axis=None).shape
    (8, 16, 16)
    """
    if sigma_space is not None:
        if sigma_spatial != 1.0:
            raise NadarayaError("sigma_space and sigma_spatial are the same parameter; give "
                                f"one (got sigma_space={sigma_space!r}, "
                                f"sigma_spatial={sigma_spatial!r}).")
        sigma_spatial = sigma_space
    sigma_spatial = check_positive(sigma_spatial, "sigma_spatial",
                                   "Pass the spatial s.d. in pixels.")
    if sigma_color is not None:
        sigma_color = check_positive(sigma_color, "sigma_color",
                                     "Pass the colour s.d. in the image's units (0-255 for "
                                     "uint8).")
    if radius is not None and (isinstance(radius, bool) or not isinstance(radius, int)
                               or radius < 1):
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")

    def colour_sd(x: Any) -> float:
        if sigma_color is not None:
            return sigma_color
        return check_positive(_sigma_color(x), "sigma_color",
                              "The image is constant: its standard deviation, the default "
                              "sigma_color, is 0; pass sigma_color.")

    def planar(x: Any) -> Any:
        dask = is_dask(x)
        img: Any = dask_image(x) if dask else as_image(x)
        r = opencv_radius(sigma_spatial, img.shape) if radius is None else radius
        return windowed_filter(img, dask, _kernel(sigma_spatial, colour_sd(x)), r,
                               window, border)

    def volume(x: Any) -> Any:
        r = opencv_radius(sigma_spatial, tuple(x.shape[:3])) if radius is None else radius
        return bilateral_volume(x, _kernel(sigma_spatial, colour_sd(x), 3), r, window, border)

    return apply_layout(image, channel_axis, batch_axis, planar, volume,
                        what="the bilateral filter")
