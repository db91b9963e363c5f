"""Steering kernel regression: LARK (Takeda, Farsiu and Milanfar 2007).

``t = [x]`` and ``Q_x = C_j / (2 h^2)`` for key ``j``, with ``K`` weighted by
``sqrt(det C_j)``: a Gaussian whose shape follows the local edge. ``C_j``
comes from the gradients around ``j`` (a regularised structure tensor):

    G^T G = sum over the window of [g_r^2, g_r g_c; g_r g_c, g_c^2] = V diag(s1^2, s2^2) V^T
    elongation  sigma = (s1 + lambda') / (s2 + lambda')
    scaling     gamma = ((s1 s2 + lambda'') / M)^alpha         (M pixels in the window)
    C = gamma (sigma v1 v1^T + v2 v2^T / sigma)

so the kernel is narrow across edges (along ``v1``, the dominant gradient)
and long along them, and small where the image is busy. Iterated (the
paper's iterative steering kernel regression): the gradients of each
second-order fit give the next ``C``, and the next fit smooths the previous
estimate.

Two additions, both off in the paper's setting (``pilot="image"``,
``range_sigma=None``): the first gradients may come from a pilot estimate
(by default non-local means), and the kernel may carry a photometric factor
on the pilot's values, ``t = [x; pilot(x)]``,
``Q = blockdiag(C_j / (2 h^2), I / (2 range_sigma^2))`` (the augmented-vector
form of Milanfar's survey, with both blocks).

The whole pipeline (pilot, first fit, steering matrices, steering fits) runs
block by block, each block read with the sum of its stages' reaches as halo
(:mod:`nadaraya.engine.grid`): the working-memory budget bounds the
temporaries whatever the image's size. ``C`` and the log-weight are computed
in float64 from gradients scaled into range, so images anywhere in their
dtype's range give finite kernels.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ..engine.grid import Block, pad, peak_exponent, run_blocks, scale_pow2, window_offsets
from ..kernels.quadratic import classic_kernel, nlm_kernel
from ._dask import dask_image, is_dask, map_image
from ._dask import data_range as data_range_dask
from ._image import as_image, check_positive, data_range_of
from ._layout import apply_layout, needs_layout
from ._poly import fit_numbers, local_fit
from ._progress import tracked
from ._steer import steer
from .regression import check_order, default_radius

__all__ = ["steering_field", "steering_kernel_regression", "steering_matrices"]

PILOTS = ("nlm", "image")

# Float64 numbers per pixel of a region that the steering matrices' computation holds.
_STRUCTURE = 12


def _numbers(channels: int) -> int:
    """Temporary numbers (of the image's dtype) per pixel of a block's region at the
    pipeline's peak: the pilot, the gradients and the steering field with its
    log-weight (5 float64 numbers) beside the steering fit's own arrays, or beside the
    computation of the field."""
    kept = 3 * channels + 10
    return kept + max(fit_numbers(channels, 2, 6), 2 * _STRUCTURE)


def _box_sum(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Sum over the ``(2 radius + 1)^2`` window of each pixel of ``x`` ``(..., H, W)``.

    The border is mirrored.
    """
    if radius == 0:
        return x.clone()
    p = pad(x, (radius, radius), "reflect")
    height, width = x.shape[-2:]
    rows = p[..., 0:height, :].clone()
    for u in range(1, 2 * radius + 1):
        rows.add_(p[..., u:u + height, :])
    out = rows[..., 0:width].clone()
    for u in range(1, 2 * radius + 1):
        out.add_(rows[..., u:u + width])
    return out


def _structure(gradient: torch.Tensor, window: int, lambda_elongation: float,
               lambda_scale: float, alpha: float) -> tuple[torch.Tensor, ...]:
    """``cos theta``, ``sin theta`` (of ``v1``) and ``log`` of the eigenvalues
    ``gamma sigma`` and ``gamma / sigma`` of ``C``, float64 ``(H, W)`` each.

    The gradients are scaled by a power of two into ``(-1, 1)`` (exact) before
    they are squared, the scale put back in logarithms: any finite gradient
    gives finite logarithms (``-inf`` only with ``lambda_scale = 0``).
    """
    if gradient.ndim == 3:
        gradient = gradient[:, None]
    g = gradient.to(torch.float64)
    e = peak_exponent(g)
    g = scale_pow2(g, -e, inplace=g is not gradient)
    gr, gc = g[0], g[1]
    a = _box_sum((gr * gr).sum(0), window)
    b = _box_sum((gr * gc).sum(0), window)
    c = _box_sum((gc * gc).sum(0), window)
    del g, gr, gc
    half = 0.5 * (a + c)
    disc = torch.sqrt((0.5 * (a - c)).square() + b.square())
    theta = 0.5 * torch.atan2(2.0 * b, a - c)  # direction of v1, the dominant gradient
    del a, b, c
    s1 = (half + disc).clamp_(min=0.0).sqrt_()  # singular values times 2^-e
    s2 = half.sub_(disc).clamp_(min=0.0).sqrt_()
    del disc
    try:
        lam = math.ldexp(lambda_elongation, -e)
    except OverflowError:  # gradients far below lambda': round kernels
        lam = math.inf
    # Ratios and products of numbers scaled alike, unscaled exactly, are those of the
    # unscaled numbers: the logarithms below do not depend on e (the largest gradient of
    # the region read), so every block of an image gives the same bits. Where a ratio or
    # product leaves float64's normal range, sums of logarithms take over.
    tiny = torch.finfo(torch.float64).tiny
    top, bottom = s1 + lam, s2 + lam
    log_elong = torch.log(top / bottom)
    odd = (bottom < tiny) | torch.isinf(log_elong)
    if bool(odd.any()):
        log_elong = torch.where(odd, torch.log(top) - torch.log(bottom), log_elong)
    del top, bottom, odd
    log_elong.nan_to_num_(nan=0.0)  # lambda' = inf, or s1 = s2 = lambda' = 0: round
    # log gamma = alpha (log(s1 s2 + lambda'') - log M), s1 s2 = 4^e times the product here
    m = float((2 * window + 1) ** 2 * gradient.shape[1])
    scaled = s1 * s2
    plain = scale_pow2(scaled.clone(), 2 * e)
    exact = (scaled == 0) | ((scaled >= tiny) & (plain >= tiny) & torch.isfinite(plain))
    log_gamma = torch.log(plain.add_(lambda_scale))
    if not bool(exact.all()):
        log_prod = s1.log_().add_(s2.log_()).add_(2 * e * math.log(2.0))
        wide = torch.logaddexp(log_prod, torch.tensor(
            math.log(lambda_scale) if lambda_scale > 0 else -math.inf, dtype=torch.float64,
            device=log_prod.device))
        log_gamma = torch.where(exact, log_gamma, wide)
    log_gamma.sub_(math.log(m)).mul_(alpha)
    return (torch.cos(theta), torch.sin(theta), log_gamma + log_elong,
            log_gamma.sub_(log_elong))


def _matrices(cos: torch.Tensor, sin: torch.Tensor, log1: torch.Tensor, log2: torch.Tensor,
              factor: float = 1.0) -> torch.Tensor:
    """``factor (l1 v1 v1^T + l2 v2 v2^T)``, ``(H, W, 2, 2)``, with ``v1 = (cos, sin)``."""
    l1, l2 = log1.exp().mul_(factor), log2.exp().mul_(factor)
    out = torch.empty(*cos.shape, 2, 2, dtype=cos.dtype, device=cos.device)
    cc, ss, cs = cos * cos, sin * sin, cos * sin
    torch.addcmul(l1 * cc, l2, ss, out=out[..., 0, 0])
    torch.addcmul(l1 * ss, l2, cc, out=out[..., 1, 1])
    torch.mul(l1.sub_(l2), cs, out=out[..., 0, 1])
    out[..., 1, 0] = out[..., 0, 1]
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
    torch.Tensor of shape (H, W, 2, 2), float64
        Symmetric positive definite, ``det C = gamma^2``; computed in float64
        from gradients scaled into range, so any finite gradients give finite
        matrices unless ``gamma sigma`` itself exceeds float64's range.
    """
    return _matrices(*_structure(gradient, window, lambda_elongation, lambda_scale, alpha))


def steering_field(gradient: torch.Tensor, h: float, window: int = 2, *,
                   lambda_elongation: float = 1.0, lambda_scale: float = 0.01,
                   alpha: float = 0.5, dtype: torch.dtype = torch.float64
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The steering kernel's blocks: ``Q_x = C / (2 h^2)`` per key and ``log sqrt(det C)``.

    The blocks of :func:`~nadaraya.kernels.quadratic.steering_kernel`, with
    the log-weight from ``C``'s eigenvalues (exact however elongated ``C``
    is) and the eigenvalues of ``C`` capped at ``sqrt`` of the largest number
    of ``dtype`` (the grid engine's compute dtype), so that ``Q_x`` is finite
    there: a key with such an eigenvalue has no weight at any other pixel.

    Returns
    -------
    field : torch.Tensor of shape (H, W, 2, 2), float64
    log_weight : torch.Tensor of shape (H, W), float64
    """
    cos, sin, log1, log2 = _structure(gradient, window, lambda_elongation, lambda_scale,
                                      alpha)
    cap = 0.5 * math.log(torch.finfo(dtype).max)
    log1.clamp_(max=cap)
    log2.clamp_(max=cap)
    log_weight = 0.5 * (log1 + log2)
    return _matrices(cos, sin, log1, log2, 1.0 / (2.0 * h * h)), log_weight


def default_h(sigma255: float) -> float:
    """Global smoothing for noise of s.d. ``sigma255`` on the 0-255 scale (with a pilot).

    Best PSNR on ``camera``: 2.5 at sigma 10, 3.0 at 25, 4.0 at 50.
    """
    return 2.1 + 0.038 * min(max(sigma255, 0.0), 100.0)


def default_range(sigma255: float) -> float:
    """``range_sigma / sigma`` for noise of s.d. ``sigma255`` on the 0-255 scale.

    Best PSNR on ``camera``: 0.8 at sigma 10, 0.6 from 25 on.
    """
    return 0.6 + 0.2 * min(max((25.0 - sigma255) / 15.0, 0.0), 1.0)


def _pilot_stage(img: Any, pilot: Any, sigma: float | None, full: float, dask: bool
                 ) -> tuple[Callable[[torch.Tensor, Sequence[torch.Tensor]], torch.Tensor],
                            int, Any]:
    """The pilot estimate on a region read, from the image's region ``(c, h, w)`` and
    the given pilot's (the first gradients come from it); the halo it needs; and the
    given pilot, the region function's extra input (None when it has none)."""
    if not isinstance(pilot, str):
        if dask:
            import dask.array as da

            # chunked like the image by map_image
            given = dask_image(pilot if is_dask(pilot) else da.from_array(np.asarray(pilot)),
                               "pilot")
            shape = (given.channels, *given.shape)
            expected = (img.channels, *img.shape)
            given = given.array
        else:
            given = as_image(pilot, "pilot", dtype=img.compute).data.to(img.device)
            shape, expected = tuple(given.shape), (img.channels, *img.shape)
        if shape != expected:
            raise NadarayaError(
                f"pilot must have the image's size and channels {expected} "
                f"(channels, height, width); got {shape}."
            )
        return lambda region, extras: extras[0], 0, given
    if pilot not in PILOTS:
        raise NadarayaError(
            f"pilot must be one of {', '.join(map(repr, PILOTS))} or an image; got {pilot!r}."
        )
    if pilot == "image":
        return lambda region, extras: region, 0, None
    from .denoise import recipe
    from .nlm import filter_region, nlm_halo, patch_weights

    assert sigma is not None
    params = recipe("nlm", sigma, full)
    kernel = nlm_kernel(params["h"], patch_weights(params["patch_size"]), img.channels,
                        sigma=params["sigma"])
    offsets = window_offsets(params["search_radius"], 2,
                             device=None if dask else img.device)
    return (lambda region, extras: filter_region(region, kernel, offsets, "reflect"),
            nlm_halo(kernel, offsets), None)


def _check(iterations: Any, window: Any, lambda_elongation: Any, lambda_scale: Any,
           alpha: Any) -> None:
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


def _resolve(image: Any, img: Any, dask: bool, h: Any, iterations: Any, sigma: Any, order: Any,
             radius: Any, window: Any, lambda_elongation: Any, lambda_scale: Any, alpha: Any,
             initial_h: Any, pilot: Any, range_sigma: Any, data_range: Any
             ) -> tuple[Any, ...]:
    """The checked parameters of :func:`steering_kernel_regression` with their defaults:
    ``h, sigma, range_sigma, initial_h, radius, photometric, to255, structure, full``
    (``photometric``: ``1 / (2 range_sigma^2)`` or None; ``structure``: the keywords of
    the steering matrices)."""
    check_order(order)
    _check(iterations, window, lambda_elongation, lambda_scale, alpha)
    full = data_range_dask(img, data_range) if dask else data_range_of(img, data_range)
    to255 = 255.0 / full
    is_image = isinstance(pilot, str) and pilot == "image"
    if range_sigma == "auto":
        range_sigma = None if is_image else "auto"
    elif range_sigma is not None:
        range_sigma = check_positive(range_sigma, "range_sigma",
                                     "Pass a standard deviation in the image's units or None.")
    if sigma is None and (h is None or range_sigma == "auto" or
                          (isinstance(pilot, str) and pilot == "nlm")):
        from .noise import estimate_noise

        sigma = max(float(estimate_noise(image)), 1e-3 * full)
    elif sigma is not None:
        sigma = check_positive(sigma, "sigma", "Pass the noise standard deviation.")
    if h is None:
        h = default_h(sigma * to255)
    h = check_positive(h, "h", "Pass the global smoothing in pixels.")
    if range_sigma == "auto":
        range_sigma = default_range(sigma * to255) * sigma
    if initial_h is None:
        initial_h = 0.5 if is_image else 1.0
    initial_h = check_positive(initial_h, "initial_h")
    if radius is None:
        radius = default_radius(h, img.pixels.shape[1:] if not dask else img.shape) + 1
    if not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    # 1 / (2 range_sigma^2), at most the largest float (a range_sigma whose square
    # underflows weighs any difference of the pilot's values by 0 either way)
    photometric = None if range_sigma is None else min(0.5 / range_sigma / range_sigma,
                                                       sys.float_info.max)
    structure = {"lambda_elongation": lambda_elongation, "lambda_scale": lambda_scale,
                 "alpha": alpha}
    return h, sigma, range_sigma, initial_h, radius, photometric, to255, structure, full


def _volume(x: Any, h: Any, iterations: Any, sigma: Any, order: Any, radius: Any, window: Any,
            lambda_elongation: Any, lambda_scale: Any, alpha: Any, initial_h: Any, pilot: Any,
            range_sigma: Any, data_range: Any) -> Any:
    """:func:`steering_kernel_regression` of one ``(depth, height, width[, channels])``
    volume (:mod:`nadaraya.image._steering3d`)."""
    from ._dask import refuse
    from ._layout import as_volume
    from ._steering3d import skr_volume

    if is_dask(x):
        raise refuse("a volume (3 spatial axes)", "compute it first (volume.compute()), or "
                     "filter its slices as a batch with batch_axis=0.")
    vol = as_volume(x)
    if not isinstance(pilot, str) or pilot not in PILOTS:
        raise NadarayaError(f"pilot must be one of {', '.join(map(repr, PILOTS))} for a "
                            f"volume; got {pilot!r}.")
    # the noise of a volume: its slices stacked into one image
    stacked = vol.data.reshape(vol.channels, -1, vol.data.shape[-1])
    noisy = stacked[0] if vol.channels == 1 else stacked.permute(1, 2, 0)
    h, sigma, _, initial_h, radius, photometric, to255, structure, _ = _resolve(
        noisy, vol, False, h, iterations, sigma, order, radius, window, lambda_elongation,
        lambda_scale, alpha, initial_h, pilot, range_sigma, data_range)
    return skr_volume(vol, h=h, iterations=iterations, sigma=sigma, order=check_order(order),
                      radius=radius, window=window, structure=structure,
                      initial_h=initial_h, pilot=pilot, photometric=photometric,
                      to255=to255)


def steering_kernel_regression(
    image: Any, h: float | None = None, iterations: int = 1, *, sigma: float | None = None,
    order: int = 0, radius: int | None = None, window: int = 2, lambda_elongation: float = 1.0,
    lambda_scale: float = 0.01, alpha: float = 0.3, initial_h: float | None = None,
    pilot: Any = "nlm", range_sigma: float | str | None = "auto",
    data_range: float | None = None, channel_axis: int | None = -1,
    batch_axis: int | None = None,
) -> Any:
    """Locally adaptive kernel regression with steering kernels (LARK), iterated.

    At each pixel ``x``, a polynomial of degree ``order`` is fitted to the
    pixels ``x_j`` of a window by weighted least squares with the steering
    kernel ``K = sqrt(det C_j) exp(-(x_j - x)^T C_j (x_j - x) / (2 h^2))``,
    i.e. ``Q_x = C_j / (2 h^2)`` (see :func:`steering_matrices`), ``C`` from
    the gradients of a classic second-order fit of the pilot. Each further
    iteration (Takeda, Farsiu and Milanfar 2007, iterative steering kernel
    regression) takes ``C`` from the gradients of the previous second-order
    fit and smooths the previous estimate.

    The paper's method is ``pilot="image"`` (the first gradients from a
    classic second-order fit of the noisy image with ``initial_h = 0.5``),
    ``range_sigma=None``, ``order=2``, ``alpha=0.5`` and several iterations.
    The defaults deviate in two ways, chosen by PSNR on scikit-image's
    ``camera`` with Gaussian noise (s.d. 10 to 50 on the 0-255 scale): the
    first gradients come from a non-local means pilot, whose values also
    enter the kernel as a photometric factor
    ``exp(-(p(x) - p(x_j))^2 / (2 range_sigma^2))``
    (``t = [x; p(x)]``, ``Q = blockdiag(C_j / (2 h^2), 1 / (2 range_sigma^2))``);
    and one iteration of order 0 with ``alpha = 0.3``, which beat the
    second-order fits there. In later iterations the photometric factor
    compares the previous estimate's values.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float.
        Colour images share one ``C`` (from all channels). A dask array gives a
        dask array, lazily (see :mod:`nadaraya.image`).
    h : float, optional
        Global smoothing, in pixels; default from the noise level on the
        0-255 scale: 2.5 at ``sigma`` = 10, 3.0 at 25, 4.0 at 50.
    iterations : int, default 1
        Number of steering fits.
    sigma : float, optional
        Noise standard deviation in the image's units, for the defaults of
        ``h``, the pilot and ``range_sigma``; estimated with
        :func:`~nadaraya.image.estimate_noise` when needed and not given.
    order : {0, 1, 2}, default 0
        Degree of the local polynomial of the last fit (earlier fits are of
        order 2: their gradients steer the next one).
    radius : int, optional
        Half-side of the window; default ``ceil(3 h) + 1`` (``ceil(3 h)`` at
        most the image's larger side).
    window : int, default 2
        Radius of the gradient window behind each ``C`` (5 x 5).
    lambda_elongation, lambda_scale, alpha : float
        ``lambda'``, ``lambda''`` and ``alpha`` of :func:`steering_matrices`;
        gradients are measured on the 0-255 scale whatever the image's range.
    initial_h : float, optional
        ``h`` of the classic second-order fit of the pilot giving the first
        gradients; default 1.0, or 0.5 with ``pilot="image"`` (the paper's).
    pilot : {"nlm", "image"} or array-like, default "nlm"
        The estimate the first gradients come from: :func:`non_local_means`
        with :func:`~nadaraya.image.denoise.recipe`'s parameters, the noisy
        image itself, or an array of the image's shape.
    range_sigma : float, "auto" or None, default "auto"
        Standard deviation of the photometric factor on the pilot's values,
        in the image's units; "auto": ``0.8 sigma`` at ``sigma`` = 10 on the
        0-255 scale down to ``0.6 sigma`` from 25 on, unless ``pilot="image"``
        (then None); None: the steering kernel alone.
    data_range : float, optional
        The image's full scale: the integer dtype's maximum (255 for uint8);
        for floats the span ``max - min`` of the data (of each image of a batch).
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
    >>> from nadaraya.image import steering_kernel_regression
    >>> rng = np.random.default_rng(0)
    >>> noisy = np.kron(np.eye(4), np.ones((8, 8))) + 0.1 * rng.standard_normal((32, 32))
    >>> out = steering_kernel_regression(noisy, h=1.5, sigma=0.1)
    >>> out.shape
    (32, 32)
    """
    if needs_layout(image, channel_axis, batch_axis):
        if not isinstance(pilot, str):
            raise NadarayaError("pilot as an array needs the default layout (channels last, "
                                "no batch_axis); pass pilot='nlm' or 'image', or move the "
                                "image's axes first.")
        args = (h, iterations, sigma, order, radius, window, lambda_elongation, lambda_scale,
                alpha, initial_h, pilot, range_sigma, data_range)
        return apply_layout(image, channel_axis, batch_axis, lambda x: (
            steering_kernel_regression(
                x, h, iterations, sigma=sigma, order=order, radius=radius, window=window,
                lambda_elongation=lambda_elongation, lambda_scale=lambda_scale, alpha=alpha,
                initial_h=initial_h, pilot=pilot, range_sigma=range_sigma,
                data_range=data_range)), lambda x: _volume(x, *args),
            what="steering_kernel_regression")
    dask = is_dask(image)
    img: Any = dask_image(image) if dask else as_image(image)
    order = check_order(order)
    (h, sigma, range_sigma, initial_h, radius, photometric, to255, structure,
     full) = _resolve(image, img, dask, h, iterations, sigma, order, radius, window,
                           lambda_elongation, lambda_scale, alpha, initial_h, pilot,
                           range_sigma, data_range)
    device = None if dask else img.device
    pilot_of, pilot_halo, given = _pilot_stage(img, pilot, sigma, full, dask)
    first_offsets = window_offsets(default_radius(initial_h, img.shape), device=device)
    offsets = window_offsets(radius, 2, device=device)

    def region(source: torch.Tensor, block: Block, extras: Sequence[torch.Tensor] = ()
               ) -> torch.Tensor:
        guide = pilot_of(source, extras)
        dtype = img.compute
        return steer(source, guide, local_fit(guide, classic_kernel(initial_h), first_offsets, 2),
                     iterations=iterations, photometric=photometric, offsets=offsets,
                     order=order, ndim=2,
                     field_of=lambda g: steering_field(g * to255, h, window, **structure,
                                                       dtype=dtype))

    # an output depends on the pilot's halo, the first fit's window, and per iteration
    # the gradient window behind each C and the steering fit's window: one pass over the
    # image with the sum of the reaches as halo, each block computing every stage
    halo = pilot_halo + int(first_offsets.abs().max()) + iterations * (window + radius)
    extras = () if given is None else (given,)
    if dask:
        return map_image(region, img, halo, extras=extras)
    # an integer image is converted block by block, as the blocks are read
    per_pixel = img.itemsize * _numbers(img.channels) + img.read_bytes
    return img.back(run_blocks(
        tracked(lambda block: region(img.read(block), block, [block.read(e) for e in extras])),
        img.empty(), halo, per_pixel))
