"""Data for the Dask estimator tests: NumPy arrays and their Dask copies."""

from __future__ import annotations

from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd


def chunked(a: np.ndarray, rows: Any) -> Any:
    """``a`` as a Dask array with the given row chunks (one chunk across the columns)."""
    return da.from_array(a, chunks=(rows, *a.shape[1:]))


def frame(X: np.ndarray, partitions: int = 3) -> Any:
    """``X`` as a Dask DataFrame with columns ``x0, x1, ...``."""
    names = [f"x{i}" for i in range(X.shape[1])]
    return dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=partitions)


def series(y: np.ndarray, partitions: int = 3) -> Any:
    """``y`` as a Dask Series."""
    return dd.from_pandas(pd.Series(y, name="y"), npartitions=partitions)


def relative(a: Any, b: Any) -> float:
    """Largest difference of ``a`` and ``b`` relative to the largest ``|b|``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), np.finfo(float).tiny))


def regression(rng: np.random.Generator, n: int = 120, d: int = 2) -> tuple[np.ndarray, ...]:
    """Noisy smooth targets on uniform points: ``X (n, d)``, ``y (n,)``, queries ``(25, d)``."""
    X = rng.uniform(0, 4, (n, d))
    y = np.sin(X.sum(axis=1)) + 0.2 * X[:, 0] + 0.3 * rng.normal(size=n)
    return X, y, rng.uniform(0.2, 3.8, (25, d))
