"""Any row chunking of the training data and the queries gives the in-memory fit."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

from ._data import chunked, relative


@st.composite
def _chunks(draw: Any, n: int) -> tuple[int, ...]:
    """Row chunk sizes summing to ``n``: cuts anywhere, one row per chunk included."""
    cuts = draw(st.sets(st.integers(1, n - 1), max_size=n - 1))
    edges = [0, *sorted(cuts), n]
    return tuple(b - a for a, b in itertools.pairwise(edges))


_N = 16
_X = np.random.default_rng(7).uniform(0, 3, (_N, 2))
_Y = np.sin(_X.sum(axis=1)) + np.random.default_rng(8).normal(scale=0.2, size=_N)
_Q = np.random.default_rng(9).uniform(0, 3, (9, 2))
_REFERENCE = {
    "nw": NadarayaWatsonRegressor(bandwidth=0.6).fit(_X, _Y),
    "ll": LocalPolynomialRegressor(bandwidth=0.9).fit(_X, _Y),
}


@pytest.mark.parametrize("name", ["nw", "ll"])
@settings(max_examples=8)  # each example is a fit: a few seconds in all
@given(rows=_chunks(_N), queries=_chunks(9))
def test_any_chunking_fits_as_numpy(name: str, rows: tuple[int, ...],
                                    queries: tuple[int, ...]) -> None:
    a = _REFERENCE[name]
    b = type(a)(**a.get_params()).fit(chunked(_X, rows), chunked(_Y, rows))
    assert relative(b.cv_score_, a.cv_score_) <= 1e-12
    assert relative(b.smoother_diagonal().compute(), a.smoother_diagonal()) <= 1e-12
    assert relative(b.predict(chunked(_Q, queries)).compute(), a.predict(_Q)) <= 1e-12


@pytest.mark.parametrize("rows", [pytest.param(1, marks=pytest.mark.slow), 5, _N])
def test_searches_on_extreme_chunkings(rows: int) -> None:
    a = LocalPolynomialRegressor(bandwidth="cv").fit(_X[:, :1], _Y)
    b = LocalPolynomialRegressor(bandwidth="cv").fit(chunked(_X[:, :1], rows), chunked(_Y, rows))
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-9)
    assert relative(b.cv_score_, a.cv_score_) <= 1e-9
