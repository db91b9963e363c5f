"""The bilateral filter (Tomasi and Manduchi 1998) as a quadratic-form kernel.

``t = [x; y(x)]`` (position and the pixel's channels) and

    Q = blockdiag(I / (2 sigma_space^2), I_c / (2 sigma_color^2))

so ``K = exp(-||x_i - x_j||^2 / (2 sigma_space^2) - ||y_i - y_j||^2 / (2 sigma_color^2))``.
The image is filtered in blocks read with the window's radius as halo
(:mod:`nadaraya.engine.grid`): the working-memory budget bounds the
temporaries, and the result is the unblocked one bit for bit.
"""

from __future__ import annotations

from typing import Any

from .._errors import NadarayaError
from ..kernels.quadratic import bilateral_kernel
from ._dask import dask_image, is_dask
from ._io import as_image, check_positive
from ._windowed import windowed_filter

__all__ = ["bilateral"]

def opencv_radius(sigma_space: float, shape: tuple[int, int] | None = None) -> int:
    """OpenCV's window radius when ``d <= 0``: ``max(round(1.5 sigma_space), 1)``.

    With the image's ``shape`` (height, width), at most its larger side (see
    :func:`~nadaraya.image.regression.default_radius`).
    """
    reach = 1.5 * sigma_space if shape is None else min(1.5 * sigma_space, float(max(shape)))
    return max(round(reach), 1)


def bilateral(image: Any, sigma_space: float, sigma_color: float, radius: int | None = None,
              *, window: str = "disk", border: str = "reflect") -> Any:
    """Edge-preserving smoothing: neighbours weigh by distance and by colour difference.

    ``out(x) = sum_j K(t_x, t_j) y_j / sum_j K(t_x, t_j)`` over the pixels ``j``
    of a window around ``x``, with ``t = [position; colour]`` and the
    quadratic form ``Q = blockdiag(I / (2 sigma_space^2), I_c / (2 sigma_color^2))``.
    With the defaults it follows OpenCV's ``cv2.bilateralFilter(img, 0,
    sigma_color, sigma_space)``: a disk window of radius
    ``max(round(1.5 sigma_space), 1)``, borders mirrored without repeating the
    edge pixel (BORDER_REFLECT_101) and those mirrored pixels counted as
    neighbours. For colour images the colour distance is Euclidean over the
    channels (OpenCV's 8-bit version uses the sum of absolute differences).

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a torch tensor stays on its device (CUDA included); a dask array gives
        a dask array, lazily (see :mod:`nadaraya.image`).
    sigma_space : float
        Standard deviation of the spatial Gaussian, in pixels.
    sigma_color : float
        Standard deviation of the colour Gaussian, in the image's units
        (0-255 for uint8).
    radius : int, optional
        Window radius in pixels; default ``max(round(1.5 sigma_space), 1)``
        (OpenCV's ``d = 0``; pass ``d // 2`` to match a given ``d``), at most
        the image's larger side.
    window : {"disk", "square"}, default "disk"
        Offsets with ``||o|| <= radius`` (OpenCV) or ``|o_k| <= radius``.
    border : {"reflect", "symmetric", "edge", "wrap"}, default "reflect"
        How pixels beyond the border are read.

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image`` (uint8 results are rounded).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import bilateral
    >>> img = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
    >>> bilateral(img, sigma_space=3, sigma_color=30).dtype
    dtype('uint8')
    """
    dask = is_dask(image)
    img: Any = dask_image(image) if dask else as_image(image)
    sigma_space = check_positive(sigma_space, "sigma_space", "Pass the spatial s.d. in pixels.")
    sigma_color = check_positive(sigma_color, "sigma_color",
                                 "Pass the colour s.d. in the image's units (0-255 for uint8).")
    if radius is None:
        radius = opencv_radius(sigma_space, img.shape)
    if not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    return windowed_filter(img, dask, bilateral_kernel(sigma_space, sigma_color), radius,
                           window, border)
