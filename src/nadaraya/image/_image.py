"""Images as the filters take them: validation, channels, dtype and range.

Images follow OpenCV's and scikit-image's layout: ``(height, width)`` for gray,
``(height, width, channels)`` for colour, as NumPy arrays or torch tensors.
uint8 images come back as uint8 (rounded, clipped to 0..255), float images in
their own dtype and range: the filters never rescale. Files are read and
written by :mod:`nadaraya.image._io`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._errors import NadarayaError

if TYPE_CHECKING:
    from ..engine.grid import Block

__all__ = ["Image", "as_image", "check_non_negative", "check_positive", "data_range_of"]


@dataclass
class Image:
    """An image as the grid engine sees it, and how to give results back.

    Attributes
    ----------
    pixels : torch.Tensor of shape (channels, height, width)
        The values: floating, on the caller's device; or, for an integer
        image, a view of the caller's pixels in their own dtype, converted
        to ``compute`` where they are read (:attr:`data`, :meth:`read`).
    gray : bool
        Whether the input had no channel axis.
    dtype : numpy dtype or torch dtype
        The input dtype (uint8 results are rounded and clipped).
    is_torch : bool
        Whether the input was a torch tensor.
    compute : torch.dtype, optional
        The dtype the filters compute in; default that of ``pixels``.
    """

    pixels: torch.Tensor
    gray: bool
    dtype: Any
    is_torch: bool
    compute: torch.dtype | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.compute is None:
            self.compute = self.pixels.dtype

    @property
    def data(self) -> torch.Tensor:
        """The whole image ``(channels, height, width)`` in ``compute``, contiguous.

        An integer image is converted on first use and kept; filters that run
        in blocks read them with :meth:`read` instead and never hold it.
        """
        if self.pixels.dtype != self.compute:
            self.pixels = self.pixels.to(self.compute).contiguous()
        return self.pixels

    def read(self, block: Block, border: str = "reflect") -> torch.Tensor:
        """The region ``block`` reads, ``(channels, *read shape)``, in ``compute``
        (see :meth:`nadaraya.engine.grid.Block.read`)."""
        region = block.read(self.pixels, border)
        if region.dtype == self.compute:
            return region
        return region.to(self.compute, memory_format=torch.contiguous_format)

    def empty(self) -> torch.Tensor:
        """An uninitialized ``(channels, height, width)`` array of ``compute`` for the
        result."""
        return torch.empty(self.pixels.shape, dtype=self.compute, device=self.device)

    @property
    def device(self) -> torch.device:
        return self.pixels.device

    @property
    def itemsize(self) -> int:
        """Bytes per number in ``compute``."""
        return torch.empty((), dtype=self.compute).element_size()

    @property
    def read_bytes(self) -> int:
        """Bytes per pixel of a region :meth:`read` allocates (0: it returns views)."""
        return 0 if self.pixels.dtype == self.compute else self.itemsize * self.channels

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.pixels.shape[1]), int(self.pixels.shape[2])

    @property
    def channels(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def integer(self) -> bool:
        return not (self.dtype.is_floating_point if self.is_torch
                    else np.dtype(self.dtype).kind == "f")

    def back(self, out: torch.Tensor) -> Any:
        """``out`` of shape (channels, height, width) in the caller's kind, dtype and layout.

        For an integer image ``out`` is rounded and clipped in place (it is
        the filter's own array: the caller's pixels are integers).
        """
        out = out[0] if self.gray else out.permute(1, 2, 0)
        if self.integer:
            info = torch.iinfo(self.dtype) if self.is_torch else np.iinfo(self.dtype)
            out = out.round_().clamp_(float(info.min), float(info.max))
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
        Floating pixels; an integer image's pixels stay a view of the input
        in its own dtype, converted block by block as a filter reads them
        (:meth:`Image.read`), or whole on first use of :attr:`Image.data`.
    """
    is_torch = isinstance(image, torch.Tensor)
    if is_torch:
        if image.requires_grad and torch.is_grad_enabled():
            raise NadarayaError(
                f"{name} requires grad, but the image filters return results without a "
                f"gradient. Pass {name}.detach(), or run under torch.no_grad(); for a "
                "differentiable smoother use nadaraya.smooth on the pixels."
            )
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
            f"{tuple(t.shape)}. For a batch pass batch_axis, for a volume channel_axis=None "
            "(see nadaraya.image._layout)."
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
    planar = t[None] if t.ndim == 2 else t.permute(2, 0, 1)
    if not t.is_floating_point():
        # integers are finite: converted where a filter reads them
        return Image(planar, t.ndim == 2, in_dtype, is_torch, compute=dtype)
    data = planar.to(dtype).contiguous()
    # a finite sum proves every value finite
    if data.is_floating_point() and not math.isfinite(float(data.sum())):
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
    return _check_number(value, name, fix, zero=False)


def check_non_negative(value: Any, name: str, fix: str = "") -> float:
    """A finite number >= 0, or a NadarayaError naming ``name``."""
    return _check_number(value, name, fix, zero=True)


def _check_number(value: Any, name: str, fix: str, zero: bool) -> float:
    what = "a finite number >= 0" if zero else "a positive number"
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise NadarayaError(f"{name} must be {what}; got {value!r}. {fix}".rstrip()) from None
    if isinstance(value, bool) or not (math.isfinite(v) and (v >= 0 if zero else v > 0)):
        raise NadarayaError(f"{name} must be {what}; got {value!r}. {fix}".rstrip())
    return v


def data_range_of(img: Image, given: float | None = None) -> float:
    """The image's full scale, the ``data_range`` of scikit-image.

    ``given`` when given; else the integer dtype's maximum (255 for uint8,
    65535 for uint16); else, for floating images, the span of the data,
    ``max - min`` (``max |x|`` for a constant image, 1.0 for an all-zero
    one). Pass ``given`` when the data do not fill their nominal range (a
    dark float image in [0, 1], say).
    """
    if given is not None:
        return check_positive(given, "data_range", "Pass e.g. 255 or 1.0.")
    if img.integer:
        info = torch.iinfo(img.dtype) if img.is_torch else np.iinfo(img.dtype)
        return float(info.max)
    top, bottom = float(img.data.amax()), float(img.data.amin())
    return (top - bottom) or max(abs(top), abs(bottom)) or 1.0
