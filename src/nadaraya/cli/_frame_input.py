"""Reading a table with pandas for ``nadaraya fit``: categorical columns, Parquet, any delimiter.

Used when the columns are not all numbers (``--categorical``, ``--ordered``,
``--formula``), when the file is Parquet (a ``.parquet`` or ``.pq`` name, or
the ``PAR1`` mark), or when ``--sep`` is given; plain numeric CSV files go
through :mod:`._table`, which names the lines of bad cells.

A text file (CSV, TSV, ``.txt``) is read whole, like :mod:`._table` reads it
(a regular file, a FIFO or a character device), decoded with the encoding
given or found from its bytes (:func:`._table.decode`), its lines starting
with ``#`` left out; the delimiter is ``--sep``, else the one of comma, tab,
semicolon and ``|`` that the header line alone holds, else
:class:`csv.Sniffer`'s guess, else a comma. Cells that are empty, ``NA``,
``NaN``, ``null``, ``None`` or ``.`` are missing.

``--categorical COL`` makes a column unordered levels, ``--ordered COL``
ordered ones (numbers in their order, text sorted); every other column must
be numeric. Rows with a missing value in a used column stop the command,
or with ``--drop-missing`` are dropped and counted by column.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import NadarayaError
from ._table import _shown, decode

__all__ = ["PARQUET", "FitInputs", "FrameTable", "describe", "frame_inputs", "is_parquet",
           "read_frame", "separator"]

#: Suffixes read as Parquet.
PARQUET = (".parquet", ".pq")
_CANDIDATES = (",", "\t", ";", "|")
_NA = ["", "NA", "na", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "none", "."]
_NAMED = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|",
          "space": " "}


@dataclass
class FrameTable:
    """Columns read by :func:`read_frame`.

    Attributes
    ----------
    frame : pandas DataFrame of shape (n_rows, n_columns)
        The requested columns; categorical ones as ``category`` dtype.
    dropped : int
        Rows dropped for missing values.
    missing_by_column : dict of str to int
        Missing cells of each column among all the rows read.
    encoding : str or None
        The text encoding used (None for Parquet).
    """

    frame: Any
    dropped: int = 0
    missing_by_column: dict[str, int] = field(default_factory=dict)
    encoding: str | None = None


def separator(text: str) -> str:
    """``--sep`` as a delimiter: one character, or tab, comma, semicolon, pipe, space by name."""
    sep = _NAMED.get(text.lower(), text)
    if len(sep) != 1 or sep in "\"'\r\n#":
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be one character (or tab, "
                                         "comma, semicolon, pipe, space); e.g. --sep ';' or "
                                         "--sep tab")
    return sep


def is_parquet(path: Path, head: bytes = b"") -> bool:
    """Whether ``path`` is read as Parquet: by its suffix or its first bytes."""
    return path.suffix.lower() in PARQUET or head.startswith(b"PAR1")


def _raw(path: Path, role: str) -> bytes:
    """The bytes of ``path`` (a regular file, a FIFO or a character device), read once."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise NadarayaError(f"{role} {path} is a folder; give the path of a table file.")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)
                or stat.S_ISCHR(st.st_mode)):
            raise NadarayaError(f"{role} {path} is neither a file, a FIFO nor a character "
                                "device; give the path of a table file.")
        with open(path, "rb") as f:
            return f.read()
    except NadarayaError:
        raise
    except FileNotFoundError:
        raise NadarayaError(f"{role} {path} does not exist; give the path of a CSV, TSV or "
                            "Parquet file.") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NadarayaError(f"{role} {path} cannot be read ({reason}); give a file this user "
                            "can read.") from None


def _delimiter(lines: list[str]) -> str:
    header = lines[0] if lines else ""
    held = [d for d in _CANDIDATES if d in header]
    if len(held) == 1:
        return held[0]
    try:
        return csv.Sniffer().sniff("\n".join(lines[:50]), delimiters="".join(_CANDIDATES)
                                   ).delimiter
    except csv.Error:
        return ","


def _text_frame(data: bytes, path: Path, role: str, sep: str | None,
                encoding: str | None) -> tuple[Any, str]:
    import pandas as pd

    text, used = decode(data, encoding, what=f"{role} {path}")
    lines = [line for line in text.splitlines() if line.strip()
             and not line.lstrip().startswith("#")]
    if not lines:
        raise NadarayaError(f"{role} {path} is empty: it needs a header line of column names "
                            "and rows of values.")
    delimiter = sep or _delimiter(lines)
    try:
        frame = pd.read_csv(io.StringIO("\n".join(lines)), sep=delimiter, na_values=_NA,
                            keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as exc:
        raise NadarayaError(f"{role} {path} cannot be read as a table separated by "
                            f"{delimiter!r} ({str(exc).splitlines()[0]}); give --sep.") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame, used


def _parquet_frame(data: bytes, path: Path, role: str) -> Any:
    import pandas as pd

    try:
        return pd.read_parquet(io.BytesIO(data))
    except ImportError as exc:
        raise NadarayaError(f"reading Parquet needs pyarrow (or fastparquet), which is not "
                            f"installed ({exc}); install it with 'pip install pyarrow'.") from None
    except Exception as exc:  # the Parquet readers' own errors: a damaged or foreign file
        raise NadarayaError(f"{role} {path} cannot be read as Parquet ({exc}); give a Parquet "
                            "file, or a CSV or TSV file with another name.") from None


def read_frame(path: Path, columns: Sequence[str], *, role: str = "DATA",
               categorical: Sequence[str] = (), ordered: Sequence[str] = (),
               drop_missing: bool = False, sep: str | None = None,
               encoding: str | None = None) -> FrameTable:
    """Read the named columns of a CSV, TSV or Parquet file with pandas.

    Parameters
    ----------
    path : pathlib.Path
    columns : sequence of str
        The columns to read, by their header names.
    role : str, default "DATA"
        How messages name the file.
    categorical, ordered : sequence of str
        Columns (among ``columns``) read as unordered or ordered levels.
    drop_missing : bool, default False
        Drop rows with a missing value instead of raising.
    sep : str, optional
        The delimiter of a text file (see :func:`separator`); found when None.
    encoding : str, optional
        The text encoding; found from the bytes when None.

    Returns
    -------
    FrameTable

    Raises
    ------
    NadarayaError
        A missing file or column, a text value in a numeric column, missing
        values (without ``drop_missing``), or no row left.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from nadaraya.cli._frame_input import read_frame
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.tsv"
    >>> _ = path.write_text("x\\tg\\n1\\ta\\n2\\tb\\n")
    >>> read_frame(path, ["x", "g"], categorical=["g"]).frame["g"].dtype.name
    'category'
    """
    import pandas as pd

    data = _raw(path, role)
    if is_parquet(path, data[:4]):
        frame, used = _parquet_frame(data, path, role), None
    else:
        frame, used = _text_frame(data, path, role, sep, encoding)
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        names = ", ".join(_shown(str(c)) for c in list(frame.columns)[:20])
        more = f" and {frame.shape[1] - 20} more" if frame.shape[1] > 20 else ""
        how = (f" when read with --sep {sep!r} (give the file's delimiter, or leave --sep "
               "out to detect it)" if sep is not None else "")
        raise NadarayaError(f"column {_shown(absent[0])} is not in {role} {path}{how}; its "
                            f"columns are: {names}{more}.")
    frame = frame.loc[:, list(dict.fromkeys(columns))]
    levels = set(categorical) | set(ordered)
    for name in frame.columns:
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype):  # Parquet keeps pandas' categoricals
            continue
        if name not in levels and not (pd.api.types.is_numeric_dtype(col.dtype)
                                       and not pd.api.types.is_bool_dtype(col.dtype)):
            text = col.dropna()
            bad = text[pd.to_numeric(text, errors="coerce").isna()]
            example = f" (e.g. {_shown(str(bad.iloc[0]))})" if len(bad) else ""
            raise NadarayaError(f"column {name!r} of {role} {path} holds values that are not "
                                f"numbers{example}; pass --categorical {name} (or --ordered "
                                f"{name}) for levels, or fix those values.")
    na = frame.isna()
    by_column = {str(c): int(k) for c, k in na.sum().items() if k}
    rows = na.any(axis=1).to_numpy()
    if rows.any() and not drop_missing:
        raise NadarayaError(f"{int(rows.sum())} row(s) of {role} {path} have missing values "
                            f"(empty or NA) in the columns used ({describe(by_column)}). "
                            "Remove those rows or pass --drop-missing.")
    frame = frame.loc[~rows].reset_index(drop=True)
    if frame.empty:
        raise NadarayaError(f"{role} {path} has no row with values in every column used "
                            f"({', '.join(map(str, columns))}); nothing is left to fit.")
    for name in frame.columns:
        if name in ordered:
            frame[name] = pd.Categorical(frame[name], ordered=True)
        elif name in categorical:
            frame[name] = pd.Categorical(frame[name])
        elif not isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype("float64")
    return FrameTable(frame, int(rows.sum()), by_column, used)


def describe(by_column: dict[str, int]) -> str:
    """``"x (2), g (1)"``: missing cells by column."""
    return ", ".join(f"{name} ({count})" for name, count in by_column.items())


@dataclass
class FitInputs:
    """What ``nadaraya fit`` reads: the features and target, by options or by formula.

    Attributes
    ----------
    x_cols : list of str
        The features' names (a formula's terms).
    y_col : str
        The target's name.
    framed : bool
        Whether the tables are read with pandas (:func:`read_frame`).
    """

    x_cols: list[str]
    y_col: str
    framed: bool
    design: Any = None
    options: Any = None

    def read(self, path: Path, role: str, *, drop_missing: bool = False,
             features_only: bool = False) -> tuple[Any, Any, FrameTable]:
        """Features ``X`` (DataFrame), target ``y`` (Series, None with ``features_only``)."""
        args = self.options
        if self.design is not None:
            columns = (self.design.feature_columns if features_only
                       else self.design.columns)
        else:
            columns = self.x_cols if features_only else [*self.x_cols, self.y_col]
        categorical, ordered = list(args.categorical), list(args.ordered)
        for term in self.design.terms if self.design is not None else ():
            {"u": categorical, "o": ordered}.get(term.kind, []).append(term.column)
        table = read_frame(path, columns, role=role, categorical=categorical, ordered=ordered,
                           drop_missing=drop_missing, sep=args.sep, encoding=args.encoding)
        frame = table.frame
        if self.design is not None:
            if features_only:
                return self.design.features(frame), None, table
            X, y = self.design.frames(frame, missing="raise")
            return X, y, table
        if not features_only and self.y_col in (*args.categorical, *args.ordered):
            raise NadarayaError(f"--y {self.y_col} is the target of a regression and must be "
                                "numeric; leave it out of --categorical and --ordered.")
        return frame[self.x_cols], (None if features_only else frame[self.y_col]), table


def frame_inputs(args: Any) -> FitInputs:
    """The columns ``nadaraya fit`` uses, from ``--formula`` or ``--x`` and ``--y``."""
    levels = [*args.categorical, *args.ordered]
    both = sorted(set(args.categorical) & set(args.ordered))
    if both:
        raise NadarayaError(f"column {both[0]!r} is given to both --categorical and --ordered; "
                            "give it to one.")
    framed = bool(levels or args.formula or args.sep) or args.data.suffix.lower() in PARQUET
    if args.formula is not None:
        if args.y is not None:
            raise NadarayaError("--formula names the target and the features; leave out --y, "
                                "or leave out --formula.")
        from ..estimators import parse_formula

        design = parse_formula(args.formula)
        return FitInputs(design.feature_names, design.target.name, True, design, args)
    if args.y is None:
        raise NadarayaError("--x needs --y COL, the target column; or give --formula "
                            "'y ~ x1 + C(x2)' instead of both.")
    x_cols = list(dict.fromkeys(args.x))
    unused = [c for c in levels if c not in x_cols and c != args.y]
    if unused:
        raise NadarayaError(f"--categorical/--ordered column {unused[0]!r} is not an --x "
                            f"column ({', '.join(x_cols)}); add --x {unused[0]}, or leave it "
                            "out.")
    return FitInputs(x_cols, args.y, framed, None, args)
