"""Image files in and out, in their own dtype and channels.

:func:`read_image` reads PNG, TIFF (first page), JPEG and the other formats
Pillow and OpenCV know, from a path or a pipe; :func:`write_image` writes
through :mod:`nadaraya._files` (atomic replace, streams for pipes), refusing a
format that cannot hold the pixels unchanged (:func:`image_writer`).
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._errors import NadarayaError

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["image_writer", "read_image", "write_image"]


_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_TIFF_SUFFIXES = (".tif", ".tiff")
_PIL_MODES = {"1": "L", "P": None, "PA": "RGBA", "RGBa": "RGBA", "La": "LA", "RGBX": "RGB",
              "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB"}


def _channels(arr: np.ndarray) -> int:
    return 1 if arr.ndim == 2 else int(arr.shape[2])


def image_writer(suffix: str, dtype: Any, channels: int, name: str = "path") -> str:
    """Which library writes an image of ``dtype`` and ``channels`` to a ``suffix`` file.

    Parameters
    ----------
    suffix : str
        The file's suffix, e.g. ``".png"``.
    dtype : numpy dtype
    channels : int
        1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA).
    name : str
        How messages name the file.

    Returns
    -------
    {"tifffile", "pillow", "opencv"}

    Raises
    ------
    NadarayaError
        When the format cannot hold the image unchanged (floats in a PNG,
        alpha in a JPEG, ...): the message says which format can.
    """
    from PIL import Image as PILImage

    dtype = np.dtype(dtype)
    suffix = suffix.lower()
    if suffix in _TIFF_SUFFIXES:
        return "tifffile"
    fmt = PILImage.registered_extensions().get(suffix)
    if fmt is None:
        raise NadarayaError(f"{name}: no image format has the suffix {suffix or '(none)'!r}; "
                            "use .png, .tif, .jpg or another image suffix.")
    if dtype == np.uint8 and not (fmt == "JPEG" and channels in (2, 4)):
        return "pillow"
    if dtype == np.uint16 and fmt == "PNG" and channels != 2:
        return "pillow" if channels == 1 else "opencv"
    what = {1: "gray", 2: "gray and alpha", 3: "RGB", 4: "RGBA"}[channels]
    raise NadarayaError(f"{name}: {fmt} files cannot hold {what} {dtype} pixels unchanged; "
                        "write a .tif file, which keeps every dtype and channel.")


def _read_tiff(path: Any) -> np.ndarray:
    try:
        import tifffile
    except ImportError:
        raise NadarayaError("reading TIFF files needs tifffile: pip install tifffile.") from None
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        if page.photometric in (tifffile.PHOTOMETRIC.SEPARATED, tifffile.PHOTOMETRIC.PALETTE):
            name = "from a stream" if isinstance(path, io.BytesIO) else str(path)
            raise NadarayaError(f"image file {name!r} is a {page.photometric.name} TIFF; "
                                "convert it to gray or RGB first.")
        arr = tif.series[0].asarray()
        if page.planarconfig == tifffile.PLANARCONFIG.SEPARATE and arr.ndim == 3:
            arr = np.moveaxis(arr, 0, -1)
    return arr


def _is_16bit_colour_png(head: bytes) -> bool:
    # IHDR: bit depth at byte 24, colour type at byte 25 (2: RGB, 4: gray+alpha, 6: RGBA)
    return head.startswith(_PNG_MAGIC) and len(head) > 25 and head[24] == 16 and head[25] in (
        2, 4, 6)


def _read_opencv(source: Any) -> np.ndarray:
    """A 16-bit colour PNG from a path or from a file object holding its bytes."""
    name = str(source) if not isinstance(source, io.BytesIO) else "from a stream"
    try:
        import cv2
    except ImportError:
        raise NadarayaError(f"image file {name!r} is a 16-bit colour PNG, which Pillow "
                            "reads as 8 bits; install opencv-python-headless to read it "
                            "(pip install 'nadaraya[image]').") from None
    data = np.frombuffer(source.getvalue() if isinstance(source, io.BytesIO)
                         else Path(source).read_bytes(), np.uint8)
    arr = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise NadarayaError(f"cannot read image file {name!r} with OpenCV; give a PNG "
                            "that is complete.")
    if arr.ndim == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_BGRA2RGBA if arr.shape[2] == 4 else cv2.COLOR_BGR2RGB)
    return arr


def _read_pillow(path: Any) -> np.ndarray:
    from PIL import Image as PILImage

    with PILImage.open(path) as im:
        im.load()
        if im.mode in _PIL_MODES:
            target = _PIL_MODES[im.mode]
            if target is None:  # palette: colours, and alpha if the palette has transparency
                target = "RGBA" if "transparency" in im.info else "RGB"
            im = im.convert(target)
        arr = np.asarray(im)
    if arr.dtype.kind == "u" and arr.dtype.byteorder not in "=|":
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np.int32 and arr.size and arr.min() >= 0 and arr.max() <= 65535:
        arr = arr.astype(np.uint16)  # 16-bit gray opened as 32-bit mode "I"
    return arr


def _read_stream(file: Path) -> io.BytesIO:
    """The bytes of a FIFO or device, refused after the first block unless it opens an image.

    An endless device (``/dev/zero``, ``/dev/urandom``) is thus refused at
    once instead of being read into memory.
    """
    from PIL import Image as PILImage

    with file.open("rb") as f:
        first = f.read(1 << 20)
        head = first[:32]
        if head[:4] not in _TIFF_MAGIC and not head.startswith(_PNG_MAGIC):
            try:
                PILImage.open(io.BytesIO(first)).close()  # reads the header only
            except Exception:  # any reader error: not an image
                raise NadarayaError(f"image file {str(file)!r} does not start like an image "
                                    "Pillow or tifffile can read; give a PNG, JPEG or TIFF "
                                    "file.") from None
        return io.BytesIO(first + f.read())


def read_image(path: Any) -> np.ndarray:
    """Read an image file as it is stored: its dtype, range and channels.

    PNG, JPEG and the other formats of Pillow are read by Pillow; TIFF by
    tifffile (any dtype: uint8, uint16, float32, ...); 16-bit colour PNG by
    OpenCV (Pillow would cut them to 8 bits). Nothing is rescaled.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    ndarray of shape (height, width) or (height, width, channels)
        1 channel: gray; 2: gray and alpha; 3: RGB; 4: RGBA. Palette images
        become RGB (RGBA when the palette has transparency), CMYK and other
        colour spaces RGB, bilevel images uint8 0 and 255.
    """
    file = Path(path)
    try:
        st = os.stat(file)
    except FileNotFoundError:
        raise NadarayaError(f"image file {str(path)!r} does not exist.") from None
    except (OSError, ValueError) as exc:  # ValueError: a zero byte in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NadarayaError(f"image file {str(path)!r} cannot be read ({reason}); give an "
                            "image file this user can read.") from None
    if stat.S_ISDIR(st.st_mode):
        raise NadarayaError(f"image file {str(path)!r} is a folder; give an image file.")
    try:
        if stat.S_ISREG(st.st_mode):
            source: Any = file
            with file.open("rb") as f:
                head = f.read(32)
        else:  # a FIFO or a device: read it once, whole, and decode from memory
            source = _read_stream(file)
            head = source.getvalue()[:32]
        if head[:4] in _TIFF_MAGIC:
            arr = _read_tiff(source)
        elif _is_16bit_colour_png(head):
            arr = _read_opencv(source)
        else:
            arr = _read_pillow(source)
    except NadarayaError:
        raise
    except Exception as exc:  # every reader has its own errors for a damaged file
        raise NadarayaError(f"cannot read image file {str(path)!r}: {exc}. Give a PNG, JPEG, "
                            "TIFF or other image file that is complete.") from None
    arr = np.asarray(arr)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] > 4):
        raise NadarayaError(f"image file {str(path)!r} holds an array of shape {arr.shape}; "
                            "nadaraya reads one image of 1 to 4 channels.")
    return arr


def _encode(arr: np.ndarray, writer: str, suffix: str) -> bytes:
    channels = _channels(arr)
    if writer == "tifffile":
        try:
            import tifffile
        except ImportError:
            raise NadarayaError("writing TIFF files needs tifffile: pip install "
                                "tifffile.") from None
        buf = io.BytesIO()
        tifffile.imwrite(buf, arr, photometric="rgb" if channels >= 3 else "minisblack",
                         planarconfig="contig" if channels > 1 else None,
                         extrasamples=("unassalpha",) if channels in (2, 4) else None)
        return buf.getvalue()
    if writer == "opencv":
        try:
            import cv2
        except ImportError:
            raise NadarayaError("writing 16-bit colour PNG needs opencv-python-headless (pip "
                                "install 'nadaraya[image]'); or write a .tif file.") from None
        code = cv2.COLOR_RGBA2BGRA if channels == 4 else cv2.COLOR_RGB2BGR
        ok, data = cv2.imencode(suffix, cv2.cvtColor(arr, code))
        if not ok:
            raise NadarayaError(f"OpenCV could not encode the image as {suffix}.")
        return data.tobytes()
    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.fromarray(arr).save(buf, format=PILImage.registered_extensions()[suffix])
    return buf.getvalue()


def write_image(path: str | Path | Output, image: Any, *, suffix: str | None = None) -> None:
    """Write an image file in the image's own dtype and channels, safely.

    The format follows the suffix of ``path``; the file is written through
    :mod:`nadaraya._files` (atomically, never half-written; ``-`` is
    standard output). Nothing is converted: a float32 image needs a TIFF, a
    uint16 colour image a PNG or TIFF, an image with alpha a PNG or TIFF
    (:func:`image_writer` says which format can take what).

    Parameters
    ----------
    path : str, path-like or nadaraya._files.Output
    image : array-like or torch.Tensor of shape (height, width) or (height, width, channels)
        1 to 4 channels: gray, gray and alpha, RGB, RGBA.
    suffix : str, optional
        The format's suffix (``".png"``), for a ``path`` without one such as ``-``.

    Raises
    ------
    NadarayaError
        When the format cannot hold the image unchanged, or the file cannot be written.
    """
    from .._files import output

    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    arr = np.ascontiguousarray(image)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * np.uint8(255)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] > 4):
        raise NadarayaError(f"image must have shape (height, width) or (height, width, 1 to 4 "
                            f"channels); got {arr.shape}.")
    target = output(path, option="path")
    suffix = (suffix or target.suffix).lower()
    writer = image_writer(suffix, arr.dtype, _channels(arr), f"{target.option} {target}")
    try:
        data = _encode(arr, writer, suffix)
    except NadarayaError:
        raise
    except Exception as exc:  # every encoder has its own errors
        raise NadarayaError(f"cannot encode the image for {target}: {exc}") from None
    target.write_bytes(data)
