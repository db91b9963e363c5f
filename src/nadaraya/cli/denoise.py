"""Denoise an image file with non-local means, the bilateral filter or kernel regression.

Reads IN (PNG, JPEG, TIFF, ...; gray or colour), removes additive Gaussian
noise and writes OUT (format from its extension). The noise level --sigma is in
the file's units (0-255 for 8-bit images) and is estimated when not given.
OUT must differ from IN: the input is never overwritten.

With --compare FIG.png, a figure shows the noisy image, the denoised one and
their difference side by side; with --reference CLEAN.png, the titles give
each image's PSNR against that clean reference.

Examples:
  nadaraya denoise noisy.png clean.png --method nlm --sigma 25
  nadaraya denoise noisy.png out.png --method skr --compare fig.png --reference truth.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .._errors import NadarayaError

__all__ = ["add_arguments", "run"]

_METHODS = ("nlm", "bilateral", "skr", "kr")
_NAMES = {"nlm": "non-local means", "bilateral": "bilateral filter",
          "skr": "steering kernel regression", "kr": "classic kernel regression"}


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nadaraya denoise`` to ``parser``."""
    parser.add_argument("input", metavar="IN", help="noisy image file")
    parser.add_argument("output", metavar="OUT", help="file to write the denoised image to")
    parser.add_argument("--method", choices=_METHODS, default="nlm",
                        help="nlm (non-local means, default), bilateral, skr (steering kernel "
                             "regression) or kr (classic kernel regression)")
    parser.add_argument("--sigma", type=_positive, metavar="S",
                        help="noise standard deviation in the image's units (0-255 for 8-bit "
                             "files); estimated from the image when not given")
    parser.add_argument("--compare", metavar="FIG", help="also write a figure: noisy, "
                        "denoised and their difference side by side")
    parser.add_argument("--reference", metavar="CLEAN",
                        help="clean image: the --compare titles then give PSNR against it")


def _distinct(args: argparse.Namespace) -> None:
    inputs = {Path(p).resolve() for p in (args.input, args.reference) if p}
    for name in ("output", "compare"):
        path = getattr(args, name)
        if path and Path(path).resolve() in inputs:
            raise NadarayaError(
                f"{name} {path!r} is an input file; nadaraya denoise never writes over its "
                "input. Give another file name."
            )
    if args.compare and Path(args.compare).resolve() == Path(args.output).resolve():
        raise NadarayaError("--compare and OUT are the same file; give two different names.")


def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya denoise``; returns the exit status."""
    import numpy as np

    from ..image import estimate_noise, psnr
    from ..image._io import read_image, write_image
    from ..image.denoise import denoise

    _distinct(args)
    noisy = read_image(args.input)
    reference = None
    if args.reference:
        reference = read_image(args.reference)
        if reference.shape != noisy.shape:
            raise NadarayaError(
                f"--reference has shape {reference.shape} but IN has {noisy.shape}; they must "
                "be the same image."
            )
    sigma = args.sigma
    how = "given"
    if sigma is None:
        sigma = estimate_noise(noisy)
        how = "estimated"
    start = time.perf_counter()
    out = denoise(noisy, args.method, sigma)
    elapsed = time.perf_counter() - start
    write_image(args.output, out)
    print(f"{_NAMES[args.method]}: sigma {sigma:.2f} ({how}), {noisy.shape[1]} x "
          f"{noisy.shape[0]} in {elapsed:.2f} s -> {args.output}")
    if reference is not None:
        print(f"PSNR: noisy {psnr(reference, noisy):.2f} dB, denoised "
              f"{psnr(reference, out):.2f} dB")
    if args.compare:
        _figure(args, noisy, out, reference, np)
        print(f"figure -> {args.compare}")
    return 0


def _figure(args: argparse.Namespace, noisy, out, reference, np) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..image import psnr

    gray = noisy.ndim == 2
    diff = noisy.astype(np.float64) - out.astype(np.float64)
    top = float(np.abs(diff).max()) or 1.0
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.4), constrained_layout=True)
    titles = ["noisy", f"denoised ({_NAMES[args.method]})", "difference (noisy - denoised)"]
    if reference is not None:
        titles[0] += f"\nPSNR {psnr(reference, noisy):.2f} dB"
        titles[1] += f"\nPSNR {psnr(reference, out):.2f} dB"
    cmap = "gray" if gray else None
    axes[0].imshow(noisy, cmap=cmap, vmin=0, vmax=255 if noisy.dtype == np.uint8 else None)
    axes[1].imshow(out, cmap=cmap, vmin=0, vmax=255 if out.dtype == np.uint8 else None)
    shown = diff if gray else diff.mean(axis=2)
    im = axes[2].imshow(shown, cmap="RdBu_r", vmin=-top, vmax=top)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_axis_off()
    try:
        fig.savefig(args.compare, dpi=100)
    except (OSError, ValueError) as exc:
        raise NadarayaError(f"cannot write figure {args.compare!r}: {exc}") from None
    finally:
        plt.close(fig)
