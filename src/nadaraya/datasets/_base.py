"""Reading the small CSV data sets shipped in ``nadaraya/datasets/data``.

Each file starts with ``#`` comment lines (what the data is, its source and
licence), then one header line of column names, then numeric rows.
"""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import NadarayaError

__all__ = ["Bunch", "data_path", "load_csv", "load_dataset"]


class Bunch(dict):
    """A dictionary whose keys are also attributes (``b.data`` is ``b["data"]``)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __dir__(self) -> list[str]:
        return sorted(self.keys())


def data_path(name: str) -> Path:
    """Path of the shipped file ``data/<name>.csv``.

    Parameters
    ----------
    name : str
        Data set name, e.g. ``"mcycle"``.

    Returns
    -------
    pathlib.Path
    """
    path = Path(str(resources.files(__package__).joinpath("data", f"{name}.csv")))
    if not path.is_file():
        shipped = sorted(p.stem for p in path.parent.glob("*.csv"))
        raise NadarayaError(
            f"data set {name!r} is not shipped with nadaraya; choose one of {shipped}."
        )
    return path


def load_csv(name: str) -> tuple[list[str], np.ndarray, str, Path]:
    """Read a shipped CSV data set.

    Parameters
    ----------
    name : str
        Data set name, e.g. ``"mcycle"``.

    Returns
    -------
    columns : list of str
        Column names, from the header line.
    table : ndarray of shape (n_rows, n_columns), float64
    description : str
        The file's comment header, without the ``#`` marks.
    path : pathlib.Path
        Where the file lies.
    """
    path = data_path(name)
    comments, rows = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            comments.append(line[2:] if line.startswith("# ") else line[1:])
        elif line.strip():
            rows.append(line)
    columns = [c.strip() for c in rows[0].split(",")]
    table = np.loadtxt(io.StringIO("\n".join(rows[1:])), delimiter=",", dtype=np.float64,
                       ndmin=2)
    return columns, table, "\n".join(comments), path


def load_dataset(name: str, target: str, *, return_X_y: bool = False,
                 as_frame: bool = False) -> Any:
    """Load a shipped data set as features and one target column.

    Parameters
    ----------
    name : str
        Data set name, e.g. ``"mcycle"``.
    target : str
        The column that is the target; every other column is a feature.
    return_X_y : bool, default False
        Return ``(data, target)`` instead of a :class:`Bunch`.
    as_frame : bool, default False
        Give ``data`` as a pandas DataFrame and ``target`` as a Series
        (needs pandas).

    Returns
    -------
    Bunch or tuple
        See the public loaders, e.g. :func:`nadaraya.datasets.load_mcycle`.
    """
    columns, table, description, path = load_csv(name)
    if target not in columns:
        raise NadarayaError(f"target {target!r} is not a column of {name!r}; columns: {columns}.")
    t = columns.index(target)
    features = [c for c in columns if c != target]
    X = np.ascontiguousarray(np.delete(table, t, axis=1))
    y = np.ascontiguousarray(table[:, t])
    frame = None
    if as_frame:
        try:
            import pandas as pd
        except ImportError:
            raise NadarayaError(
                "as_frame=True needs pandas, which is not installed; install it with "
                "'pip install pandas' or pass as_frame=False."
            ) from None
        frame = pd.DataFrame(table, columns=columns)
        X, y = frame[features], frame[target]
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, frame=frame, feature_names=features, target_names=[target],
                 DESCR=description, filename=str(path))
