"""Image quality: peak signal-to-noise ratio."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError

__all__ = ["psnr"]


def psnr(reference: Any, image: Any, *, data_range: float | None = None) -> float:
    """Peak signal-to-noise ratio ``10 log10(data_range^2 / MSE)`` in dB.

    Parameters
    ----------
    reference, image : array-like or torch.Tensor of the same shape
        The clean image and the one to score (tensors are read on the CPU).
    data_range : float, optional
        The full scale of the images, ``max - min`` of the values they can
        take. Default: from ``reference``'s dtype, as scikit-image's
        ``peak_signal_noise_ratio`` does: for integers the dtype's maximum
        (255 for uint8), or its whole span ``max - min`` when ``reference``
        has negative values; for booleans 1; for floats 1 when ``reference``
        lies in [0, 1] and 2 when it lies in [-1, 1]. A float ``reference``
        beyond [-1, 1] has no range in its dtype, so it needs ``data_range``.

    Returns
    -------
    float
        ``inf`` when the images are equal.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import psnr
    >>> clean = np.full((8, 8), 100, dtype=np.uint8)
    >>> round(psnr(clean, clean + 1), 2)  # data_range 255 from the dtype
    48.13
    >>> round(psnr(clean / 255.0, (clean + 1) / 255.0), 2)  # floats in [0, 1]: 1
    48.13
    """
    ref, kind = _array(reference, "reference")
    img, _ = _array(image, "image")
    if ref.shape != img.shape:
        raise NadarayaError(
            f"reference and image must have the same shape; got {ref.shape} and {img.shape}."
        )
    if ref.size == 0:
        raise NadarayaError(f"reference and image are empty (shape {ref.shape}); give pixels.")
    if data_range is None:
        data_range = _dtype_range(ref, kind)
    else:
        try:
            data_range = float(data_range)
        except (TypeError, ValueError):
            data_range = math.nan
        if not (math.isfinite(data_range) and data_range > 0):
            raise NadarayaError(
                f"data_range must be a finite number > 0 (the images' full scale, e.g. 255 "
                f"for 8-bit values); got {data_range!r}."
            )
    # the mean square of the difference, written as peak^2 * mean((d / peak)^2) so that
    # neither the difference of values near float64's largest nor its square overflows
    # (a ratio of 2 or less) and tiny differences do not underflow
    diff = ref / 2 - img / 2
    peak = float(np.abs(diff).max())
    if peak == 0:
        return math.inf
    mean = float(np.mean(np.square(diff / peak)))
    log_mse = 2 * (math.log10(2) + math.log10(peak)) + math.log10(mean)
    return 20 * math.log10(data_range) - 10 * log_mse


def _dtype_range(ref: np.ndarray, kind: np.dtype) -> float:
    """scikit-image's range of ``reference``'s dtype (``dtype_range``), as it reads it."""
    low, high = float(ref.min()), float(ref.max())
    if kind.kind == "b":
        return 1.0
    if kind.kind in "ui":
        info = np.iinfo(kind)
        return float(info.max) if low >= 0 else float(info.max) - float(info.min)
    if low >= 0 and high <= 1:
        return 1.0
    if low >= -1 and high <= 1:
        return 2.0
    raise NadarayaError(
        f"data_range is needed: reference is float ({kind}) with values in [{low:.4g}, "
        f"{high:.4g}], beyond the [-1, 1] of float images, so its full scale cannot be read "
        "from its dtype. Pass it, e.g. data_range=255 for 8-bit values held as floats, or "
        "data_range=reference.max() - reference.min() for the span of the data."
    )


def _array(x: Any, name: str) -> tuple[np.ndarray, np.dtype]:
    """``x`` as float64 and the NumPy dtype of its values (a tensor's of the same kind)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype.is_floating_point:
            kind = np.dtype(np.float64)  # only the kind matters for floats
        else:
            try:
                kind = np.dtype(str(x.dtype).removeprefix("torch."))
            except TypeError:  # quantized
                kind = np.dtype(object)
    else:
        x = np.asarray(x)
        kind = x.dtype
    if kind.kind not in "biuf":
        raise NadarayaError(
            f"{name} must hold real numbers; got dtype {x.dtype}. Convert it, e.g. with "
            "np.asarray(x, dtype=float)."
        )
    if isinstance(x, torch.Tensor):
        arr = x.to(device="cpu", dtype=torch.float64).numpy()
    else:
        arr = x.astype(np.float64)
    if not np.isfinite(arr).all():
        raise NadarayaError(f"{name} contains NaN or infinity.")
    return arr, kind
