"""Noise level estimation for images with additive white Gaussian noise."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._io import as_image

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

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import estimate_noise
    >>> rng = np.random.default_rng(0)
    >>> noisy = 100 + 10 * rng.standard_normal((256, 256))
    >>> round(estimate_noise(noisy))
    10
    """
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
