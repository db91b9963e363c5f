"""Fit a kernel regression to columns of a CSV file and report the chosen bandwidth.

Reads DATA.csv (a header line of column names, then numeric rows; lines
starting with # are comments), fits y on the --x columns by Nadaraya-Watson
(--degree 0) or local polynomial regression (--degree 1, local linear, the
default), with the bandwidth chosen by exact leave-one-out cross-validation
unless --bandwidth says otherwise. Prints the bandwidth, the leave-one-out
score and the effective degrees of freedom; with --out writes predictions
(at the data, or at the points of --predict GRID.csv) with standard errors
and a pointwise band; with --plot draws the fit (one --x column). Output
files are written atomically and never over an input file.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._errors import NadarayaError

__all__ = ["add_arguments", "read_columns", "run"]

_MISSING = {"", "na", "nan", "n/a", "null", "none", "."}
_CRITERIA = ("cv", "gcv", "aicc", "scott", "silverman")


def _bandwidth(text: str) -> str | list[float]:
    if text.lower() in _CRITERIA:
        return text.lower()
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(_CRITERIA)}, a number, or one number per --x column "
            f"separated by commas; got {text!r}"
        ) from None
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"bandwidths must be positive numbers; got {text!r}")
    return values


def _level(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, e.g. 0.95; got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nadaraya fit`` to ``parser``."""
    parser.add_argument("data", type=Path, metavar="DATA.csv", help="the data: a CSV file")
    parser.add_argument("--x", action="append", required=True, metavar="COL", dest="x",
                        help="a feature column (repeat for several)")
    parser.add_argument("--y", required=True, metavar="COL", help="the target column")
    parser.add_argument("--kernel", default="gaussian", metavar="NAME",
                        help="gaussian (default), epanechnikov, tricube, uniform, laplacian "
                             "or cauchy")
    parser.add_argument("--bandwidth", type=_bandwidth, default="cv", metavar="H",
                        help="cv (default: exact leave-one-out), gcv, aicc, scott, silverman, "
                             "a number, or one number per --x column (comma-separated)")
    parser.add_argument("--degree", type=int, default=1, choices=(0, 1, 2),
                        help="0: Nadaraya-Watson; 1: local linear (default); 2: local quadratic")
    parser.add_argument("--predict", type=Path, metavar="GRID.csv",
                        help="predict at the rows of this CSV (it needs the --x columns); "
                             "default: at the data")
    parser.add_argument("--out", type=Path, metavar="CSV",
                        help="write the predictions, standard errors and band to this CSV file")
    parser.add_argument("--plot", type=Path, metavar="FILE",
                        help="draw the fit with its band over the data (.png, .svg or .pdf)")
    parser.add_argument("--level", type=_level, default=0.95,
                        help="level of the pointwise band (default 0.95)")
    parser.add_argument("--drop-missing", action="store_true",
                        help="drop rows with a missing value in a used column instead of "
                             "stopping")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show the bandwidth search as it runs (default: when standard "
                             "error is a terminal)")


# -- reading ------------------------------------------------------------------
def _describe(lines: list[int], samples: list[str] | None = None) -> str:
    shown = lines[:8]
    if samples is None:
        text = ", ".join(map(str, shown))
    else:
        text = ", ".join(f"{line} ({value!r})" for line, value in zip(shown, samples,
                                                                       strict=False))
    more = f" and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
    return f"line{'s' if len(lines) > 1 else ''} {text}{more}"


def read_columns(path: Path, columns: Sequence[str], *, drop_missing: bool = False,
                 role: str = "DATA.csv") -> tuple[dict[str, list[float]], int, list[int]]:
    """Read the named numeric columns of a CSV file.

    Returns
    -------
    table : dict of column name to list of float
    n_dropped : int
        Rows dropped for missing values (``drop_missing=True``).
    line_numbers : list of int
        The file line of each row kept.

    Raises
    ------
    NadarayaError
        For a missing file or column, an empty file, non-numeric values, or
        missing values (unless ``drop_missing``), naming the rows.
    """
    if not path.is_file():
        raise NadarayaError(f"{role} {path} does not exist or is not a file.")
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = [(i, row) for i, row in enumerate(csv.reader(f), start=1)
                if row and not row[0].lstrip().startswith("#")
                and any(cell.strip() for cell in row)]
    if not rows:
        raise NadarayaError(f"{role} {path} is empty: it needs a header line of column names "
                            "and rows of numbers.")
    header = [name.strip() for name in rows[0][1]]
    body = rows[1:]
    if not body:
        raise NadarayaError(f"{role} {path} has a header but no data rows.")
    index = {}
    for name in columns:
        if name not in header:
            raise NadarayaError(
                f"column {name!r} is not in {role} {path}; its columns are: "
                f"{', '.join(header)}."
            )
        index[name] = header.index(name)
    table: dict[str, list[float]] = {name: [] for name in columns}
    missing: dict[str, list[int]] = {name: [] for name in columns}
    bad: dict[str, list[tuple[int, str]]] = {name: [] for name in columns}
    keep_lines, dropped = [], 0
    for line, row in body:
        values, row_missing = {}, False
        for name, j in index.items():
            cell = row[j].strip() if j < len(row) else ""
            if cell.lower() in _MISSING:
                missing[name].append(line)
                row_missing = True
                continue
            try:
                value = float(cell)
            except ValueError:
                bad[name].append((line, cell))
                continue
            if not math.isfinite(value):
                bad[name].append((line, cell))
            values[name] = value
        if row_missing and drop_missing:
            dropped += 1
            continue
        keep_lines.append(line)
        for name, value in values.items():
            table[name].append(value)
    for name in columns:
        if bad[name]:
            lines = [line for line, _ in bad[name]]
            raise NadarayaError(
                f"column {name!r} of {role} {path} has {len(lines)} value(s) that are not finite "
                f"numbers, at {_describe(lines, [v for _, v in bad[name]])}. Fix or remove "
                "those rows."
            )
    for name in columns:
        if missing[name] and not drop_missing:
            raise NadarayaError(
                f"column {name!r} of {role} {path} has {len(missing[name])} missing value(s) "
                f"(empty or NA) at {_describe(missing[name])}. Remove those rows or pass "
                "--drop-missing."
            )
    if not keep_lines:
        raise NadarayaError(f"every row of {role} {path} has a missing value in the columns "
                            f"{', '.join(columns)}; nothing is left to fit.")
    return table, dropped, keep_lines


# -- writing ------------------------------------------------------------------
def _check_outputs(outputs: dict[str, Path | None], inputs: Sequence[Path]) -> None:
    seen: dict[Path, str] = {}
    for option, out in outputs.items():
        if out is None:
            continue
        if out.is_dir():
            raise NadarayaError(f"{option} {out} is a folder; give a file name.")
        for source in inputs:
            if out.resolve() == source.resolve() or (
                    out.exists() and source.exists() and os.path.samefile(out, source)):
                raise NadarayaError(
                    f"{option} {out} is an input file; write the results to another path."
                )
        if out.resolve() in seen:
            raise NadarayaError(f"{option} and {seen[out.resolve()]} name the same file {out}.")
        seen[out.resolve()] = option
        if not out.resolve().parent.is_dir():
            raise NadarayaError(f"the folder of {option} {out} does not exist; create it first.")


def _write_csv(path: Path, header: Sequence[str], columns: Sequence[Any]) -> None:
    """Write columns to ``path`` atomically: a temporary file beside it, then a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for row in zip(*columns, strict=True):
                writer.writerow([repr(float(v)) for v in row])
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# -- progress -------------------------------------------------------------------
class _Progress:
    """One status line on standard error, redrawn after each criterion evaluation."""

    def __init__(self, stream: TextIO, enabled: bool, delay: float = 0.5) -> None:
        self.stream, self.enabled, self.delay = stream, enabled, delay
        self.start = time.perf_counter()
        self.drawn = False

    def __call__(self, step: Any) -> None:
        elapsed = time.perf_counter() - self.start
        if not self.enabled or elapsed < self.delay:
            return
        h = ", ".join(f"{v:.4g}" for v in step.best_bandwidth)
        width = 24
        filled = step.evaluation % (2 * width)
        pos = filled if filled < width else 2 * width - filled
        bar = "." * pos + "#" + "." * (width - pos)
        self.stream.write(f"\r  searching the bandwidth [{bar}] {step.evaluation} evaluations, "
                          f"best h = {h} (score {step.best_score:.6g}), {elapsed:.1f} s ")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


# -- the command ------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya fit``; returns the exit status."""
    import numpy as np

    from ..estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor, search_progress

    x_cols, y_col = list(dict.fromkeys(args.x)), args.y
    if y_col in x_cols:
        raise NadarayaError(f"--y {y_col} is also an --x column; the target cannot be a feature.")
    inputs = [args.data] + ([args.predict] if args.predict else [])
    _check_outputs({"--out": args.out, "--plot": args.plot}, inputs)
    if args.plot is not None:
        if len(x_cols) != 1:
            raise NadarayaError("--plot draws the fit against one feature; give one --x column.")
        if args.plot.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise NadarayaError(f"--plot {args.plot}: use a .png, .svg or .pdf file name.")
    bandwidth = args.bandwidth
    if isinstance(bandwidth, list):
        if len(bandwidth) not in (1, len(x_cols)):
            raise NadarayaError(f"--bandwidth has {len(bandwidth)} values for {len(x_cols)} --x "
                                "columns; give one number, or one per column.")
        bandwidth = bandwidth[0] if len(bandwidth) == 1 else np.array(bandwidth)

    table, dropped, _ = read_columns(args.data, [*x_cols, y_col], drop_missing=args.drop_missing)
    X = np.column_stack([table[c] for c in x_cols])
    y = np.asarray(table[y_col])
    if args.degree == 0:
        model = NadarayaWatsonRegressor(args.kernel, bandwidth)
        name = "Nadaraya-Watson"
    else:
        model = LocalPolynomialRegressor(args.degree, args.kernel, bandwidth)
        name = {1: "local linear", 2: "local quadratic"}[args.degree]
    show = sys.stderr.isatty() if args.progress is None else args.progress
    progress = _Progress(sys.stderr, show, delay=0.5 if args.progress is None else 0.0)
    try:
        with search_progress(progress):
            model.fit(X, y)
    finally:
        progress.close()

    rows = f"{len(y)} rows" + (f" ({dropped} with missing values dropped)" if dropped else "")
    print(f"{name} regression, {args.kernel} kernel: {y_col} ~ {' + '.join(x_cols)} "
          f"on {rows} of {args.data}")
    h = np.atleast_1d(model.bandwidth_)
    how = bandwidth if isinstance(bandwidth, str) else "given"
    print(f"bandwidth ({how}): " + ", ".join(f"{c} {v:.6g}" for c, v in zip(x_cols, h,
                                                                            strict=True)))
    print(f"leave-one-out CV score (mean squared error): {model.cv_score_:.6g}")
    print(f"effective degrees of freedom (trace of the smoother matrix): "
          f"{model.effective_dof_:.4g}")

    if args.out is not None:
        if args.predict is not None:
            grid, _, _ = read_columns(args.predict, x_cols, role="GRID.csv")
            Xq = np.column_stack([grid[c] for c in x_cols])
        else:
            Xq = X
        mean, std = model.predict(Xq, return_std=True)
        lo, hi = model.predict_interval(Xq, level=args.level)
        pct = f"{args.level * 100:g}"
        header = [*x_cols, f"{y_col}_pred", "std_error", f"lower_{pct}", f"upper_{pct}"]
        _write_csv(args.out, header, [*Xq.T, mean, std, lo, hi])
        print(f"wrote {len(mean)} predictions to {args.out}")
    if args.plot is not None:
        from ..plot import plot_fit, save_figure

        ax = plot_fit(model, X, y, level=args.level, label=name)
        ax.set_xlabel(x_cols[0])
        ax.set_ylabel(y_col)
        save_figure(ax.figure, args.plot)
        print(f"wrote the figure to {args.plot}")
    return 0
