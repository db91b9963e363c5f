"""Dask arrays and DataFrames as estimator inputs, validated lazily.

scikit-learn's ``check_array`` would compute a Dask collection on the client;
these helpers turn one into a float64 Dask array without computing it: the
dtype is checked from the metadata, the shape from the chunk sizes (computed
once when a collection does not know them, which reads the row counts only),
and finiteness (and non-negative sample weights) by a check on every block
that raises :class:`~nadaraya.NadarayaError`, naming the parameter, when the
graph runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._errors import NadarayaError
from ...engine import any_dask, is_dask

__all__ = ["any_dask", "as_matrix", "as_targets", "as_weights", "check_features", "dask_array",
           "is_dask", "labels"]


def dask_array() -> Any:
    """The ``dask.array`` module (Dask is installed: only Dask inputs lead here)."""
    import dask.array as da

    return da


def check_features(est: Any, X: Any, reset: bool) -> None:
    """scikit-learn's checks of ``n_features_in_`` and ``feature_names_in_`` for a Dask ``X``.

    A Dask DataFrame's column names are read from its metadata, nothing is computed.
    """
    from sklearn.utils.validation import validate_data

    if getattr(X, "ndim", 0) == 2 and hasattr(X, "to_dask_array"):
        import pandas as pd

        X = pd.DataFrame(columns=list(X.columns))
    validate_data(est, X, reset=reset, skip_check_array=True)


def _to_array(x: Any, name: str) -> Any:
    """A Dask array with known chunk sizes from a Dask array, DataFrame or Series."""
    if hasattr(x, "to_dask_array"):
        dtypes = list(x.dtypes) if x.ndim == 2 else [x.dtype]
        bad = [str(t) for t in dtypes if not _numeric(t)]
        if bad and name != "y":
            raise NadarayaError(
                f"{name} must hold numbers; its Dask DataFrame has column type(s) "
                f"{', '.join(sorted(set(bad)))}. Select the numeric columns or convert them."
            )
        # the rows of each partition are counted once, so the array knows its chunks
        x = x.to_dask_array(lengths=True)
    elif any(np.isnan(c) for axis in x.chunks for c in axis):
        x = x.compute_chunk_sizes()
    return x


def _numeric(dtype: Any) -> bool:
    try:
        return np.dtype(dtype).kind in "biuf"
    except TypeError:  # pandas extension types (nullable integers and floats)
        return getattr(dtype, "kind", "O") in "biuf"


def _check_block(block: np.ndarray, name: str, non_negative: bool = False) -> np.ndarray:
    """``block`` unchanged, or an error naming ``name`` when it holds NaN, inf (or < 0)."""
    if not np.isfinite(block).all():
        raise NadarayaError(
            f"{name} contains NaN or infinity (in the block of {block.shape[0]} rows being "
            "computed); drop or impute those rows first (e.g. dask DataFrame.dropna())."
        )
    if non_negative and (block < 0).any():
        raise NadarayaError(
            f"{name} must be non-negative; a block holds {float(block.min())!r}. Give "
            "weights >= 0."
        )
    return block


def _float_checked(x: Any, name: str, non_negative: bool = False) -> Any:
    if not _numeric(x.dtype):
        raise NadarayaError(
            f"{name} must hold numbers; got a Dask array of dtype {x.dtype}. Convert it with "
            ".astype(float)."
        )
    x = x.astype(np.float64)
    return x.map_blocks(_check_block, name, non_negative, dtype=np.float64)


def as_matrix(X: Any, name: str = "X") -> Any:
    """``X`` as a lazy float64 Dask array of shape ``(n, d)``, one chunk across the columns.

    Parameters
    ----------
    X : dask array or DataFrame of shape (n, d), or an in-memory array
        In-memory arrays must already be validated (float64, finite).
    name : str
        How errors name it.
    """
    da = dask_array()
    if not is_dask(X):
        X = np.asarray(X, dtype=np.float64)
        return da.from_array(X, chunks=(max(1, X.shape[0]), X.shape[1]))
    X = _to_array(X, name)
    if X.ndim != 2:
        raise NadarayaError(
            f"{name} must be 2-D (n_samples, n_features); got a Dask array of shape "
            f"{X.shape}. Reshape a single feature with X.reshape(-1, 1)."
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise NadarayaError(f"{name} is empty (shape {X.shape}); give at least one row and "
                            "one column.")
    return _float_checked(X.rechunk({1: -1}), name)


def _aligned(x: Any, name: str, rows: tuple[int, ...]) -> Any:
    n = sum(rows)
    if x.shape[0] != n:
        raise NadarayaError(
            f"{name} has {x.shape[0]} rows but X has {n}; give one per sample of X."
        )
    return x.rechunk({0: rows, **({1: -1} if x.ndim == 2 else {})})


def as_targets(y: Any, rows: tuple[int, ...], name: str = "y") -> Any:
    """Numeric targets as a lazy float64 Dask array, chunked like the rows of ``X``.

    Parameters
    ----------
    y : dask array, DataFrame or Series, or array-like, of shape (n,) or (n, p)
    rows : tuple of int
        The row chunks of ``X``.
    """
    da = dask_array()
    if not is_dask(y):
        from sklearn.utils.validation import check_array

        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name=name)
        if y.ndim > 2:
            raise NadarayaError(f"{name} must be 1-D or 2-D; got shape {y.shape}.")
        return _aligned(da.from_array(y), name, rows)
    y = _to_array(y, name)
    if y.ndim not in (1, 2):
        raise NadarayaError(f"{name} must be 1-D or 2-D; got a Dask array of shape {y.shape}.")
    return _float_checked(_aligned(y, name, rows), name)


def labels(y: Any, rows: tuple[int, ...], name: str = "y") -> Any:
    """Class labels as a 1-D Dask array chunked like the rows of ``X`` (any dtype)."""
    da = dask_array()
    if not is_dask(y):
        from sklearn.utils.validation import column_or_1d

        return _aligned(da.from_array(column_or_1d(y, warn=True)), name, rows)
    y = _to_array(y, name)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise NadarayaError(f"{name} must be 1-D class labels; got a Dask array of shape "
                            f"{y.shape}.")
    return _aligned(y, name, rows)


def as_weights(sample_weight: Any, rows: tuple[int, ...]) -> Any:
    """Sample weights as a lazy float64 Dask array chunked like ``X``'s rows (None: None)."""
    if sample_weight is None:
        return None
    da = dask_array()
    name = "sample_weight"
    if not is_dask(sample_weight):
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.ndim == 0:
            w = np.full(sum(rows), float(w))
        if w.ndim != 1:
            raise NadarayaError(f"{name} must be 1-D; got shape {w.shape}.")
        _check_block(w, name, non_negative=True)
        return _aligned(da.from_array(w), name, rows)
    w = _to_array(sample_weight, name)
    if w.ndim != 1:
        raise NadarayaError(f"{name} must be 1-D; got a Dask array of shape {w.shape}.")
    return _float_checked(_aligned(w, name, rows), name, non_negative=True)
