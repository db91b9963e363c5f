"""``nadaraya denoise``'s per-method options and its progress bar.

Each method's parameters are options of their own; an option the chosen
method does not take is refused (nothing given is silently ignored). What is
not given comes from :func:`nadaraya.image.denoise.recipe` and the noise level.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from .._errors import NadarayaError
from ._numbers import count, non_negative, positive

__all__ = ["PROGRESS_PIXELS", "add_method_arguments", "method_overrides", "progress"]

#: Images with at least this many pixels (all pages) show a progress bar on a terminal.
PROGRESS_PIXELS = 1 << 20

# option dest -> (parameter name, methods taking it)
_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "h": ("h", ("nlm", "kr", "skr")),
    "patch_size": ("patch_size", ("nlm", "nlbayes")),
    "search_radius": ("search_radius", ("nlm", "nlbayes")),
    "patch_kind": ("patch_kind", ("nlm",)),
    "sigma_color": ("sigma_color", ("bilateral",)),
    "sigma_spatial": ("sigma_spatial", ("bilateral",)),
    "radius": ("radius", ("bilateral", "kr", "skr")),
    "order": ("order", ("kr", "skr")),
    "iterations": ("iterations", ("skr",)),
    "pilot": ("pilot", ("skr", "nlbayes")),
    "k1": ("k1", ("nlbayes",)),
    "k2": ("k2", ("nlbayes",)),
    "step": ("step", ("nlbayes",)),
    "threshold": ("threshold", ("nlbayes",)),
    "beta": ("beta", ("nlbayes",)),
    "flat": ("flat", ("nlbayes",)),
    "flat2": ("flat2", ("nlbayes",)),
    "weighted": ("weighted", ("nlbayes",)),
    "patch_size2": ("patch_size2", ("nlbayes",)),
    "transform_patch_size": ("transform_patch_size", ("nlbayes",)),
    "transform_k": ("transform_k", ("nlbayes",)),
    "transform_lambda": ("transform_lambda", ("nlbayes",)),
}
# (option dest, method) -> the values it takes there, where methods share an option
_CHOICES = {("pilot", "skr"): ("nlm", "image"),
            ("pilot", "nlbayes"): ("bayes", "transform", "both")}
# options whose flag is not "--" + dest with dashes
_FLAGS = {"weighted": "--equal-weights"}


#: The largest window radius or patch side the options take (a window of that radius
#: already covers a 16k image from its centre).
_LARGEST = 8192


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    """Add each method's parameters, the --quiet switch and --volume to ``parser``."""
    group = parser.add_argument_group(
        "method parameters", "default: set from the noise level (see nadaraya.image.denoise."
        "recipe); an option the chosen --method does not take is an error")
    group.add_argument("--h", type=positive, metavar="H",
                       help="nlm: cut-off patch distance in the image's units; kr, skr: "
                            "kernel bandwidth in pixels")
    group.add_argument("--patch-size", type=count(1, _LARGEST, odd=True), metavar="P",
                       help="nlm: odd side of the patches (default 7; 5 for volumes); "
                            "nlbayes: of the stage-1 patches (default 5; 7 above sigma 30 of 255)")
    group.add_argument("--search-radius", type=count(0, _LARGEST), metavar="R",
                       help="nlm: half-side of the search window (default 7; 3 for volumes); "
                            "nlbayes: of the window of candidate patches (default 18)")
    group.add_argument("--patch-kind", choices=("gaussian", "box"),
                       help="nlm: patch weights (default gaussian)")
    group.add_argument("--sigma-color", type=positive, metavar="S",
                       help="bilateral: s.d. of the colour Gaussian, in the image's units "
                            "(default 2.5 sigma)")
    group.add_argument("--sigma-spatial", type=positive, metavar="S",
                       help="bilateral: s.d. of the spatial Gaussian, in pixels (default 2.5)")
    group.add_argument("--radius", type=count(1, _LARGEST), metavar="R",
                       help="bilateral, kr, skr: window radius in pixels")
    group.add_argument("--order", type=int, choices=(0, 1, 2),
                       help="kr, skr: degree of the local polynomial")
    group.add_argument("--iterations", type=count(1, 100), metavar="N",
                       help="skr: steering iterations (default 1)")
    group.add_argument("--pilot", choices=sorted({v for c in _CHOICES.values() for v in c}),
                       help="skr: where the first gradients come from, nlm or image "
                            "(default nlm); nlbayes: the first stage, bayes (non-local "
                            "Bayes's own), transform (collaborative hard thresholding) or "
                            "both (their mean, the default)")
    group.add_argument("--k1", type=count(1, _LARGEST), metavar="K",
                       help="nlbayes: patches per group in stage 1 (default 120; 90 above "
                            "sigma 30 of 255)")
    group.add_argument("--k2", type=count(1, _LARGEST), metavar="K",
                       help="nlbayes: patches per group in stage 2 (default 30; 45 above "
                            "sigma 15 of 255)")
    group.add_argument("--step", type=count(1, _LARGEST), metavar="S",
                       help="nlbayes: spacing of the reference patches (default 4; 5 above "
                            "sigma 30 of 255)")
    group.add_argument("--threshold", choices=("soft", "hard"),
                       help="nlbayes: stage 1's rule on each group's covariance eigenvalues: "
                            "soft shrinks them by beta sigma^2, hard keeps those above it "
                            "(default hard)")
    group.add_argument("--beta", type=positive, metavar="B",
                       help="nlbayes: stage 1's threshold in units of sigma^2 (default 2.5; "
                            "2 above sigma 15, 3 above 30, of 255)")
    group.add_argument("--flat", type=non_negative, metavar="F",
                       help="nlbayes: a stage-1 group whose values' s.d. is at most F sigma is "
                            "set to its mean (default 0, never; 1 above sigma 30 of 255)")
    group.add_argument("--flat2", type=non_negative, metavar="F",
                       help="nlbayes: the same in stage 2 (default 1; 0: never)")
    group.add_argument("--patch-size2", type=count(1, _LARGEST, odd=True), nargs="+",
                       metavar="P",
                       help="nlbayes: odd side(s) of the stage-2 patches; with several, "
                            "stage 2 runs with each and averages them (default 5 7; 7 9 "
                            "above sigma 15 of 255)")
    group.add_argument("--transform-patch-size", type=count(1, _LARGEST), metavar="P",
                       help="nlbayes: side of the patches of the transform's first stage "
                            "(default 8; 10 above sigma 30 of 255)")
    group.add_argument("--transform-k", type=count(1, _LARGEST), metavar="K",
                       help="nlbayes: patches per group of the transform's first stage "
                            "(default 16; 32 above sigma 30 of 255)")
    group.add_argument("--transform-lambda", type=positive, metavar="L",
                       help="nlbayes: the transform's threshold in units of sigma (default "
                            "2.4; 2.7 from sigma 15 to 30 of 255)")
    group.add_argument("--equal-weights", dest="weighted", action="store_const", const=False,
                       help="nlbayes: average the stage-2 estimates of a pixel with equal "
                            "weights (default: each group weighs the inverse of its estimated "
                            "noise variance)")
    parser.add_argument("--volume", action="store_true",
                        help="a multi-page TIFF is one 3-D volume (nlm and bilateral filter "
                             "in 3-D); default: its pages are filtered one by one")
    parser.add_argument("--quiet", action="store_true",
                        help="print nothing but errors (no progress bar, no summary)")


def method_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters given on the command line for ``args.method``.

    Raises
    ------
    NadarayaError
        When an option given belongs to another method.
    """
    out: dict[str, Any] = {}
    for dest, (name, methods) in _OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if args.method not in methods:
            option = _FLAGS.get(dest, "--" + dest.replace("_", "-"))
            raise NadarayaError(f"{option} is a parameter of --method {' or '.join(methods)}, "
                                f"not of {args.method}; leave it out or change --method.")
        allowed = _CHOICES.get((dest, args.method))
        if allowed is not None and value not in allowed:
            raise NadarayaError(f"--{dest.replace('_', '-')} for --method {args.method} is one "
                                f"of {', '.join(allowed)}; got {value}.")
        if isinstance(value, list):  # nargs="+": one size as a number, several as a tuple
            value = value[0] if len(value) == 1 else tuple(value)
        out[name] = value
    return out


@contextlib.contextmanager
def progress(args: argparse.Namespace, pixels: int, what: str) -> Iterator[None]:
    """A progress bar on standard error over ``pixels`` while the filters run.

    Shown only when standard error is a terminal, the image has at least
    :data:`PROGRESS_PIXELS` pixels, tqdm is installed and --quiet is not given.
    """
    from ..image._progress import reporting

    show = (not args.quiet and pixels >= PROGRESS_PIXELS and sys.stderr.isatty())
    tqdm = None
    if show:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
    if tqdm is None:
        yield
        return
    with tqdm(total=pixels, desc=what, unit="px", unit_scale=True, file=sys.stderr,
              leave=False) as bar, reporting(bar.update):
        yield
        bar.refresh()  # the last blocks can finish within tqdm's display interval
