"""Fit a kernel regression to columns of a table and report the chosen bandwidth.

Reads DATA.csv (a header line of column names, then numeric rows; lines
starting with # are comments), fits y on the --x columns by Nadaraya-Watson
(--degree 0) or local polynomial regression (--degree 1, local linear, the
default), with the bandwidth chosen by exact leave-one-out cross-validation
unless --bandwidth says otherwise. Prints the bandwidth, the leave-one-out
score and the effective degrees of freedom; with --out writes predictions
(at the data, or at the points of --predict GRID.csv) with standard errors
and a pointwise band; with --plot draws the fit (one --x column). Output
files are written atomically and never over an input file.

Mixed data: --categorical COL makes a column unordered levels and --ordered
COL ordered ones (numbers in their order, text sorted), each with its own
smoothing parameter lambda; --formula 'y ~ x1 + C(g) + O(k)' names the
target and features instead of --x and --y (C() unordered, O() ordered,
expressions such as np.log(x) continuous). Such tables, Parquet files
(.parquet, .pq) and files with --sep are read with pandas, the delimiter
found from the header line when not given. Rows dropped for missing values
(--drop-missing) are counted by column on standard error.

With --scheduler ADDRESS the work runs on that Dask cluster: DATA (a CSV
file, or Parquet: a .parquet file or a folder of them) is read with
dask.dataframe and stays on the cluster, the bandwidth search runs its
criterion evaluations there, and --out streams the predictions (without
standard errors or band) block by block into the file. A CSV file larger
than the working-memory budget (NADARAYA_WORKING_MEMORY) is read the same
way, on this machine.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, TextIO

from .._errors import NadarayaError
from ._frame_input import describe, frame_inputs, separator
from ._scheduler import scheduler
from ._table import read_columns

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["FIGURES", "add_arguments", "files", "read_columns", "run"]

#: Outputs that are figures (their format is checked before the work starts).
FIGURES = ("--plot",)

_CRITERIA = ("cv", "gcv", "aicc", "dpi", "scott", "silverman")


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
    parser.add_argument("data", type=Path, metavar="DATA",
                        help="the data: a CSV, TSV or Parquet file")
    columns = parser.add_mutually_exclusive_group(required=True)
    columns.add_argument("--x", action="append", metavar="COL", dest="x",
                         help="a feature column (repeat for several)")
    columns.add_argument("--formula", metavar="FORMULA",
                         help="target and features in one formula, instead of --x and --y: "
                              "'y ~ x1 + C(x2) + O(x3)' (C: unordered, O: ordered levels)")
    parser.add_argument("--y", metavar="COL", help="the target column (with --x)")
    parser.add_argument("--categorical", action="append", default=[], metavar="COL",
                        help="a column of unordered levels (repeat for several)")
    parser.add_argument("--ordered", action="append", default=[], metavar="COL",
                        help="a column of ordered levels (repeat for several)")
    parser.add_argument("--sep", type=separator, metavar="CHAR",
                        help="the delimiter of a text table (one character, or tab, comma, "
                             "semicolon, pipe, space; default: found from the header line)")
    parser.add_argument("--kernel", default="gaussian", metavar="NAME",
                        help="gaussian (default), epanechnikov, tricube, uniform, laplacian "
                             "or cauchy")
    parser.add_argument("--bandwidth", type=_bandwidth, default="cv", metavar="H",
                        help="cv (default: exact leave-one-out), gcv, aicc, dpi (the direct "
                             "plug-in of KernSmooth's dpill: one --x, local linear), scott, "
                             "silverman, a number, or one number per --x column "
                             "(comma-separated)")
    parser.add_argument("--degree", type=int, default=1, choices=(0, 1, 2),
                        help="0: Nadaraya-Watson; 1: local linear (default); 2: local quadratic")
    parser.add_argument("--predict", type=Path, metavar="GRID.csv",
                        help="predict at the rows of this CSV (it needs the --x columns); "
                             "default: at the data")
    parser.add_argument("--out", type=Path, metavar="CSV",
                        help="write the predictions, their standard errors (heteroscedasticity-"
                             "consistent) and the confidence band for the mean to this CSV "
                             "file ('-': standard output)")
    parser.add_argument("--plot", type=Path, metavar="FILE",
                        help="draw the fit with its band over the data (.png, .svg or .pdf; "
                             "'-': PNG on standard output)")
    parser.add_argument("--level", type=_level, default=0.95,
                        help="level of the pointwise band (default 0.95)")
    parser.add_argument("--encoding", metavar="NAME",
                        help="text encoding of the CSV files (default: found from the bytes: "
                             "a byte-order mark, UTF-8, UTF-16, else cp1252)")
    parser.add_argument("--drop-missing", action="store_true",
                        help="drop rows with a missing value in a used column instead of "
                             "stopping")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show the bandwidth search as it runs (default: when standard "
                             "error is a terminal)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on the Dask cluster whose scheduler is at ADDRESS (e.g. "
                             "tcp://10.0.0.5:8786): the data are read with dask.dataframe (CSV "
                             "or Parquet) and stay on the cluster")


# -- files ------------------------------------------------------------------------
def files(args: argparse.Namespace) -> tuple[list[Path], dict[str, Path | None]]:
    """The inputs and outputs of ``nadaraya fit``."""
    return [args.data, args.predict], {"--out": args.out, "--plot": args.plot}


def _cell(value: Any) -> str:
    """A number as its shortest exact text; a level as its label."""
    if isinstance(value, str) or not hasattr(value, "__float__"):
        return str(value)
    return repr(float(value))


def _write_csv(target: Output, header: Sequence[str], columns: Sequence[Any]) -> None:
    """Write columns as CSV, safely: see :mod:`nadaraya._files`."""
    from .._files import output

    with output(target, option="--out").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in zip(*columns, strict=True):
            writer.writerow([_cell(v) for v in row])


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

    inputs = frame_inputs(args)
    x_cols, y_col = inputs.x_cols, inputs.y_col
    if y_col in x_cols:
        raise NadarayaError(f"--y {y_col} is also an --x column; the target cannot be a feature.")
    if args.plot is not None:
        if len(x_cols) != 1:
            raise NadarayaError("--plot draws the fit against one feature; give one --x column.")
        plot = args.outputs["--plot"]
        # a stream ('-', a FIFO, /dev/null) without a suffix gets PNG
        if (plot.suffix or plot.kind == "file") and plot.suffix not in (".png", ".svg", ".pdf"):
            raise NadarayaError(f"--plot {args.plot}: use a .png, .svg or .pdf file name.")
    bandwidth = args.bandwidth
    if isinstance(bandwidth, list):
        if len(bandwidth) not in (1, len(x_cols)):
            raise NadarayaError(f"--bandwidth has {len(bandwidth)} values for {len(x_cols)} --x "
                                "columns; give one number, or one per column.")
        bandwidth = bandwidth[0] if len(bandwidth) == 1 else np.array(bandwidth)

    if args.scheduler is not None or _too_large(args.data):
        if args.categorical or args.ordered or args.formula or args.sep:
            raise NadarayaError("--categorical, --ordered, --formula and --sep are not "
                                "available with --scheduler or data larger than the "
                                "working-memory budget; give numeric columns.")
        if args.plot is not None:
            raise NadarayaError("--plot draws every data point; it is not available with "
                                "--scheduler or data larger than the working-memory budget.")
        with scheduler(args.scheduler):
            return _run_dask(args, x_cols, y_col, bandwidth)
    if inputs.framed:
        X, y, data = inputs.read(args.data, "DATA", drop_missing=args.drop_missing)
    else:
        data = read_columns(args.data, [*x_cols, y_col], drop_missing=args.drop_missing,
                            encoding=args.encoding)
        X = np.column_stack([data.columns[c] for c in x_cols])
        y = np.asarray(data.columns[y_col])
    if data.dropped:
        print(f"dropped {data.dropped} row(s) with missing values in columns "
              f"{describe(data.missing_by_column)}", file=sys.stderr)
    model, name = _model(args, bandwidth)
    _fit(model, args, X, y)
    _report(model, args, name, x_cols, y_col, bandwidth, len(y), data.dropped)
    if data.encoding not in ("utf-8", None):
        print(f"read {args.data} as {data.encoding} (--encoding sets it)")

    if args.out is not None:
        if args.predict is not None and inputs.framed:
            Xq = inputs.read(args.predict, "GRID", features_only=True)[0]
        elif args.predict is not None:
            grid = read_columns(args.predict, x_cols, role="GRID.csv", encoding=args.encoding)
            Xq = np.column_stack([grid.columns[c] for c in x_cols])
        else:
            Xq = X
        mean = model.predict(Xq)
        lo, hi = model.predict_interval(Xq, level=args.level)
        # the standard error behind the band (heteroscedasticity-consistent): a normal
        # interval is the fit plus and minus z times it
        std = (hi - lo) / (2.0 * NormalDist().inv_cdf(0.5 + args.level / 2.0))
        pct = f"{args.level * 100:g}"
        header = [*x_cols, f"{y_col}_pred", "std_error", f"lower_{pct}", f"upper_{pct}"]
        features = [Xq[c] for c in Xq.columns] if inputs.framed else list(Xq.T)
        _write_csv(args.outputs["--out"], header, [*features, mean, std, lo, hi])
        print(f"wrote {len(mean)} predictions to {args.outputs['--out']}")
    if args.plot is not None:
        from ..plot import plot_fit, save_figure

        ax = plot_fit(model, X, y, level=args.level, label=name)
        ax.set_xlabel(x_cols[0])
        ax.set_ylabel(y_col)
        save_figure(ax.figure, args.outputs["--plot"])
        print(f"wrote the figure to {args.outputs['--plot']}")
    return 0


def _model(args: argparse.Namespace, bandwidth: Any) -> tuple[Any, str]:
    """The estimator the options ask for, and its name."""
    from ..estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

    if args.degree == 0:
        return NadarayaWatsonRegressor(args.kernel, bandwidth), "Nadaraya-Watson"
    return (LocalPolynomialRegressor(args.degree, args.kernel, bandwidth),
            {1: "local linear", 2: "local quadratic"}[args.degree])


def _fit(model: Any, args: argparse.Namespace, X: Any, y: Any) -> None:
    """Fit, drawing the search's progress on standard error when asked."""
    from ..estimators import search_progress

    show = sys.stderr.isatty() if args.progress is None else args.progress
    progress = _Progress(sys.stderr, show, delay=0.5 if args.progress is None else 0.0)
    try:
        with search_progress(progress):
            model.fit(X, y)
    finally:
        progress.close()


def _report(model: Any, args: argparse.Namespace, name: str, x_cols: list[str], y_col: str,
            bandwidth: Any, n: int, dropped: int) -> None:
    """Print what was fitted: the model, the bandwidth, the CV score, the degrees of freedom."""
    import numpy as np

    rows = f"{n} rows" + (f" ({dropped} with missing values dropped)" if dropped else "")
    print(f"{name} regression, {args.kernel} kernel: {y_col} ~ {' + '.join(x_cols)} "
          f"on {rows} of {args.data}")
    h = np.broadcast_to(np.atleast_1d(model.bandwidth_), (len(x_cols),))
    how = bandwidth if isinstance(bandwidth, str) else "given"
    types = getattr(model, "_types", None) or "c" * len(x_cols)
    print(f"bandwidth ({how}): " + ", ".join(
        f"{c} {'' if t == 'c' else 'lambda '}{v:.6g}"
        for c, v, t in zip(x_cols, h, types, strict=True)))
    irrelevant = getattr(model, "irrelevant_", ())
    if len(irrelevant):
        print(f"smoothed out (irrelevant to the fit): {', '.join(map(str, irrelevant))}")
    print(f"leave-one-out CV score (mean squared error): {model.cv_score_:.6g}")
    print(f"effective degrees of freedom (trace of the smoother matrix): "
          f"{model.effective_dof_:.4g}")


# -- on a Dask cluster -------------------------------------------------------------
def _too_large(path: Path) -> bool:
    """Whether ``path`` is a regular file larger than the working-memory budget."""
    from .._config import get_config

    try:
        st = path.stat()
    except (OSError, ValueError):  # read_columns reports what is wrong with the name
        return False
    import stat

    return stat.S_ISREG(st.st_mode) and st.st_size > get_config().working_memory * 2**20


def _frame(path: Path, columns: list[str], role: str, encoding: str | None) -> Any:
    """The named columns of a CSV or Parquet file as a Dask DataFrame of float64."""
    import dask.dataframe as dd

    from ._table import _delimiter

    if path.is_dir() or path.suffix.lower() in (".parquet", ".pq"):
        frame = dd.read_parquet(str(path))
    else:
        with path.open(encoding=encoding or "utf-8", errors="replace") as f:
            head = f.read(1 << 16)
        frame = dd.read_csv(str(path), sep=_delimiter(head), comment="#",
                            encoding=encoding or "utf-8", na_values=["."],
                            skipinitialspace=True, dtype=str)
        frame = frame.rename(columns={c: c.strip() for c in frame.columns})
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise NadarayaError(f"{role} {path} has no column {missing[0]!r}; its columns are "
                            f"{', '.join(map(str, frame.columns))}.")
    return frame[columns].astype("float64")


def _run_dask(args: argparse.Namespace, x_cols: list[str], y_col: str, bandwidth: Any) -> int:
    """``nadaraya fit`` with the data read and kept by Dask."""
    import dask

    frame = _frame(args.data, [*x_cols, y_col], "DATA", args.encoding)
    total = None
    if args.drop_missing:
        total = frame.shape[0]
        frame = frame.dropna()
    model, name = _model(args, bandwidth)
    _fit(model, args, frame[x_cols], frame[y_col])
    n = model.X_fit_.shape[0]
    dropped = int(dask.compute(total)[0]) - n if total is not None else 0
    _report(model, args, name, x_cols, y_col, bandwidth, n, dropped)
    if args.out is not None:
        grid = (frame if args.predict is None
                else _frame(args.predict, x_cols, "GRID", args.encoding))[x_cols]
        mean = model.predict(grid)
        Xq = model.X_fit_ if args.predict is None else grid.to_dask_array(lengths=True)
        Xq = Xq.rechunk({0: mean.chunks[0]})
        _write_blocks(args.outputs["--out"], [*x_cols, f"{y_col}_pred"], Xq, mean)
        print(f"wrote {mean.shape[0]} predictions to {args.outputs['--out']} (standard errors "
              "and band are not computed on Dask data)")
    return 0


def _write_blocks(target: Output, header: Sequence[str], Xq: Any, mean: Any) -> None:
    """Write the queries and their predictions as CSV, one block of rows in memory at a time."""
    import dask

    from .._files import output

    with output(target, option="--out").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i in range(mean.numblocks[0]):
            xb, mb = dask.compute(Xq.blocks[i], mean.blocks[i])
            for row, m in zip(xb, mb, strict=True):
                writer.writerow([repr(float(v)) for v in (*row, m)])
