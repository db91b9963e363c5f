"""Nothing but a few numbers (and the search's subsample) comes back to the client."""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor, _bandwidth

from ._data import chunked, relative


def _nbytes(result: Any) -> int:
    if isinstance(result, np.ndarray):
        return result.nbytes
    if isinstance(result, list | tuple):
        return sum(_nbytes(r) for r in result)
    if isinstance(result, dict):
        return sum(_nbytes(r) for r in result.values())
    return 8 if np.isscalar(result) else 0


class Recorder:
    """A synchronous scheduler that records the bytes each computation returns."""

    def __init__(self) -> None:
        self.returned: list[int] = []

    def __call__(self, dsk: Any, keys: Any, **kwargs: Any) -> Any:
        result = dask.get(dsk, keys, **kwargs)
        self.returned.append(_nbytes(result))
        return result

    @property
    def largest(self) -> int:
        return max(self.returned, default=0)


def test_the_recorder_sees_a_gathered_array(rng: np.random.Generator) -> None:
    X = rng.normal(size=(300, 2))
    recorder = Recorder()
    with dask.config.set(scheduler=recorder):
        chunked(X, 70).compute()
    assert recorder.largest >= X.nbytes


@pytest.mark.parametrize("estimator", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_a_search_returns_numbers_only(rng: np.random.Generator, estimator: Any) -> None:
    X = rng.uniform(0, 5, (300, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=300)
    recorder = Recorder()
    with dask.config.set(scheduler=recorder):
        model = estimator(bandwidth="cv").fit(chunked(X, 80), chunked(y, 80))
        fitted = len(recorder.returned)
        out = model.predict(chunked(X[:50], 20))
        assert len(recorder.returned) == fitted  # predicting builds a graph, computes nothing
    assert isinstance(out, da.Array)
    assert recorder.largest <= 64
    reference = estimator(bandwidth=model.bandwidth_).fit(X, y)
    assert relative(out.compute(), reference.predict(X[:50])) <= 1e-12


def test_the_subsample_is_all_a_large_search_gathers(rng: np.random.Generator,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bandwidth, "SUBSAMPLE", 40)  # the search starts on 40 of 400 rows
    X = rng.uniform(0, 5, (400, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=400)
    a = NadarayaWatsonRegressor(bandwidth="cv").fit(X, y)
    assert a.cv_results_["subsample_evaluations"] > 0
    recorder = Recorder()
    with dask.config.set(scheduler=recorder):
        b = NadarayaWatsonRegressor(bandwidth="cv").fit(chunked(X, 90), chunked(y, 90))
    assert recorder.largest <= 40 * 8
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-9)
    assert b.cv_results_["subsample_evaluations"] == a.cv_results_["subsample_evaluations"]
