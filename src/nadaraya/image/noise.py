"""Noise level estimation for images with additive white Gaussian noise."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._dask import DaskImage, dask_image, is_dask
from ._image import as_image

__all__ = ["estimate_noise"]

# median(|N(0, 1)|): turns a median absolute value into a standard deviation
_MAD = 0.6744897501960817
# Coefficients computed at once.
_BAND = 1 << 16


def estimate_noise(image: Any, *, per_channel: bool = False) -> Any:
    """Standard deviation of additive white Gaussian noise, in the image's units.

    The finest diagonal Haar wavelet coefficients
    ``(a - b - c + d) / 2`` of each 2 x 2 block hold little of a natural
    image and all of the noise's variance; their median absolute value over
    0.6745 is a robust estimate of the noise's standard deviation (Donoho and
    Johnstone 1994), the rule scikit-image's ``estimate_sigma`` applies with
    Daubechies wavelets.

    Parameters
    ----------
    image : array-like or torch.Tensor of shape (height, width) or (height, width, channels)
        At least 2 x 2 pixels.
    per_channel : bool, default False
        Return one value per channel instead of their mean.

    Returns
    -------
    float, or ndarray of shape (channels,) with ``per_channel=True``
        For a dask image, the same number, computed at once: the median
        is selected exactly from histograms of the coefficients' bits, in
        four passes over the image.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import estimate_noise
    >>> rng = np.random.default_rng(0)
    >>> noisy = 100 + 10 * rng.standard_normal((256, 256))
    >>> round(estimate_noise(noisy))
    10
    """
    if is_dask(image):
        return _estimate_chunked(dask_image(image), per_channel)
    kind = getattr(image, "dtype", None)
    wide = kind is not None and not (kind.is_floating_point if isinstance(kind, torch.dtype)
                                     else np.dtype(kind).kind == "f") and (
        kind.itemsize if isinstance(kind, torch.dtype) else np.dtype(kind).itemsize) >= 4
    # float32 holds every value of the image exactly, unless it has wide integers
    img = as_image(image, dtype=torch.float64 if wide else None)
    height, width = img.shape
    if height < 2 or width < 2:
        raise NadarayaError(
            f"image must be at least 2 x 2 pixels to estimate its noise; got {img.shape}."
        )
    # the coefficients in float64 (a quarter of the pixels), from bands of rows: no
    # float64 copy of the whole image
    rows, cols = height // 2, width // 2
    diag = torch.empty(img.channels, rows, cols, dtype=torch.float64, device=img.data.device)
    band = max(1, _BAND // max(cols, 1))
    for a in range(0, rows, band):
        b = min(a + band, rows)
        x = img.data[:, 2 * a:2 * b, : 2 * cols].to(torch.float64)
        torch.sub(x[:, 0::2, 0::2], x[:, 0::2, 1::2], out=diag[:, a:b])
        diag[:, a:b].sub_(x[:, 1::2, 0::2]).add_(x[:, 1::2, 1::2]).abs_().mul_(0.5)
    sigma = diag.reshape(img.channels, -1).median(dim=1).values / _MAD
    if per_channel:
        return sigma.cpu().numpy()
    return float(sigma.mean())


def _diagonal(block: np.ndarray) -> np.ndarray:
    """The coefficients of a chunk of even sides, float64 ``(channels, h / 2 * w / 2)``,
    by the arithmetic of :func:`estimate_noise` (every pixel is exact in float64)."""
    x = block.astype(np.float64)
    if x.ndim == 2:
        x = x[..., None]
    if not np.isfinite(x).all():
        bad = ~np.isfinite(x)
        raise NadarayaError(f"image contains {int(bad.sum())} NaN or infinite value(s). Fill "
                            "them first, e.g. with nadaraya.image.reconstruct from the finite "
                            "pixels.")
    d = x[0::2, 0::2] - x[0::2, 1::2]
    d -= x[1::2, 0::2]
    d += x[1::2, 1::2]
    np.abs(d, out=d)
    d *= 0.5
    return np.moveaxis(d, -1, 0).reshape(d.shape[-1], -1)


def _histogram(block: np.ndarray, shift: int, prefix: np.ndarray) -> np.ndarray:
    """Counts ``(channels, 65536)`` of the 16 bits below ``shift + 16`` of the
    coefficients' bit patterns whose higher bits are each channel's ``prefix``."""
    keys = _diagonal(block).view(np.uint64)
    out = np.zeros((keys.shape[0], 1 << 16), dtype=np.int64)
    for c, row in enumerate(keys):
        if shift < 48:
            row = row[(row >> np.uint64(shift + 16)) == prefix[c]]
        digits = ((row >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.int64)
        out[c] = np.bincount(digits, minlength=1 << 16)
    return out


def _histogram_block(block: np.ndarray, shift: int, prefix: np.ndarray) -> np.ndarray:
    """:func:`_histogram` of a chunk as a ``(1, 1, channels * 65536)`` block."""
    return _histogram(block, shift, prefix).reshape(1, 1, -1)


def _estimate_chunked(img: DaskImage, per_channel: bool) -> Any:
    """:func:`estimate_noise` of a dask image: the same coefficients chunk by chunk and
    their lower median (torch's) selected exactly, 16 bits of the float64 bit patterns
    (ordered like the non-negative numbers) per pass."""
    height, width = img.shape
    if height < 2 or width < 2:
        raise NadarayaError(
            f"image must be at least 2 x 2 pixels to estimate its noise; got {img.shape}."
        )
    rows, cols = height // 2, width // 2
    x = img.array[: 2 * rows, : 2 * cols]
    # chunks of even sides: every 2 x 2 block of pixels in one chunk
    even = [tuple(2 * n for n in np.diff(np.unique(np.r_[0, np.cumsum(c) // 2])).tolist()
                  if n) for c in x.chunks[:2]]
    x = x.rechunk({0: even[0], 1: even[1]})
    rank = np.full(img.channels, (rows * cols - 1) // 2, dtype=np.int64)
    prefix = np.zeros(img.channels, dtype=np.uint64)
    bins = img.channels << 16
    for shift in (48, 32, 16, 0):
        # one (1, 1, channels * 65536) histogram per chunk, summed as a tree
        counts = x.map_blocks(_histogram_block, shift, prefix.copy(), dtype=np.int64,
                              chunks=(1, 1, bins), **({"new_axis": [2]} if x.ndim == 2
                                                      else {})).sum(axis=(0, 1)).compute()
        for c, row in enumerate(counts.reshape(img.channels, 1 << 16)):
            below = np.cumsum(row)
            digit = int(np.searchsorted(below, rank[c], side="right"))
            rank[c] -= below[digit - 1] if digit else 0
            prefix[c] = (prefix[c] << np.uint64(16)) | np.uint64(digit)
    sigma = torch.from_numpy(prefix.view(np.float64).copy()) / _MAD
    if per_channel:
        return sigma.numpy()
    return float(sigma.mean())
