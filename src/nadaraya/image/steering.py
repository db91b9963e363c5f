"""Steering kernel regression: LARK (Takeda, Farsiu and Milanfar 2007).

``t = [x]`` and ``Q_x = C_j / (2 h^2)`` for key ``j``, with ``K`` weighted by
``sqrt(det C_j)``: a Gaussian whose shape follows the local edge. ``C_j``
comes from the gradients around ``j`` (a regularised structure tensor):

    G^T G = sum over the window of [g_r^2, g_r g_c; g_r g_c, g_c^2] = V diag(s1^2, s2^2) V^T
    elongation  sigma = (s1 + lambda') / (s2 + lambda')
    scaling     gamma = ((s1 s2 + lambda'') / M)^alpha         (M pixels in the window)
    C = gamma (sigma v1 v1^T + v2 v2^T / sigma)

so the kernel is narrow across edges (along ``v1``, the dominant gradient)
and long along them, and small where the image is busy. Iterated: gradients
from a classic second-order fit give ``C``; a steering fit of the noisy image
gives new gradients, which give a new ``C``, and so on.
"""

from __future__ import annotations

from typing import Any

import torch

from .._errors import NadarayaError
from ..engine._grid import _pad, window_offsets
from ..kernels.quadratic import classic_kernel, steering_kernel
from ._io import as_image, check_positive, data_range_of
from ._poly import local_fit
from .regression import check_order, default_radius

__all__ = ["steering_kernel_regression", "steering_matrices"]


def _box_sum(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Sum over the ``(2 radius + 1)^2`` window of each pixel of ``x`` ``(..., H, W)``.

    The border is mirrored.
    """
    if radius == 0:
        return x.clone()
    p = _pad(x, (radius, radius), "reflect")
    height, width = x.shape[-2:]
    rows = p[..., 0:height, :].clone()
    for u in range(1, 2 * radius + 1):
        rows.add_(p[..., u:u + height, :])
    out = rows[..., 0:width].clone()
    for u in range(1, 2 * radius + 1):
        out.add_(rows[..., u:u + width])
    return out


def steering_matrices(gradient: torch.Tensor, window: int = 2, *,
                      lambda_elongation: float = 1.0, lambda_scale: float = 0.01,
                      alpha: float = 0.5) -> torch.Tensor:
    """The steering matrices ``C`` from gradients, shape ``(H, W, 2, 2)``.

    Parameters
    ----------
    gradient : torch.Tensor of shape (2, H, W) or (2, channels, H, W)
        ``d/d row`` and ``d/d column``; channels are pooled.
    window : int, default 2
        Radius of the square window of gradients (``M = (2 window + 1)^2``).
    lambda_elongation : float, default 1.0
        ``lambda'``: keeps the elongation finite in flat regions.
    lambda_scale : float, default 0.01
        ``lambda''``: keeps the scaling positive.
    alpha : float, default 0.5
        Structure sensitivity, in [0, 1].

    Returns
    -------
    torch.Tensor of shape (H, W, 2, 2)
        Symmetric positive definite, ``det C = gamma^2``.
    """
    if gradient.ndim == 3:
        gradient = gradient[:, None]
    gr, gc = gradient[0], gradient[1]
    a = _box_sum((gr * gr).sum(0), window)
    b = _box_sum((gr * gc).sum(0), window)
    c = _box_sum((gc * gc).sum(0), window)
    m = float((2 * window + 1) ** 2 * gradient.shape[1])
    half = 0.5 * (a + c)
    disc = torch.sqrt((0.5 * (a - c)).square() + b.square())
    s1 = (half + disc).clamp(min=0.0).sqrt()
    s2 = (half - disc).clamp(min=0.0).sqrt()
    theta = 0.5 * torch.atan2(2.0 * b, a - c)  # direction of v1, the dominant gradient
    v1 = torch.stack([torch.cos(theta), torch.sin(theta)], -1)
    v2 = torch.stack([-torch.sin(theta), torch.cos(theta)], -1)
    elong = (s1 + lambda_elongation) / (s2 + lambda_elongation)
    gamma = ((s1 * s2 + lambda_scale) / m).pow(alpha)
    outer1 = v1[..., :, None] * v1[..., None, :]
    outer2 = v2[..., :, None] * v2[..., None, :]
    return gamma[..., None, None] * (elong[..., None, None] * outer1
                                     + outer2 / elong[..., None, None])


def steering_kernel_regression(
    image: Any, h: float = 2.0, iterations: int = 3, *, order: int = 2,
    radius: int | None = None, window: int = 2, lambda_elongation: float = 1.0,
    lambda_scale: float = 0.01, alpha: float = 0.5, initial_h: float | None = None,
    data_range: float | None = None, pilot: Any = None,
) -> Any:
    """Locally adaptive kernel regression with steering kernels (LARK), iterated.

    At each pixel ``x``, a polynomial of degree ``order`` is fitted to the
    pixels ``x_j`` of a window by weighted least squares with the steering
    kernel ``K = sqrt(det C_j) exp(-(x_j - x)^T C_j (x_j - x) / (2 h^2))``,
    i.e. ``Q_x = C_j / (2 h^2)`` (see :func:`steering_matrices`). The first
    ``C`` comes from a classic second-order fit; each iteration refits the
    noisy image with the steering kernels of the previous fit's gradients
    (Takeda, Farsiu and Milanfar 2007, iterative steering kernel regression).

    Parameters
    ----------
    image : array-like or torch.Tensor of shape (height, width) or (height, width, channels)
        uint8 or float. Colour images share one ``C`` (from all channels).
    h : float, default 2.0
        Global smoothing, in pixels.
    iterations : int, default 3
        Number of steering fits.
    order : {0, 1, 2}, default 2
        Degree of the local polynomial of the steering fits.
    radius : int, optional
        Half-side of the window; default ``ceil(3 h)``.
    window : int, default 2
        Radius of the gradient window behind each ``C`` (5 x 5).
    lambda_elongation, lambda_scale, alpha : float
        ``lambda'``, ``lambda''`` and ``alpha`` of :func:`steering_matrices`;
        gradients are measured on the 0-255 scale whatever the image's range.
    initial_h : float, optional
        ``h`` of the classic second-order fit giving the first gradients;
        default ``h``.
    pilot : array-like or torch.Tensor of the image's shape, optional
        An earlier estimate of the clean image (for example
        :func:`non_local_means`' output) to take the first gradients from,
        instead of the noisy image itself.
    data_range : float, optional
        The image's full scale: 255 for uint8; for floats 1.0 when every
        value is within [-1, 1], else 255.

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import steering_kernel_regression
    >>> rng = np.random.default_rng(0)
    >>> noisy = np.kron(np.eye(4), np.ones((8, 8))) + 0.1 * rng.standard_normal((32, 32))
    >>> out = steering_kernel_regression(noisy, h=1.5, iterations=1)
    >>> out.shape
    (32, 32)
    """
    img = as_image(image)
    h = check_positive(h, "h", "Pass the global smoothing in pixels.")
    order = check_order(order)
    if not isinstance(iterations, int) or iterations < 1:
        raise NadarayaError(f"iterations must be an integer >= 1; got {iterations!r}.")
    if not isinstance(window, int) or window < 0:
        raise NadarayaError(f"window must be an integer >= 0; got {window!r}.")
    for name, value in (("lambda_elongation", lambda_elongation),
                        ("lambda_scale", lambda_scale)):
        if not float(value) >= 0:
            raise NadarayaError(f"{name} must be a number >= 0; got {value!r}.")
    if not 0 <= float(alpha) <= 1:
        raise NadarayaError(f"alpha must be in [0, 1]; got {alpha!r}.")
    initial_h = h if initial_h is None else check_positive(initial_h, "initial_h")
    if radius is None:
        radius = default_radius(h)
    if not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    to255 = 255.0 / data_range_of(img, data_range)
    data = img.data
    first = data
    if pilot is not None:
        first = as_image(pilot, "pilot", dtype=data.dtype).data.to(data.device)
        if first.shape != data.shape:
            raise NadarayaError(
                f"pilot must have the image's size and channels {tuple(data.shape)} "
                f"(channels, height, width); got {tuple(first.shape)}."
            )
    start = local_fit(first, classic_kernel(initial_h),
                      window_offsets(default_radius(initial_h), device=data.device), 2)
    gradient = start.gradient
    offsets = window_offsets(radius, 2, device=data.device)
    fit = start
    for it in range(iterations):
        cov = steering_matrices(gradient * to255, window, lambda_elongation=lambda_elongation,
                                lambda_scale=lambda_scale, alpha=alpha)
        last = it == iterations - 1
        # order 0 still needs gradients for the next C: fit order 1, keep its mean
        fit = local_fit(data, steering_kernel(h, cov), offsets, order if last else max(order, 1))
        gradient = fit.gradient
    return img.back(fit.value)
