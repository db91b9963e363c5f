"""Images in and out: validation, channels, dtype and range.

Images follow OpenCV's and scikit-image's layout: ``(height, width)`` for gray,
``(height, width, channels)`` for colour, as NumPy arrays or torch tensors.
uint8 images come back as uint8 (rounded, clipped to 0..255), float images in
their own dtype and range: the filters never rescale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError

__all__ = ["Image", "as_image", "check_positive", "data_range_of", "read_image", "write_image"]


@dataclass
class Image:
    """An image as the grid engine sees it, and how to give results back.

    Attributes
    ----------
    data : torch.Tensor of shape (channels, height, width)
        Floating, on the caller's device.
    gray : bool
        Whether the input had no channel axis.
    dtype : numpy dtype or torch dtype
        The input dtype (uint8 results are rounded and clipped).
    is_torch : bool
        Whether the input was a torch tensor.
    """

    data: torch.Tensor
    gray: bool
    dtype: Any
    is_torch: bool

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.data.shape[1]), int(self.data.shape[2])

    @property
    def channels(self) -> int:
        return int(self.data.shape[0])

    @property
    def integer(self) -> bool:
        return not (self.dtype.is_floating_point if self.is_torch
                    else np.dtype(self.dtype).kind == "f")

    def back(self, out: torch.Tensor) -> Any:
        """``out`` of shape (channels, height, width) in the caller's kind, dtype and layout."""
        out = out[0] if self.gray else out.permute(1, 2, 0)
        if self.integer:
            info = torch.iinfo(self.dtype) if self.is_torch else np.iinfo(self.dtype)
            out = out.round().clamp_(float(info.min), float(info.max))
        if self.is_torch:
            return out.to(self.dtype)
        return out.detach().cpu().numpy().astype(self.dtype, copy=False)


def as_image(image: Any, name: str = "image", *, dtype: torch.dtype | None = None) -> Image:
    """Validate an image and move it to ``(channels, height, width)`` floating torch.

    Parameters
    ----------
    image : array-like or torch.Tensor of shape (height, width) or (height, width, channels)
        uint8, other integers, or floating.
    dtype : torch.dtype, optional
        Compute dtype; default float64 for float64 input, float32 otherwise.

    Returns
    -------
    Image
    """
    is_torch = isinstance(image, torch.Tensor)
    if is_torch:
        t = image.detach()
        in_dtype = t.dtype
        if t.is_complex():
            raise NadarayaError(f"{name} must be real; got a complex tensor.")
    else:
        arr = np.asarray(image)
        if arr.dtype.kind not in "biuf":
            raise NadarayaError(
                f"{name} must hold numbers; got dtype {arr.dtype}. Convert it, e.g. "
                "np.asarray(img, dtype=np.float32)."
            )
        if arr.dtype.kind == "b":
            arr = arr.astype(np.uint8)
        in_dtype = arr.dtype
        arr = np.ascontiguousarray(arr)
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    if t.ndim not in (2, 3):
        raise NadarayaError(
            f"{name} must be 2-D (height, width) or 3-D (height, width, channels); got shape "
            f"{tuple(t.shape)}. For a batch, call the filter once per image."
        )
    if t.ndim == 3 and not 1 <= t.shape[2] <= 4:
        raise NadarayaError(
            f"{name} has {t.shape[2]} channels on its last axis; expected 1 to 4 "
            "(channels last, as in OpenCV and scikit-image). Move the channel axis last, "
            "e.g. img.transpose(1, 2, 0)."
        )
    if min(t.shape[:2]) < 1:
        raise NadarayaError(f"{name} is empty (shape {tuple(t.shape)}).")
    if dtype is None:
        dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    data = (t[None] if t.ndim == 2 else t.permute(2, 0, 1)).to(dtype).contiguous()
    # integers are finite; for floats a finite sum proves every value finite
    if data.is_floating_point() and t.is_floating_point() and not math.isfinite(
            float(data.sum())):
        _check_finite(data, name)
    return Image(data, t.ndim == 2, in_dtype, is_torch)


def _check_finite(data: torch.Tensor, name: str) -> None:
    bad = ~torch.isfinite(data)
    if bool(bad.any()):
        where = torch.nonzero(bad.any(0))[:3].tolist()
        raise NadarayaError(
            f"{name} contains {int(bad.sum())} NaN or infinite value(s) (first at (row, col) "
            f"{', '.join(map(str, map(tuple, where)))}). Fill them first, e.g. with "
            "nadaraya.image.reconstruct from the finite pixels."
        )


def check_positive(value: Any, name: str, fix: str = "") -> float:
    """A finite number > 0, or a NadarayaError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise NadarayaError(f"{name} must be a positive number; got {value!r}. {fix}") from None
    if not (math.isfinite(v) and v > 0):
        raise NadarayaError(f"{name} must be a positive number; got {value!r}. {fix}".rstrip())
    return v


def data_range_of(img: Image, given: float | None = None) -> float:
    """The image's full scale: ``given``, else the integer dtype's maximum (255 for
    uint8), else 1.0 for floats within [-1, 1] and 255 for other floats."""
    if given is not None:
        return check_positive(given, "data_range", "Pass e.g. 255 or 1.0.")
    if img.integer:
        info = torch.iinfo(img.dtype) if img.is_torch else np.iinfo(img.dtype)
        return float(info.max)
    peak = max(float(img.data.amax()), -float(img.data.amin()))
    return 1.0 if peak <= 1.0 + 1e-6 else 255.0


def read_image(path: Any) -> np.ndarray:
    """Read an image file (PNG, JPEG, TIFF, ...) as a uint8 or uint16 array.

    Gray files give ``(height, width)``; colour files ``(height, width, 3)``
    (an alpha channel is dropped).
    """
    from PIL import Image as PILImage

    try:
        with PILImage.open(path) as im:
            im.load()
            if im.mode in ("RGBA", "LA", "P", "CMYK", "YCbCr", "HSV", "LAB", "1"):
                im = im.convert("L" if im.mode in ("LA", "1") else "RGB")
            arr = np.asarray(im)
    except FileNotFoundError:
        raise NadarayaError(f"image file {str(path)!r} does not exist.") from None
    except OSError as exc:
        raise NadarayaError(f"cannot read image file {str(path)!r}: {exc}") from None
    if arr.dtype == np.int32:  # 16-bit PNGs open as mode "I"
        arr = arr.clip(0, 65535).astype(np.uint16)
    return arr


def write_image(path: Any, image: np.ndarray) -> None:
    """Write a uint8 (or uint16 gray) image; floats are rounded and clipped to 0..255."""
    from PIL import Image as PILImage

    arr = np.asarray(image)
    if arr.dtype not in (np.uint8, np.uint16):
        arr = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    try:
        PILImage.fromarray(arr).save(path)
    except (OSError, ValueError) as exc:
        raise NadarayaError(f"cannot write image file {str(path)!r}: {exc}") from None
