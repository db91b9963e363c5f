"""Denoise an image file with non-local means, the bilateral filter or kernel regression.

Reads IN (PNG, JPEG, TIFF, ...; gray or colour, 8 or 16 bits or float),
removes additive Gaussian noise and writes OUT (format from its extension) in
the input's dtype; an alpha channel is kept unchanged, only the colour channels
are filtered. The noise level --sigma is in the file's units (0-255 for 8-bit
images) and is estimated when not given; --data-range is the full scale (the
dtype's maximum for integer files, the span of the data for float files unless
given). OUT must differ from IN: the input is never overwritten. The
metadata are carried: EXIF (orientation included), ICC profile, resolution and
PNG text; for TIFF also the tiling, the description and the date, artist and
copyright tags. A multi-page TIFF is denoised page by page into a multi-page
OUT, or with --volume as one 3-D volume. --out-dtype writes another dtype by
a stated rule (no clipping, no guessed range). Each method's parameters are
options (--h, --patch-size, --sigma-color, ...); what is not given comes from
the noise level, and the parameters used are printed. Large images show a
progress bar on standard error when it is a terminal (--quiet: none, and no
summary).

With --compare FIG.png, a figure shows the noisy image, the denoised one and
their difference side by side; with --reference CLEAN.png, the titles give
each image's PSNR against that clean reference.

An image whose working copy (its pixels as float32, float64 for float64
files) exceeds the working memory (NADARAYA_WORKING_MEMORY, MiB) is filtered
in bands of rows through dask, with the same result: an uncompressed TIFF is
read lazily, and a TIFF output is written band by band (other formats are
decoded and encoded whole). --scheduler ADDRESS runs the bands on a dask
distributed cluster (the workers must see IN's file system); without it they
run on local threads. Chunked images take no --compare or --reference.

Examples:
  nadaraya denoise noisy.png clean.png --method nlm --sigma 25
  nadaraya denoise noisy.png out.png --method skr --compare fig.png --reference truth.png
  nadaraya denoise big.tif out.tif --sigma 12 --scheduler tcp://10.0.0.5:8786
  nadaraya denoise scan16.tif preview.png --out-dtype uint8
  nadaraya denoise noisy.png out.png --method bilateral --sigma-color 40 --sigma-spatial 2
  nadaraya denoise mri.tif out.tif --volume --method nlm --patch-size 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._errors import NadarayaError
from ._denoise_figure import figure
from ._denoise_options import add_method_arguments, method_overrides, progress
from ._numbers import positive
from ._scheduler import scheduler

__all__ = ["FIGURES", "MEMORY_HINT", "add_arguments", "files", "run"]

#: Outputs that are figures (their format is checked before the work starts).
FIGURES = ("--compare",)

#: What to change when the job does not fit in memory.
MEMORY_HINT = "give a smaller image (crop or split IN)"

_METHODS = ("nlm", "bilateral", "skr", "kr", "nlbayes")
_NAMES = {"nlm": "non-local means", "bilateral": "bilateral filter",
          "skr": "steering kernel regression", "kr": "classic kernel regression",
          "nlbayes": "non-local Bayes"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nadaraya denoise`` to ``parser``."""
    parser.add_argument("input", metavar="IN", help="noisy image file")
    parser.add_argument("output", metavar="OUT",
                        help="file to write the denoised image to, in the input's dtype "
                             "('-': standard output, in the input's format)")
    parser.add_argument("--method", choices=_METHODS, default="nlm",
                        help="nlm (non-local means, default), bilateral, skr (steering kernel "
                             "regression), kr (classic kernel regression) or nlbayes "
                             "(non-local Bayes)")
    parser.add_argument("--sigma", type=positive, metavar="S",
                        help="noise standard deviation in the image's units (0-255 for 8-bit "
                             "files); estimated from the image when not given")
    parser.add_argument("--data-range", type=positive, metavar="R",
                        help="the image's full scale (255 for 8-bit files); default the dtype's "
                             "maximum for integer files and the span max - min of the data for "
                             "float files")
    parser.add_argument("--out-dtype", choices=("uint8", "uint16", "float32", "float64"),
                        help="write OUT in this dtype instead of IN's: integer full scales map "
                             "onto each other, integers become floats in [0, 1], floats "
                             "become integers from [0, --data-range] (default [0, 1]); "
                             "values outside that range are refused, not clipped")
    parser.add_argument("--compare", metavar="FIG", help="also write a figure: noisy, "
                        "denoised and their difference side by side")
    parser.add_argument("--reference", metavar="CLEAN",
                        help="clean image: the --compare titles then give PSNR against it")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="address of a dask distributed scheduler (e.g. "
                             "tcp://host:8786) to filter the image on, in bands of rows; "
                             "default: local threads, and only for images larger than the "
                             "working memory")
    add_method_arguments(parser)


def files(args: argparse.Namespace) -> tuple[list[str], dict[str, str | None]]:
    """The inputs and outputs of ``nadaraya denoise``."""
    return [args.input, args.reference], {"OUT": args.output, "--compare": args.compare}


def _split_alpha(image: Any) -> tuple[Any, Any]:
    """Colour channels and the alpha channel (None without one): 2 and 4 channels carry alpha."""
    if image.ndim == 3 and image.shape[2] in (2, 4):
        colour = image[:, :, :-1]
        return (colour[:, :, 0] if colour.shape[2] == 1 else colour), image[:, :, -1]
    return image, None


def _join_alpha(colour: Any, alpha: Any, np: Any) -> Any:
    if alpha is None:
        return colour
    colour = colour if colour.ndim == 3 else colour[:, :, None]
    return np.concatenate([colour, alpha[:, :, None].astype(colour.dtype)], axis=2)


@contextlib.contextmanager
def _about(what: str) -> Iterator[None]:
    """Errors raised inside name ``what`` (the option whose file or image is at fault)."""
    try:
        yield
    except NadarayaError as exc:
        raise NadarayaError(f"{what}: {exc}") from None


def _working_copy(shape: tuple[int, ...], dtype: Any) -> int:
    """Bytes of the float copy the filters make of an image of ``shape`` and ``dtype``."""
    import numpy as np

    return int(np.prod(shape)) * (8 if np.dtype(dtype) == np.float64 else 4)


def _band_rows(shape: tuple[int, ...], dtype: Any, budget: float) -> int:
    """Rows per chunk: a band's working copy takes a quarter of the budget (MiB)."""
    row = _working_copy(shape[1:], dtype)
    return max(1, min(int(shape[0]), int(budget * 2**20 / 4 // max(row, 1))))


def _threads(client: Any) -> int:
    """Bands to compute at once: the cluster's threads (local cores without a client)."""
    if client is None:
        return max(2, os.cpu_count() or 1)
    workers = client.scheduler_info()["workers"].values()
    return max(2, sum(w.get("nthreads", 1) for w in workers))


def _range_and_sigma(args: argparse.Namespace, colour: Any, kind: str,
                     measure_range: Any, volume: bool = False
                     ) -> tuple[float, str, float, str]:
    """``--data-range`` and ``--sigma``, or what IN's colour channels give.

    ``measure_range()`` gives the data range of ``colour`` (in memory or
    through dask); a ``volume``'s noise level is the median of its slices'.
    Returns ``(data_range, how it was set, sigma, how it was set)``; an
    estimated sigma of 0 (no noise found) is returned unchecked.
    """
    from ..image import estimate_noise
    from ..image.denoise import _volume_noise, check_sigma

    if args.data_range is not None:
        data_range, scale = args.data_range, "given"
    else:
        with _about(f"IN {args.input}"):
            data_range = measure_range()
        scale = ("the dtype's maximum" if kind in "ui" else
                 "the span of the data; --data-range sets it")
    sigma, how = args.sigma, "given"
    if sigma is None:
        with _about(f"IN {args.input}"):
            sigma = _volume_noise(colour) if volume else estimate_noise(colour)
        how = "estimated"
        if sigma == 0:
            return data_range, scale, 0.0, how
    check_sigma(sigma, data_range, range_name="--data-range",
                name="--sigma" if how == "given" else f"the noise level estimated from IN "
                                                      f"{args.input} (--sigma sets it)")
    return data_range, scale, sigma, how


def _measure_range(colour: Any) -> float:
    """The data range of an image or volume in memory (see ``data_range_of``)."""
    from ..image.denoise import _volume_range

    return _volume_range(colour, None)


def _parameters(args: argparse.Namespace, sigma: float, data_range: float,
                overrides: dict[str, Any]) -> str:
    """The method's parameters as run: the recipe's, the volume's, then the options'."""
    from ..image.denoise import VOLUME_NLM, recipe

    params = recipe(args.method, sigma, data_range)
    if args.volume and args.method == "nlm":
        params.update(VOLUME_NLM)
    params.update(overrides)
    if args.method in ("skr", "nlbayes"):
        params.pop("sigma")  # the noise level, printed beside
    def shown(value: Any) -> str:  # as the option takes it: several sizes apart
        if isinstance(value, tuple):
            return " ".join(map(shown, value))
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{k} {shown(v)}" for k, v in params.items())


def _say(args: argparse.Namespace, text: str) -> None:
    """Print ``text`` unless --quiet."""
    if not args.quiet:
        print(text)


def _unchanged(args: argparse.Namespace, target: Any) -> int:
    _say(args, f"no noise found in {args.input} (estimated sigma 0): wrote it unchanged to "
          f"{target}; give --sigma to filter it anyway")
    return 0


def _chunked(args: argparse.Namespace, shape: tuple[int, ...], dtype: Any,
             pixels: Any = None) -> int:
    """``nadaraya denoise`` of an image through dask, in bands of rows: IN read lazily
    when it is an uncompressed TIFF, else ``pixels`` (IN decoded)."""
    import dask.array as da
    import numpy as np

    from .._config import get_config
    from ..image._chunked_io import read_chunked, write_tiff_bands
    from ..image._dask import dask_image
    from ..image._dask import data_range as dask_range
    from ..image._io import image_writer
    from ..image.denoise import denoise

    target = args.outputs["OUT"]
    suffix = target.suffix or Path(args.input).suffix.lower()
    channels = 1 if len(shape) == 2 else shape[2]
    writer = image_writer(suffix, dtype, channels, f"OUT {target}")
    budget = get_config().working_memory
    size = (f"IN {args.input} ({shape[1]} x {shape[0]}, "
            f"{_working_copy(shape, dtype) / 2**20:.3g} MiB as floats) is filtered in chunks")
    for option in ("compare", "reference"):
        if getattr(args, option) is not None:
            raise NadarayaError(f"--{option}: {size}, and --{option} needs the whole image "
                                "in memory; leave it out, or raise NADARAYA_WORKING_MEMORY.")
    overrides = method_overrides(args)
    rows = _band_rows(shape, dtype, budget)
    with scheduler(args.scheduler) as client:
        batch = _threads(client)
        if pixels is None:
            with _about("IN"):
                noisy = read_chunked(args.input, rows)
        else:
            noisy = da.from_array(pixels, chunks=(rows, *pixels.shape[1:]))
        colour, alpha = _split_alpha(noisy)
        data_range, scale, sigma, how = _range_and_sigma(
            args, colour, noisy.dtype.kind, lambda: dask_range(dask_image(colour)))
        start = time.perf_counter()
        with _about(f"IN {args.input}"):
            out = colour if sigma == 0 else denoise(colour, args.method, sigma,
                                                    data_range=data_range, **overrides)
            if writer == "tifffile":
                write_tiff_bands(target, out, alpha, batch=batch)
            else:
                from ..image._io import write_image

                result = _join_alpha(out.compute(), None if alpha is None else
                                     alpha.compute(), np)
                write_image(target, result, suffix=suffix)
        elapsed = time.perf_counter() - start
    if sigma == 0:
        return _unchanged(args, target)
    kept = " (alpha kept)" if alpha is not None else ""
    where = f"scheduler {args.scheduler}" if args.scheduler else "local threads"
    _say(args, f"{_NAMES[args.method]}: sigma {sigma:.4g} ({how}), data range {data_range:.4g} "
          f"({scale}), {shape[1]} x {shape[0]} {np.dtype(dtype)}{kept} in bands of {rows} "
          f"rows on {where} in {elapsed:.2f} s -> {target}")
    return 0


def _load(args: argparse.Namespace) -> Any:
    """IN's pages and metadata, with each page's colour channels and alpha."""
    from ..image._pages import read_image_file

    with _about("IN"):
        file = read_image_file(args.input)
    if len(file.pages) > 1:
        with _about(f"IN {args.input}"):
            file.stack  # noqa: B018 (pages of one shape and dtype, or the error says why)
        for option in ("compare", "reference"):
            if getattr(args, option) is not None:
                raise NadarayaError(f"--{option}: IN {args.input} has {len(file.pages)} pages "
                                    f"and --{option} shows one image; leave it out.")
    return file


def _out_dtype(args: argparse.Namespace, dtype: Any) -> Any:
    import numpy as np

    return np.dtype(dtype if args.out_dtype is None else args.out_dtype)


def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya denoise``; returns the exit status."""
    import numpy as np

    from .._config import get_config
    from ..image._chunked_io import image_header

    header = image_header(args.input)
    if header is not None and header[2] and args.out_dtype is None and (
            args.scheduler is not None or _working_copy(
                header[0], header[1]) > get_config().working_memory * 2**20):
        return _chunked(args, header[0], header[1])

    from ..image import psnr
    from ..image._dtype import convert_dtype
    from ..image._image import as_image, data_range_of
    from ..image._io import image_writer, read_image
    from ..image._pages import write_image_file
    from ..image.denoise import denoise

    target = args.outputs["OUT"]
    overrides = method_overrides(args)
    file = _load(args)
    if args.volume:
        if len(file.pages) < 2:
            raise NadarayaError(f"--volume: IN {args.input} has one page; a volume is a "
                                "multi-page TIFF. Leave --volume out.")
        if args.method not in ("nlm", "bilateral"):
            raise NadarayaError(f"--volume: --method {args.method} filters 2-D images only; "
                                "use --method nlm or bilateral, or leave --volume out.")
    noisy = file.pages[0]
    if len(file.pages) == 1 and args.out_dtype is None and (
            args.scheduler is not None or _working_copy(noisy.shape, noisy.dtype) > (
                get_config().working_memory * 2**20)):
        return _chunked(args, noisy.shape, noisy.dtype, noisy)
    suffix = target.suffix or Path(args.input).suffix.lower()
    out_dtype = _out_dtype(args, noisy.dtype)
    image_writer(suffix, out_dtype, 1 if noisy.ndim == 2 else noisy.shape[2], f"OUT {target}")
    reference = None
    if args.reference:
        with _about("--reference"):
            reference = read_image(args.reference)
        if reference.shape != noisy.shape:
            raise NadarayaError(
                f"--reference has shape {reference.shape} but IN has {noisy.shape}; they must "
                "be the same image."
            )

    def convert(pages: list[Any]) -> list[Any]:
        if args.out_dtype is None:  # the filters give the input's dtype, whatever it is
            return pages
        with _about("--out-dtype"):
            return [convert_dtype(p, out_dtype, args.data_range, name="--out-dtype")
                    for p in pages]

    items = [file.stack] if args.volume else file.pages
    outs, lines, elapsed = [], [], 0.0
    pixels = len(file.pages) * noisy.shape[0] * noisy.shape[1]
    with progress(args, pixels, _NAMES[args.method]):
        for k, item in enumerate(items):
            colour, alpha = _split_alpha(item)
            axis = -1 if colour.ndim == (4 if args.volume else 3) else None
            data_range, scale, sigma, how = _range_and_sigma(
                args, colour, item.dtype.kind, lambda c=colour: _measure_range(c), args.volume)
            where = f"page {k}: " if len(items) > 1 else ""
            if sigma == 0:
                outs.append(item)
                lines.append(f"{where}no noise found (estimated sigma 0): kept unchanged")
                continue
            start = time.perf_counter()
            with _about(f"IN {args.input}"):
                outs.append(_join_alpha(denoise(colour, args.method, sigma,
                                                data_range=data_range, channel_axis=axis,
                                                **overrides), alpha, np))
            elapsed += time.perf_counter() - start
            lines.append(f"{where}sigma {sigma:.4g} ({how}), data range {data_range:.4g} "
                         f"({scale}), {_parameters(args, sigma, data_range, overrides)}")
    if args.volume:
        outs = list(outs[0])
    write_image_file(target, convert(outs), file.meta, suffix=suffix)
    if len(items) == 1 and lines[0].startswith("no noise"):
        return _unchanged(args, target)
    kept = " (alpha kept)" if noisy.ndim == 3 and noisy.shape[2] in (2, 4) else ""
    pages = (f"a volume of {len(file.pages)} pages of " if args.volume else
             f"{len(file.pages)} pages of " if len(file.pages) > 1 else "")
    as_dtype = f" as {out_dtype}" if out_dtype != noisy.dtype else ""
    _say(args, f"{_NAMES[args.method]}: {'; '.join(lines)}; {pages}{noisy.shape[1]} x "
         f"{noisy.shape[0]} {noisy.dtype}{kept} in {elapsed:.2f} s -> {target}{as_dtype}")
    out = outs[0]
    colour = _split_alpha(noisy)[0]
    scores = None
    if reference is not None:
        data_range = data_range_of(as_image(colour), args.data_range)
        clean = _split_alpha(reference)[0]
        scores = (psnr(clean, colour, data_range=data_range),
                  psnr(clean, _split_alpha(out)[0], data_range=data_range))
        _say(args, f"PSNR: noisy {scores[0]:.2f} dB, denoised {scores[1]:.2f} dB")
    if args.outputs["--compare"] is not None:
        data_range = data_range_of(as_image(colour), args.data_range)
        figure(args, colour, _split_alpha(out)[0], data_range, scores, _NAMES[args.method])
        _say(args, f"figure -> {args.outputs['--compare']}")
    return 0
