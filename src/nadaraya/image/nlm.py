"""Non-local means (Buades, Coll and Morel 2005) as a quadratic-form kernel.

``t = [x; patch around x]`` and

    Q = blockdiag(0, diag(g) (x) I_c / (c h^2 sum g))

so ``r^2`` is the ``g``-weighted mean squared difference of two patches over
``h^2``; with a noise level ``sigma`` the weight is ``exp(-max(r^2 - 2 sigma^2 / h^2, 0))``.
Locally (``search_radius`` given) the grid engine loops over the search
offsets and gets every patch distance of one offset by filtering the squared
difference image with ``g``, in blocks of pixels read with the halo
``search_radius + patch_size // 2`` (:mod:`nadaraya.engine.grid`):
the working-memory budget bounds the temporaries, and the result is the
unblocked one bit for bit. Globally (``search_radius=None``, every pixel
attends to every pixel) the patches become explicit vectors and
:func:`nadaraya.smooth` runs it: the Gaussian kernel on patches is softmax
attention with a key bias, the fused attention engines' problem.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import BORDERS, Block, grid_smooth, pad, run_blocks, window_offsets
from ..kernels.quadratic import QuadraticKernel, gaussian_patch, nlm_kernel
from ._dask import dask_image, is_dask, map_image, refuse
from ._image import Image, as_image, check_positive
from ._layout import apply_layout, needs_layout
from ._progress import tracked
from ._volume import nlm_volume

__all__ = ["non_local_means", "patch_weights"]

# Temporary numbers per pixel and channel of a block (padded values, their window ranges,
# state, mean), and per pixel (total, offset, key mask, the engine's tile): 9.9 in all for
# one channel, measured by benchmarks/bench_peak_memory.py, with a margin.
_PER_CHANNEL, _PER_PIXEL = 6, 6


def patch_weights(patch_size: int, kind: str = "gaussian") -> torch.Tensor:
    """Weights ``g`` of the pixels of a patch, shape ``(patch_size, patch_size)``.

    ``"gaussian"``: scikit-image's slow mode, s.d. ``(patch_size - 1) / 4``;
    ``"box"``: all equal (scikit-image's fast mode and OpenCV weigh patches so).
    """
    if not isinstance(patch_size, int) or patch_size < 1 or patch_size % 2 == 0:
        raise NadarayaError(f"patch_size must be an odd integer >= 1; got {patch_size!r}.")
    if kind == "gaussian":
        return gaussian_patch(patch_size, 2)
    if kind == "box":
        return torch.ones(patch_size, patch_size, dtype=torch.float64)
    raise NadarayaError(f"patch_kind must be 'gaussian' or 'box'; got {kind!r}.")


def _global_patches(data: torch.Tensor, g: torch.Tensor, border: str) -> torch.Tensor:
    """Every pixel's patch as a row, shape ``(height * width, c * P * P)``, weighted by sqrt(g)."""
    c, _height, _width = data.shape
    r = g.shape[0] // 2
    padded = pad(data, (r, r), border)
    cols = torch.nn.functional.unfold(padded[None], g.shape[0])[0]  # (c * P * P, H * W)
    sq = g.to(data).sqrt().flatten().repeat(c)  # channel-major, like unfold
    return (cols * sq[:, None]).T.contiguous()


def non_local_means(image: Any, h: float, patch_size: int = 7, search_radius: int | None = 10,
                    *, sigma: float = 0.0, patch_kind: str = "gaussian",
                    border: str = "reflect", engine: str = "auto",
                    channel_axis: int | None = -1, batch_axis: int | None = None) -> Any:
    """Average pixels whose surrounding patches look alike.

    ``out(x) = sum_j K(t_x, t_j) y_j / sum_j K(t_x, t_j)`` with
    ``t = [position; patch]`` and ``Q = blockdiag(0, diag(g) (x) I_c / (c h^2 sum g))``:
    ``K = exp(-max(d^2(x, j) - 2 sigma^2, 0) / h^2)`` where ``d^2`` is the
    ``g``-weighted mean over patch pixels and channels of the squared
    differences. With the defaults it is scikit-image's
    ``denoise_nl_means(..., fast_mode=False)`` computed exactly: Gaussian patch
    weights, patches mirrored at the border, search window clipped to the image.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a torch tensor stays on its device; a dask array gives a dask array,
        lazily (see :mod:`nadaraya.image`).
    h : float
        Cut-off distance in the image's units: patches whose mean squared
        difference exceeds ``h^2`` weigh less than ``1/e``.
    patch_size : int, default 7
        Odd side of the square patch.
    search_radius : int or None, default 10
        Half-side of the square search window (scikit-image's
        ``patch_distance``). None: global non-local means, every pixel against
        every pixel (cost grows as the number of pixels squared; for a GPU).
        With ``sigma=0`` the global search is softmax attention over patch
        vectors and runs on the fused attention engine; a noise offset
        (``sigma > 0``) has no dot-product form and runs on the streamed engine.
    sigma : float, default 0.0
        Noise standard deviation to subtract (``2 sigma^2`` from ``d^2``).
    patch_kind : {"gaussian", "box"}
        Patch weights ``g`` (see :func:`patch_weights`).
    border : {"reflect", "symmetric", "edge", "wrap"}
        How patches are completed beyond the image border.
    engine : str, default "auto"
        For the global search: the engine of :func:`nadaraya.smooth`.
    channel_axis : int or None, default -1
        The axis of the channels (scikit-image's ``channel_axis``); a 2-D
        image is gray whatever it says. None: no channels, a 3-D array is a
        gray volume, filtered with cubic patches over a cubic search window.
    batch_axis : int, optional
        An axis of independent images (or volumes), each filtered on its own.

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import non_local_means
    >>> rng = np.random.default_rng(0)
    >>> noisy = 0.5 + 0.1 * rng.standard_normal((48, 48))
    >>> out = non_local_means(noisy, h=0.08, patch_size=5, search_radius=5, sigma=0.1)
    >>> bool(out.std() < noisy.std())
    True
    >>> vol = 0.5 + 0.1 * rng.standard_normal((6, 16, 16))
    >>> non_local_means(vol, 0.08, 3, 1, sigma=0.1, channel_axis=None).shape
    (6, 16, 16)
    """
    if needs_layout(image, channel_axis, batch_axis):
        def volume(x: Any) -> Any:
            g3 = gaussian_patch(patch_size, 3) if patch_kind == "gaussian" else torch.ones(
                (patch_size,) * 3, dtype=torch.float64)
            return nlm_volume(x, check_positive(h, "h"), g3, search_radius, _sigma(sigma),
                              border)

        patch_weights(patch_size, patch_kind)  # checked before any work
        return apply_layout(image, channel_axis, batch_axis, lambda x: non_local_means(
            x, h, patch_size, search_radius, sigma=sigma, patch_kind=patch_kind,
            border=border, engine=engine), volume, what="non-local means")
    dask = is_dask(image)
    img: Any = dask_image(image) if dask else as_image(image)
    h = check_positive(h, "h", "Pass the cut-off distance in the image's units.")
    g = patch_weights(patch_size, patch_kind)
    if patch_size > min(img.shape):
        raise NadarayaError(
            f"patch_size {patch_size} is larger than the image {img.shape}; use a patch_size "
            f"of at most {min(img.shape) - (min(img.shape) + 1) % 2}."
        )
    if border not in BORDERS:
        raise NadarayaError(f"border must be one of {', '.join(map(repr, BORDERS))}; "
                            f"got {border!r}.")
    sigma = _sigma(sigma)
    kernel = nlm_kernel(h, g, img.channels, sigma=sigma)
    if search_radius is None:
        if dask:
            raise refuse("search_radius=None (every pixel against every pixel)",
                         "pass an integer search_radius, or compute the image first.")
        return img.back(_global(img.data, kernel, g, border, engine))
    if not isinstance(search_radius, int) or search_radius < 0:
        raise NadarayaError(
            f"search_radius must be an integer >= 0 or None (global); got {search_radius!r}."
        )
    offsets = window_offsets(search_radius, 2, device=None if dask else img.device)
    if dask:
        return map_image(lambda region, block, extras: filter_region(
            region, kernel, offsets, border, block.inside(region.device)), img,
            nlm_halo(kernel, offsets), outside=patch_size // 2 if border == "wrap" else 0,
            least=patch_size, wrap=border == "wrap")
    return img.back(filter_blocks(img, kernel, offsets, border))


def _sigma(sigma: Any) -> float:
    try:
        value = float(sigma)
    except (TypeError, ValueError):
        value = math.nan
    if not value >= 0:
        raise NadarayaError(f"sigma must be a number >= 0; got {sigma!r}.")
    return value


def filter_region(region: torch.Tensor, kernel: QuadraticKernel, offsets: torch.Tensor,
                  border: str, inside: torch.Tensor | None = None) -> torch.Tensor:
    """Non-local means of ``region`` ``(c, H, W)``, unblocked, with a grid ``kernel``
    (of :func:`~nadaraya.kernels.quadratic.nlm_kernel`) over the search ``offsets``;
    ``inside``: which pixels are keys (default all). Returns ``(c, H, W)``."""
    state = grid_smooth(region, kernel, offsets, border=border, keys_outside=False,
                        key_valid=inside)
    return state.mean().T.reshape(region.shape)


def nlm_halo(kernel: QuadraticKernel, offsets: torch.Tensor) -> int:
    """Pixels an output of :func:`filter_region` depends on, beyond its own: the
    search reach and the patch radius."""
    prad = 0 if kernel.patch is None else int(kernel.patch.shape[0]) // 2
    return int(offsets.abs().max()) + prad


def filter_blocks(img: Image, kernel: QuadraticKernel, offsets: torch.Tensor,
                  border: str) -> torch.Tensor:
    """:func:`filter_region` of ``img`` block by block (an integer image converted
    as its blocks are read); ``(c, H, W)``."""
    size = 1 if kernel.patch is None else int(kernel.patch.shape[0])

    def one(block: Block) -> torch.Tensor:
        return filter_region(img.read(block, border), kernel, offsets, border,
                             block.inside(img.device))

    per_pixel = img.itemsize * (_PER_CHANNEL * img.channels + _PER_PIXEL) + img.read_bytes
    # "wrap" reads the far side of the image: the patches beyond a border a block meets
    return run_blocks(tracked(one), img.empty(), nlm_halo(kernel, offsets), per_pixel,
                      outside=size // 2 if border == "wrap" else 0, least=size)


def _global(data: torch.Tensor, kernel: Any, g: torch.Tensor, border: str,
            engine: str) -> torch.Tensor:
    from ..engine import smooth
    from ..kernels.quadratic import QuadraticKernel

    c, height, width = data.shape
    patches = _global_patches(data, g, border)
    # patches already carry sqrt(g): the patch block of Q becomes a scalar times I
    scale = float(kernel.value_matrix(1)[0, 0])
    flat = QuadraticKernel(None, scale, ndim=0, noise=kernel.noise)
    values = data.reshape(c, -1).T
    out = smooth(patches, patches, values, flat, engine=engine)
    return out.T.reshape(c, height, width)
