"""Image files with their pages and metadata: what ``nadaraya denoise`` reads and writes.

:func:`read_image_file` gives every page of a file (a multi-page TIFF is a
stack or a volume) with the metadata worth carrying to the output;
:func:`write_image_file` writes pages and metadata back:

* TIFF (tifffile): every page; the tiling, a lossless compression (deflate;
  other compressions are written as deflate), the orientation tag, the
  resolution, the image description, the date, artist, copyright and
  software tags and the ICC profile;
* PNG, JPEG and the other formats of Pillow: the EXIF block (its orientation
  tag included), the ICC profile, the resolution and PNG text chunks.

Pixels are kept as stored: an EXIF or TIFF orientation is carried, not
applied, so a viewer shows the output as it shows the input.
16-bit colour PNG are written by OpenCV, which carries no metadata.
"""

from __future__ import annotations

import io
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import NadarayaError
from ._io import _TIFF_MAGIC, _encode, _read_tiff, image_writer, read_image

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["ImageFile", "read_image_file", "write_image_file"]

# TIFF ASCII tags carried as they are: date and time, artist, copyright, software.
_ASCII_TAGS = {306: "DateTime", 315: "Artist", 33432: "Copyright", 305: "Software"}
_ORIENTATION, _ICC = 274, 34675
_LOSSLESS = ("NONE", "ADOBE_DEFLATE", "DEFLATE", "LZW", "PACKBITS", "ZSTD", "LZMA")


@dataclass
class ImageFile:
    """The pages of an image file and the metadata carried to its output.

    Attributes
    ----------
    pages : list of ndarray, each of shape (height, width) or (height, width, channels)
        One image per page (a PNG or JPEG has one), in the file's dtype.
    meta : dict
        Format-specific metadata (see :mod:`nadaraya.image._pages`); empty
        when the file was read from a stream.
    tiff : bool
        Whether the file is a TIFF.
    """

    pages: list[np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    tiff: bool = False

    @property
    def stack(self) -> np.ndarray:
        """The pages as one array of shape (pages, height, width[, channels]).

        Raises
        ------
        NadarayaError
            When the pages differ in shape or dtype.
        """
        first = self.pages[0]
        for k, p in enumerate(self.pages):
            if p.shape != first.shape or p.dtype != first.dtype:
                raise NadarayaError(
                    f"page {k} has shape {p.shape} and dtype {p.dtype}, page 0 {first.shape} "
                    f"and {first.dtype}: the pages are not one stack. Split the file first.")
        return np.stack(self.pages)


def _tiff_meta(page: Any) -> dict[str, Any]:
    tags = page.tags
    meta: dict[str, Any] = {}
    if page.is_tiled:
        meta["tile"] = (int(page.tilelength), int(page.tilewidth))
    name = getattr(page.compression, "name", "NONE")
    meta["compression"] = None if name == "NONE" else "zlib" if name in _LOSSLESS else None
    if _ORIENTATION in tags:
        meta["orientation"] = int(tags[_ORIENTATION].value)
    if 282 in tags and 283 in tags:
        unit = int(tags[296].value) if 296 in tags else 2
        meta["resolution"] = (tags[282].value, tags[283].value, unit)
    description = page.description
    if description and not page.is_shaped:
        meta["description"] = description
    if _ICC in tags:
        meta["iccprofile"] = bytes(tags[_ICC].value)
    for code in _ASCII_TAGS:
        if code in tags:
            meta.setdefault("ascii", {})[code] = str(tags[code].value)
    return meta


def _tiff_pages(path: Path) -> ImageFile:
    import tifffile

    with tifffile.TiffFile(path) as tif:
        if len(tif.pages) == 1:
            return ImageFile([_read_tiff(path)], _tiff_meta(tif.pages[0]), True)
        pages = []
        for page in tif.pages:
            arr = page.asarray()
            if page.planarconfig == tifffile.PLANARCONFIG.SEPARATE and arr.ndim == 3:
                arr = np.moveaxis(arr, 0, -1)
            if arr.ndim == 3 and arr.shape[2] == 1:
                arr = arr[:, :, 0]
            pages.append(arr)
        return ImageFile(pages, _tiff_meta(tif.pages[0]), True)


def _pillow_meta(path: Path) -> dict[str, Any]:
    from PIL import Image as PILImage

    meta: dict[str, Any] = {}
    with PILImage.open(path) as im:  # the header and ancillary chunks only
        info = im.info
        exif = info.get("exif")
        if exif:
            meta["exif"] = exif
        if info.get("icc_profile"):
            meta["icc_profile"] = info["icc_profile"]
        if "dpi" in info:
            meta["dpi"] = tuple(float(v) for v in info["dpi"])
        text = getattr(im, "text", None)
        if text:
            meta["text"] = dict(text)
    return meta


def read_image_file(path: str | Path) -> ImageFile:
    """Read every page of an image file with the metadata to carry.

    Parameters
    ----------
    path : str or path-like
        A TIFF (any number of pages, tiled or in strips), PNG, JPEG or other
        Pillow format; a FIFO or device is read as one image without metadata.

    Returns
    -------
    ImageFile
        Pages in the file's dtype, range and channels (see
        :func:`~nadaraya.image._io.read_image`).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from nadaraya.image._pages import read_image_file, write_image_file
    >>> path = os.path.join(tempfile.mkdtemp(), "stack.tif")
    >>> write_image_file(path, [np.zeros((4, 5), np.float32)] * 3)
    >>> read_image_file(path).stack.shape
    (3, 4, 5)
    """
    file = Path(path)
    try:
        regular, head = stat.S_ISREG(file.stat().st_mode), b""
        if regular:
            with file.open("rb") as f:
                head = f.read(4)
    except (OSError, ValueError):
        regular, head = False, b""
    if not regular:
        return ImageFile([read_image(path)])
    if head in _TIFF_MAGIC:
        try:
            result = _tiff_pages(file)
        except NadarayaError:
            raise
        except Exception as exc:  # tifffile's own errors for a damaged file
            raise NadarayaError(f"cannot read image file {str(path)!r}: {exc}. Give a TIFF "
                                "file that is complete.") from None
        for k, page in enumerate(result.pages):
            if page.ndim not in (2, 3) or (page.ndim == 3 and page.shape[2] > 4):
                raise NadarayaError(f"image file {str(path)!r}: page {k} holds an array of "
                                    f"shape {page.shape}; nadaraya reads images of 1 to 4 "
                                    "channels.")
        return result
    pixels = read_image(path)
    try:
        meta = _pillow_meta(file)
    except Exception:  # a file Pillow cannot open (read by OpenCV) carries nothing
        meta = {}
    return ImageFile([pixels], meta)


def _tiff_bytes(pages: list[np.ndarray], meta: dict[str, Any]) -> bytes:
    import tifffile

    buf = io.BytesIO()
    extratags: list[tuple[Any, ...]] = []
    if "orientation" in meta:
        extratags.append((_ORIENTATION, "H", 1, int(meta["orientation"]), True))
    for code, text in meta.get("ascii", {}).items():
        if code != 305:  # tifffile writes the software tag itself
            extratags.append((code, "s", 0, text, True))
    with tifffile.TiffWriter(buf, bigtiff=sum(p.nbytes for p in pages) > 2**31) as tif:
        for k, arr in enumerate(pages):
            channels = 1 if arr.ndim == 2 else int(arr.shape[2])
            kwargs: dict[str, Any] = {}
            if "resolution" in meta:
                x, y, unit = meta["resolution"]
                kwargs.update(resolution=(x, y), resolutionunit=unit)
            if k == 0 and "description" in meta:
                kwargs["description"] = meta["description"]
            if "iccprofile" in meta and channels >= 3:
                kwargs["iccprofile"] = meta["iccprofile"]
            tile = meta.get("tile")
            if tile is not None and all(t % 16 == 0 for t in tile):
                kwargs["tile"] = tile
            tif.write(arr, photometric="rgb" if channels >= 3 else "minisblack",
                      planarconfig="contig" if channels > 1 else None,
                      extrasamples=("unassalpha",) if channels in (2, 4) else None,
                      compression=meta.get("compression"), metadata=None,
                      software=meta.get("ascii", {}).get(305, "nadaraya"),
                      extratags=extratags, **kwargs)
    return buf.getvalue()


def _pillow_bytes(arr: np.ndarray, meta: dict[str, Any], suffix: str) -> bytes:
    from PIL import Image as PILImage
    from PIL.PngImagePlugin import PngInfo

    fmt = PILImage.registered_extensions()[suffix]
    kwargs: dict[str, Any] = {}
    if "exif" in meta and fmt in ("JPEG", "PNG", "WEBP", "TIFF"):
        kwargs["exif"] = meta["exif"]
    if "icc_profile" in meta:
        kwargs["icc_profile"] = meta["icc_profile"]
    if "dpi" in meta:
        kwargs["dpi"] = meta["dpi"]
    if fmt == "PNG" and meta.get("text"):
        info = PngInfo()
        for key, value in meta["text"].items():
            info.add_text(key, value)
        kwargs["pnginfo"] = info
    if fmt == "JPEG":
        kwargs["quality"] = 95
    buf = io.BytesIO()
    PILImage.fromarray(arr).save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def write_image_file(path: str | Path | Output, pages: Any, meta: dict[str, Any] | None = None,
                     *, suffix: str | None = None) -> None:
    """Write pages and metadata to an image file, safely (:mod:`nadaraya._files`).

    Parameters
    ----------
    path : str, path-like or nadaraya._files.Output
        The format follows the suffix (``-``: standard output, with ``suffix``).
    pages : ndarray or sequence of ndarray
        One image of shape (height, width[, channels]), or several (a list, or
        an array of shape (pages, height, width[, channels]) with ``len > 1``
        given as a list), in the dtype to write; only TIFF takes several.
    meta : dict, optional
        From :func:`read_image_file`; carried where the format can hold it.
    suffix : str, optional
        The format's suffix, for a ``path`` without one.

    Raises
    ------
    NadarayaError
        When the format cannot hold the pixels unchanged (see
        :func:`~nadaraya.image._io.image_writer`) or several pages go to a
        format with one.
    """
    from .._files import output

    meta = meta or {}
    arrays = [np.ascontiguousarray(pages)] if isinstance(pages, np.ndarray) else [
        np.ascontiguousarray(p) for p in pages]
    if not arrays:
        raise NadarayaError("pages is empty; give at least one image to write.")
    arrays = [a[:, :, 0] if a.ndim == 3 and a.shape[2] == 1 else a for a in arrays]
    for a in arrays:
        if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] > 4):
            raise NadarayaError(f"each page must have shape (height, width) or (height, width, "
                                f"1 to 4 channels); got {a.shape}.")
    target = output(path, option="path")
    suffix = (suffix or target.suffix).lower()
    first = arrays[0]
    writer = image_writer(suffix, first.dtype, 1 if first.ndim == 2 else first.shape[2],
                          f"{target.option} {target}")
    if len(arrays) > 1 and writer != "tifffile":
        raise NadarayaError(f"{target.option} {target}: {len(arrays)} pages need a .tif file; "
                            f"{suffix} holds one image.")
    try:
        if writer == "tifffile":
            data = _tiff_bytes(arrays, meta)
        elif writer == "pillow":
            data = _pillow_bytes(first, meta, suffix)
        else:
            data = _encode(first, writer, suffix)
    except NadarayaError:
        raise
    except Exception as exc:  # every encoder has its own errors
        raise NadarayaError(f"cannot encode the image for {target}: {exc}") from None
    target.write_bytes(data)
