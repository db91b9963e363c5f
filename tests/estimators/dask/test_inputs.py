"""Dask inputs are checked lazily: errors name the parameter when the graph runs."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import NadarayaWatsonRegressor

from ._data import chunked, relative


def test_nan_in_x_names_x_when_computed(rng: np.random.Generator) -> None:
    X = rng.normal(size=(40, 2))
    X[33, 1] = np.nan
    with pytest.raises(NadarayaError, match="X contains NaN"):
        NadarayaWatsonRegressor(bandwidth=0.5).fit(chunked(X, 10), rng.normal(size=40))


def test_negative_weights_name_sample_weight(rng: np.random.Generator) -> None:
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    w = np.ones(40)
    w[5] = -1.0
    with pytest.raises(NadarayaError, match="sample_weight must be non-negative"):
        NadarayaWatsonRegressor(bandwidth=0.5).fit(chunked(X, 10), y,
                                                   sample_weight=chunked(w, 10))


def test_rows_must_agree_and_columns_be_numbers(rng: np.random.Generator) -> None:
    X, y = rng.normal(size=(40, 2)), rng.normal(size=39)
    with pytest.raises(NadarayaError, match="y has 39 rows but X has 40"):
        NadarayaWatsonRegressor(bandwidth=0.5).fit(chunked(X, 10), y)
    text = dd.from_pandas(pd.DataFrame({"a": ["x"] * 40, "b": X[:, 0]}), npartitions=2)
    with pytest.raises(NadarayaError, match="X must hold numbers"):
        NadarayaWatsonRegressor(bandwidth=0.5).fit(text, rng.normal(size=40))


def test_unknown_chunk_sizes_are_counted_once(rng: np.random.Generator) -> None:
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    keep = da.from_array(np.arange(40) % 3 != 0, chunks=10)
    Xd, yd = chunked(X, 10)[keep], chunked(y, 10)[keep]
    assert np.isnan(Xd.shape[0])
    a = NadarayaWatsonRegressor(bandwidth=0.5).fit(X[np.arange(40) % 3 != 0],
                                                   y[np.arange(40) % 3 != 0])
    b = NadarayaWatsonRegressor(bandwidth=0.5).fit(Xd, yd)
    assert relative(b.predict(X), a.predict(X)) <= 1e-12
