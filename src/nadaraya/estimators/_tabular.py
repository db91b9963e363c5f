"""pandas DataFrames in and out of the estimators: feature types from dtypes, levels as codes.

A DataFrame's columns give the features' types (:func:`frame_types`): a
``category`` column is unordered (``'u'``), an ordered categorical is ordered
(``'o'``), a bool column is unordered, a numeric column continuous (``'c'``);
an object or string column is refused (it could be either: the caller says
which with ``astype("category")``). Categorical and bool columns become their
codes (the positions of their levels, in order for ordered ones), and the
levels are kept (:class:`Coding`) so that the queries of ``predict`` are coded
the same way, whatever the order of their own categories.

Missing values in a categorical column are refused by column name; so is a
level at ``predict`` that the column did not have at ``fit`` (a level declared
among the column's categories at ``fit`` but absent from its rows is known: it
is apart from every training row, and so gets its weight from ``lambda``
alone). Numeric columns pass unchanged (scikit-learn's validation refuses their
missing values).

pandas is not imported here: only objects that are DataFrames already reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import NadarayaError

__all__ = ["Coding", "all_numeric", "code_fit", "code_predict", "frame_types", "is_frame"]


def is_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame (without importing pandas)."""
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "dtypes") \
        and hasattr(X, "columns") and getattr(X, "ndim", 0) == 2


def _kind(dtype: Any) -> str:
    """``'category'``, ``'bool'``, ``'number'`` or ``'other'``."""
    if type(dtype).__name__ == "CategoricalDtype":
        return "category"
    kind = getattr(dtype, "kind", "O")
    if kind == "b":
        return "bool"
    if kind in "iuf":
        return "number"
    return "other"


def _refuse_other(name: Any, dtype: Any) -> None:
    raise NadarayaError(
        f"column {name!r} of X has dtype {dtype}, which is neither numeric nor categorical; "
        f"say which it is: X[{name!r}].astype('category') for levels (or "
        "pd.Categorical(..., ordered=True) for ordered ones), or a numeric dtype for a "
        "continuous feature."
    )


def all_numeric(X: Any) -> bool:
    """Whether every column of the DataFrame ``X`` is numeric (not bool, not categorical)."""
    return all(_kind(dtype) == "number" for dtype in X.dtypes)


def frame_types(X: Any) -> str:
    """One type letter per column of the DataFrame ``X``, read from its dtypes."""
    out = []
    for name, dtype in zip(X.columns, X.dtypes, strict=True):
        kind = _kind(dtype)
        if kind == "other":
            _refuse_other(name, dtype)
        out.append("c" if kind == "number" else
                   "o" if kind == "category" and dtype.ordered else "u")
    return "".join(out)


@dataclass
class Coding:
    """The levels of each column at ``fit``: None for a column passed as numbers.

    Attributes
    ----------
    levels : list of (pandas Index or None)
        A column's code is the position of its value in its levels.
    """

    levels: list[Any]

    @property
    def any(self) -> bool:
        """Whether some column was coded."""
        return any(lev is not None for lev in self.levels)


def _check_missing(name: Any, col: Any, when: str) -> None:
    if bool(col.isna().any()):
        raise NadarayaError(
            f"column {name!r} of X has missing values at {when}; categorical features "
            f"cannot be missing. Drop those rows, or make missing a level of its own: "
            f"X[{name!r}].cat.add_categories('missing').fillna('missing')."
        )


def code_fit(X: Any, types: str) -> tuple[Any, Coding]:
    """The DataFrame ``X`` with its categorical and bool columns as codes, and their levels.

    Parameters
    ----------
    X : pandas DataFrame of shape (n_samples, n_features)
    types : str
        One letter per column (the dtypes' or the caller's ``var_types``).

    Returns
    -------
    coded : pandas DataFrame of shape (n_samples, n_features), float64
        Same column names and index.
    coding : Coding
    """
    columns, levels = {}, []
    for j, (name, dtype) in enumerate(zip(X.columns, X.dtypes, strict=True)):
        col = X.iloc[:, j]
        kind = _kind(dtype)
        if kind == "other":
            _refuse_other(name, dtype)
        if kind == "category":
            if types[j] == "c":
                raise NadarayaError(
                    f"var_types[{j}] is 'c' but column {name!r} of X is categorical; a "
                    "level has no distance to another. Give it 'u' or 'o', or pass numbers "
                    f"(X[{name!r}].cat.codes for the ranks of ordered levels)."
                )
            _check_missing(name, col, "fit")
            columns[j] = col.cat.codes.to_numpy().astype(np.float64)
            levels.append(dtype.categories)
        elif kind == "bool" and types[j] != "c":
            columns[j] = col.to_numpy().astype(np.float64)
            import pandas as pd  # loaded already: X is a DataFrame

            levels.append(pd.Index([False, True]))
        else:
            columns[j] = col.to_numpy()
            levels.append(None)
    return _rebuild(X, columns), Coding(levels)


def _rebuild(X: Any, columns: dict[int, np.ndarray]) -> Any:
    """A DataFrame like ``X`` (names, index) holding ``columns`` by position."""
    out = X.iloc[:, :0].copy()
    for j, name in enumerate(X.columns):
        out.insert(j, name, columns[j], allow_duplicates=True)
    return out


def code_predict(X: Any, coding: Coding) -> Any:
    """The DataFrame ``X`` of queries coded with the levels of ``fit``.

    Columns are matched by position (scikit-learn's validation then checks
    their names). A frame of another width passes unchanged, for the
    validation to refuse.
    """
    if X.shape[1] != len(coding.levels) or not coding.any:
        return X
    columns = {}
    for j, name in enumerate(X.columns):
        col = X.iloc[:, j]
        levels = coding.levels[j]
        if levels is None:
            columns[j] = col.to_numpy()
            continue
        _check_missing(name, col, "predict")
        values = col.astype(object) if _kind(col.dtype) == "category" else col
        codes = levels.get_indexer(values)
        unseen = codes < 0
        if unseen.any():
            new = list(dict.fromkeys(values[unseen].tolist()))[:5]
            raise NadarayaError(
                f"column {name!r} of X holds level(s) {new} that it did not have at fit "
                f"(levels: {list(levels)[:10]}); the fit has nothing to say about them. "
                "Drop those rows, or declare the level among the column's categories when "
                "fitting (it then gets its weight from lambda alone)."
            )
        columns[j] = codes.astype(np.float64)
    return _rebuild(X, columns)
