"""Image files larger than memory: read as dask arrays, written band by band.

An uncompressed TIFF (one whose pixels lie in the file as an array,
``tifffile.memmap`` can map it) is read lazily: each chunk maps the file by
its path and copies its rows, so a task sent to a worker of a
``distributed`` cluster carries the path, not the pixels (the workers must
see the same file system). Other files are decoded whole (PNG and JPEG
decoders give the whole image; compressed TIFF strips would need zarr) and
then cut into chunks. A TIFF output is written into a ``tifffile.memmap`` of
a temporary file band by band, then renamed over the target
(:meth:`nadaraya._files.Output.temporary_path`): the whole result is never in
memory, and a reader never sees a partial file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._io import read_image

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["image_header", "read_chunked", "write_tiff_bands"]

_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


class _MappedTiff:
    """The pixels of an uncompressed TIFF, read by slices through a memory map.

    Pickled as its path, shape and dtype (a dask task reads its own slice).
    """

    def __init__(self, path: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.path, self.shape, self.dtype, self.ndim = path, shape, dtype, len(shape)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        stat = Path(self.path).stat()
        return (self.path, stat.st_mtime_ns, stat.st_size, self.shape, str(self.dtype))

    def __getitem__(self, key: Any) -> np.ndarray:
        import tifffile

        return np.array(tifffile.memmap(self.path, mode="r")[key])


def image_header(path: str | Path) -> tuple[tuple[int, ...], np.dtype, bool] | None:
    """Shape ``(height, width[, channels])``, dtype and whether the pixels can be
    mapped, of a regular TIFF file; None for other files (their header is not read)."""
    file = Path(path)
    try:
        if not file.is_file():
            return None
        with file.open("rb") as f:
            if f.read(4) not in _TIFF_MAGIC:
                return None
    except (OSError, ValueError):  # unreadable or impossible names: read_image reports them
        return None
    try:
        import tifffile
    except ImportError:
        return None
    try:
        with tifffile.TiffFile(file) as tif:
            series = tif.series[0]
            page = tif.pages[0]
            shape = tuple(int(n) for n in series.shape)
            dtype = np.dtype(series.dtype)
            separate = page.planarconfig == tifffile.PLANARCONFIG.SEPARATE and len(shape) == 3
            mapped = bool(page.is_memmappable) and len(tif.pages) == 1
            if page.photometric in (tifffile.PHOTOMETRIC.SEPARATED,
                                    tifffile.PHOTOMETRIC.PALETTE):
                return None  # read_image says why it refuses them
    except Exception:  # a damaged file: read_image reports it
        return None
    if separate:
        shape = (*shape[1:], shape[0])
    if len(shape) == 3 and shape[2] == 1:
        shape, mapped = shape[:2], False
    if len(shape) not in (2, 3):
        return None
    return shape, dtype, mapped and not separate


def read_chunked(path: str | Path, rows: int) -> Any:
    """The image file at ``path`` as a dask array in bands of ``rows`` full rows.

    Mapped lazily when it is an uncompressed TIFF (see :func:`image_header`),
    else decoded whole by :func:`~nadaraya.image._io.read_image`.

    Returns
    -------
    dask.array.Array of shape (height, width) or (height, width, channels)
    """
    import dask.array as da

    header = image_header(path)
    if header is not None and header[2]:
        shape, dtype, _ = header
        source: Any = _MappedTiff(str(Path(path).resolve()), shape, dtype)
        meta = np.empty((0,) * len(shape), dtype=dtype)
        return da.from_array(source, chunks=(rows, *shape[1:]), meta=meta, asarray=False)
    arr = read_image(path)
    return da.from_array(arr, chunks=(rows, *arr.shape[1:]))


def write_tiff_bands(target: Output, image: Any, alpha: Any = None, *, batch: int = 2) -> None:
    """Write a dask image to a TIFF target band by band (each chunk of rows at most
    ``batch`` at a time in memory), with ``alpha`` as its last channel.

    Parameters
    ----------
    target : nadaraya._files.Output
    image : dask.array.Array of shape (height, width) or (height, width, channels)
        Chunked along rows only.
    alpha : dask.array.Array of shape (height, width), optional
    batch : int
        Bands computed at once (the scheduler runs them in parallel).
    """
    import dask
    import tifffile

    gray = image.ndim == 2
    colours = 1 if gray else int(image.shape[2])
    channels = colours + (alpha is not None)
    height, width = int(image.shape[0]), int(image.shape[1])
    shape = (height, width) if channels == 1 else (height, width, channels)
    if alpha is not None:
        alpha = alpha.rechunk((image.chunks[0], -1))
    if len(image.chunks[1]) > 1:
        image = image.rechunk({1: -1})
    bounds = np.cumsum((0, *image.chunks[0])).tolist()
    with target.temporary_path() as tmp:
        out = tifffile.memmap(tmp, shape=shape, dtype=image.dtype,
                              photometric="rgb" if channels >= 3 else "minisblack",
                              planarconfig="contig" if channels > 1 else None,
                              extrasamples=("unassalpha",) if channels in (2, 4) else None)
        try:
            for first in range(0, len(image.chunks[0]), batch):
                part = range(first, min(first + batch, len(image.chunks[0])))
                bands = [image.blocks[i] for i in part]
                extra = [alpha.blocks[i] for i in part] if alpha is not None else []
                values = dask.compute(*bands, *extra)
                for k, i in enumerate(part):
                    rows = slice(bounds[i], bounds[i + 1])
                    band = values[k]
                    if channels == 1:
                        out[rows] = band
                    else:
                        out[rows, :, :colours] = band if not gray else band[:, :, None]
                        if alpha is not None:
                            out[rows, :, colours] = values[len(bands) + k]
                del values
            out.flush()
        finally:
            del out
