"""Smooth the shipped motorcycle crash data with every engine and compare them.

Loads the mcycle data (Silverman 1985: head acceleration `accel` in g against
`times` in ms after impact), smooths accel over times with each engine that can
run the problem, and prints per engine whether it is the automatic choice, its
best time and its largest difference to the float64 dense engine (the
reference), then nadaraya.explain() for the automatic choice. With --out, the
smoothed values of the automatic choice are written to a CSV file.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NadarayaError
from ._numbers import count

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["MAKES_FOLDERS", "MEMORY_HINT", "add_arguments", "files", "run", "write_csv"]

#: Outputs whose missing folders are made (``--out nadaraya-demo/fit.csv`` on a fresh checkout).
MAKES_FOLDERS = ("--out",)
#: What to change when the job does not fit in memory.
MEMORY_HINT = "give a smaller --grid"


_RULES = ("loo", "silverman", "scott")


def _bandwidth(text: str) -> float | str:
    if text.lower() in _RULES:
        return text.lower()
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of ms or one of {', '.join(_RULES)}; got {text!r}"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of ms > 0 or one of "
                                         f"{', '.join(_RULES)}; got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nadaraya demo`` to ``parser``."""
    parser.add_argument("--kernel", default="gaussian", metavar="NAME",
                        help="kernel name: gaussian (default), laplacian, cauchy, epanechnikov, "
                             "tricube or uniform")
    parser.add_argument("--bandwidth", type=_bandwidth, default="loo", metavar="H",
                        help="bandwidth in ms; or 'loo' (default): the value with the least "
                             "leave-one-out squared error on a grid; or the rule 'silverman' "
                             "or 'scott'")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                        help="precision the engines compute in (default float64)")
    parser.add_argument("--grid", type=count(1), metavar="N",
                        help="smooth at N evenly spaced times instead of the measured times")
    parser.add_argument("--empty", choices=("raise", "nan", "nearest"), default="raise",
                        help="policy for a time that sees no measurement with weight "
                             "(default raise)")
    parser.add_argument("--repeat", type=count(1), default=5, metavar="R",
                        help="time each engine as the best of R runs (default 5)")
    parser.add_argument("--out", type=Path, metavar="CSV",
                        help="write times and smoothed accel (automatic engine) to this CSV file, "
                             "making its folder if needed ('-': standard output)")
    parser.add_argument("--figures", type=Path, default=Path("nadaraya-demo"), metavar="DIR",
                        help="fit mcycle with cross-validated Nadaraya-Watson and local-linear "
                             "regression and write the figures to DIR (default nadaraya-demo)")
    parser.add_argument("--no-figures", action="store_true",
                        help="skip the cross-validated fits and their figures")


def files(args: argparse.Namespace) -> tuple[list[Path], dict[str, Path | None]]:
    """The input (the shipped data) and the output of ``nadaraya demo``."""
    from nadaraya.datasets import data_path

    return [data_path("mcycle")], {"--out": args.out}


def write_csv(target: str | Path | Output, header: Sequence[str], columns: Sequence[Any]) -> None:
    """Write columns of numbers as CSV, safely (see :mod:`nadaraya._files`).

    Parameters
    ----------
    target : str, path-like or nadaraya._files.Output
        Destination: a regular file is replaced atomically (a reader sees the
        old file or the complete new one), its folder made if missing; ``-``
        is standard output.
    header : sequence of str
        Column names.
    columns : sequence of array-like, each of shape (n_rows,)
    """
    import numpy as np

    from .._files import output

    arrays = [np.asarray(c).ravel() for c in columns]
    with output(target, option="--out", parents=True).open("w", newline="") as f:
        f.write(",".join(header) + "\n")
        for row in zip(*arrays, strict=True):
            f.write(",".join(str(v) for v in row) + "\n")


def _best_time(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _loo_bandwidth(times: Any, y: Any, kernel: str, n_grid: int = 25) -> tuple[float, str]:
    """Bandwidth with the least leave-one-out squared error on a log-spaced grid."""
    import numpy as np

    import nadaraya

    span = float(times.max() - times.min())
    grid = np.geomspace(span / 100, span / 4, n_grid)
    errors = []
    for h in grid:
        fit = nadaraya.smooth(times, times, y, kernel, "leave-one-out", bandwidth=h, empty="nan")
        errors.append(np.mean((fit - y) ** 2) if np.all(np.isfinite(fit)) else np.inf)
    if not np.isfinite(np.min(errors)):
        raise NadarayaError(
            f"--bandwidth loo: with kernel {kernel!r} every bandwidth up to {grid[-1]:.3g} leaves "
            "some measurement without neighbours; give --bandwidth as a number."
        )
    best = int(np.argmin(errors))
    return float(grid[best]), (f"the least leave-one-out squared error among {n_grid} values "
                               f"from {grid[0]:.3g} to {grid[-1]:.3g} ms")


def _relative_difference(fit: Any, reference: Any, scale: float) -> float:
    """``max |fit - reference| / scale``; NaN (``--empty nan``) only where the reference has it."""
    import numpy as np

    fit = np.asarray(fit, dtype=np.float64)
    gaps = np.isnan(reference)
    if not np.array_equal(np.isnan(fit), gaps):
        return float("inf")
    return float(np.max(np.abs(fit[~gaps] - reference[~gaps]), initial=0.0)) / scale


def _refusal(exc: NadarayaError, reason: str | None) -> str:
    if reason and reason.startswith("cannot run"):
        return reason
    return f"cannot run: {exc}"


def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya demo``; returns the exit status."""
    import numpy as np
    import torch

    import nadaraya
    from nadaraya._files import check_folder
    from nadaraya.bandwidth import resolve_bandwidth
    from nadaraya.datasets import load_mcycle
    from nadaraya.engine import ENGINES

    from ._memory import check_memory

    if not args.no_figures:
        check_folder(args.figures, option="--figures")
    if args.grid:
        # the queries, their float32 copy, the reference and one fit per engine: float64 each
        check_memory(8 * args.grid * (3 + len(ENGINES)), f"--grid {args.grid}")
    X, y = load_mcycle(return_X_y=True)
    times = X[:, 0]
    if args.grid:
        queries = np.linspace(times.min(), times.max(), args.grid)
        where = f"{args.grid} evenly spaced times"
    else:
        queries = times.copy()
        where = f"the {len(times)} measured times"
    if args.bandwidth == "loo":
        h, why = _loo_bandwidth(times, y, args.kernel)
    else:
        h = resolve_bandwidth(args.bandwidth, torch.from_numpy(X), args.kernel)
        why = "given with --bandwidth"
        if isinstance(h, torch.Tensor):
            h, why = float(h[0]), f"{args.bandwidth.capitalize()}'s rule"
    options = {"kernel": args.kernel, "bandwidth": h, "empty": args.empty}
    reference = nadaraya.smooth(queries, times, y, engine="dense", **options)
    scale = float(np.nanmax(np.abs(reference), initial=0.0)) or 1.0
    dt = np.dtype(args.dtype)
    q, k, v = queries.astype(dt), times.astype(dt), y.astype(dt)
    auto = nadaraya.explain(q, k, v, args.kernel, bandwidth=h)

    print("nadaraya demo: motorcycle crash data (Silverman 1985; R's MASS::mcycle)")
    print(f"  {len(times)} measurements, times (ms) -> accel (g), smoothed at {where}")
    print(f"  kernel {args.kernel}, {args.dtype}, bandwidth {h:.4g} ms: {why}")
    print()
    print(f"{'engine':<11}{'auto':<6}{f'best of {args.repeat}':>12}  rel. diff")
    fits: dict[str, Any] = {}
    for name in ENGINES:
        mark = "yes" if name == auto.engine else ""
        try:
            fits[name] = nadaraya.smooth(q, k, v, engine=name, **options)
        except NadarayaError as exc:
            reason = _refusal(exc, auto.reasons.get(name))
            print(f"{name:<11}{mark:<6}{'-':>12}  {'-':<10}{reason}")
            continue
        seconds = _best_time(lambda n=name: nadaraya.smooth(q, k, v, engine=n, **options),
                             args.repeat)
        diff = _relative_difference(fits[name], reference, scale)
        print(f"{name:<11}{mark:<6}{seconds * 1e3:>9.3f} ms  {diff:.2g}")
    print("rel. diff = max |fit - reference| / max |reference|; "
          "reference = dense engine in float64")
    print()
    print(f"nadaraya.explain() for the automatic choice, {auto.engine!r}:")
    print(auto)
    if args.out is not None:
        fit = fits.get(auto.engine)
        if fit is None:
            fit = nadaraya.smooth(q, k, v, **options)
        header, columns = ["times", "fit"], [queries, fit]
        if not args.grid:
            header, columns = ["times", "accel", "fit"], [queries, y, fit]
        write_csv(args.outputs["--out"], header, columns)
        print()
        print(f"wrote {len(queries)} rows ({', '.join(header)}) to {args.outputs['--out']}")
    if not args.no_figures:
        from nadaraya.plot import smoothing_demo

        print()
        print(smoothing_demo(args.figures).summary)
    return 0
