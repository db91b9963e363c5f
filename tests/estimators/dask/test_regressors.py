"""Regressors fitted on Dask data equal the in-memory fit, and predict lazily on Dask queries."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor, _design

from ._data import chunked, frame, regression, relative, series

ESTIMATORS = {
    "nadaraya-watson": NadarayaWatsonRegressor,
    "local-linear": LocalPolynomialRegressor,
}


def _inputs(kind: str, X: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    if kind == "arrays":
        return chunked(X, 37), chunked(y, 37)
    if kind == "frames":
        return frame(X), series(y)
    if kind == "dask-X":
        return chunked(X, 50), y
    return X, chunked(y, 50)  # dask-y


def _assert_same_fit(a: Any, b: Any) -> None:
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-9)
    for name in ("cv_score_", "effective_dof_", "residual_variance_"):
        assert relative(getattr(b, name), getattr(a, name)) <= 1e-9, name
    assert b.n_features_in_ == a.n_features_in_


def _at_same_bandwidth(a: Any, b: Any, X: np.ndarray, y: np.ndarray, **fit: Any) -> Any:
    """The in-memory fit at the Dask fit's bandwidth (a search ends within 1e-9 of it)."""
    if not isinstance(a.bandwidth, str) or a.cv_results_ is None:
        return a
    return a.set_params(bandwidth=b.bandwidth_).fit(X, y, **fit)


@pytest.mark.parametrize("estimator", list(ESTIMATORS))
@pytest.mark.parametrize(("bandwidth", "d"), [(0.7, 2), ("scott", 2), ("cv", 1)])
def test_dask_arrays_fit_as_numpy(rng: np.random.Generator, estimator: str,
                                  bandwidth: Any, d: int) -> None:
    X, y, Q = regression(rng, n=100 if d == 2 else 60, d=d)
    a = ESTIMATORS[estimator](bandwidth=bandwidth).fit(X, y)
    b = ESTIMATORS[estimator](bandwidth=bandwidth).fit(*_inputs("arrays", X, y))
    _assert_same_fit(a, b)
    a = _at_same_bandwidth(a, b, X, y)
    lazy = b.predict(chunked(Q, 7))
    assert isinstance(lazy, da.Array)
    assert relative(lazy.compute(), a.predict(Q)) <= 1e-12
    eager = b.predict(Q)
    assert isinstance(eager, np.ndarray)
    assert relative(eager, a.predict(Q)) <= 1e-12
    assert relative(b.smoother_diagonal().compute(), a.smoother_diagonal()) <= 1e-12


@pytest.mark.parametrize("kind", ["frames", "dask-X", "dask-y"])
@pytest.mark.parametrize("criterion", ["gcv", "aicc"])
def test_every_mix_of_inputs_fits_as_numpy(rng: np.random.Generator, kind: str,
                                           criterion: str) -> None:
    X, y, Q = regression(rng, n=50, d=1)
    a = LocalPolynomialRegressor(bandwidth=criterion).fit(X, y)
    b = LocalPolynomialRegressor(bandwidth=criterion).fit(*_inputs(kind, X, y))
    _assert_same_fit(a, b)
    a = _at_same_bandwidth(a, b, X, y)
    queries = frame(Q) if kind == "frames" else Q
    assert relative(np.asarray(b.predict(queries)), a.predict(Q)) <= 1e-12


def test_dataframes_carry_feature_names(rng: np.random.Generator) -> None:
    X, y, Q = regression(rng, n=60)
    model = NadarayaWatsonRegressor(bandwidth=0.5).fit(frame(X), series(y))
    assert list(model.feature_names_in_) == ["x0", "x1"]
    out = model.predict(frame(Q, 2))
    assert isinstance(out, da.Array)
    renamed = frame(Q, 2).rename(columns={"x0": "a", "x1": "b"})
    with pytest.raises(ValueError, match="feature names"):
        model.predict(renamed)


def test_multi_output_and_sample_weights_with_zeros(rng: np.random.Generator) -> None:
    X, y, Q = regression(rng, n=60, d=1)
    Y = np.c_[y, np.cos(X[:, 0])]
    w = rng.integers(0, 4, 60).astype(float)
    a = LocalPolynomialRegressor(bandwidth="cv").fit(X, Y, sample_weight=w)
    b = LocalPolynomialRegressor(bandwidth="cv").fit(chunked(X, 23), chunked(Y, 23),
                                                      sample_weight=chunked(w, 23))
    _assert_same_fit(a, b)
    a = _at_same_bandwidth(a, b, X, Y, sample_weight=w)
    assert b.X_fit_.shape[0] == int((w > 0).sum())
    assert relative(b.predict(chunked(Q, 10)).compute(), a.predict(Q)) <= 1e-12


def test_score_is_lazy_and_equal(rng: np.random.Generator) -> None:
    X, y, _ = regression(rng, n=80)
    a = NadarayaWatsonRegressor(bandwidth=0.6).fit(X, y)
    b = NadarayaWatsonRegressor(bandwidth=0.6).fit(chunked(X, 30), chunked(y, 30))
    score = b.score(chunked(X, 25), chunked(y, 25))
    assert isinstance(score, da.Array)
    assert relative(score.compute(), a.score(X, y)) <= 1e-12


def test_tolerance_stays_within_its_bound(rng: np.random.Generator) -> None:
    X, y, Q = regression(rng, n=400, d=1)
    tol = 1e-6
    exact = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y).predict(Q)
    model = NadarayaWatsonRegressor(bandwidth=0.3, tolerance=tol).fit(chunked(X, 150),
                                                                        chunked(y, 150))
    approx = model.predict(chunked(Q, 10)).compute()
    # each mean ends within tolerance times the largest value of its column (in the frame
    # of a power of two above max |y|, so within 2 tol max |y|)
    assert np.max(np.abs(approx - exact)) <= 2 * tol * np.max(np.abs(y))


def test_rows_solved_from_kernel_weights_match(rng: np.random.Generator,
                                               monkeypatch: pytest.MonkeyPatch,
                                               direct_rows: list[int]) -> None:
    monkeypatch.setattr(_design, "_CONDITION", 0.0)  # every row goes to the direct solve
    X, y, Q = regression(rng, n=50)
    a = LocalPolynomialRegressor(bandwidth=0.8).fit(X, y)
    direct_rows.clear()
    b = LocalPolynomialRegressor(bandwidth=0.8).fit(chunked(X, 13), chunked(y, 13))
    assert sum(direct_rows) >= 2 * 50  # leave-one-out and in-sample rows
    _assert_same_fit(a, b)
    assert relative(b.predict(chunked(Q, 6)).compute(), a.predict(Q)) <= 1e-12


def test_direct_solves_beyond_the_budget_are_refused(rng: np.random.Generator,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import nadaraya

    monkeypatch.setattr(_design, "_CONDITION", 0.0)
    X, y, _ = regression(rng, n=50)
    with nadaraya.config_context(working_memory=1e-4), \
            pytest.raises(NadarayaError, match="working_memory"):
        LocalPolynomialRegressor(bandwidth=0.8).fit(chunked(X, 13), chunked(y, 13))


def test_methods_without_dask_support_say_so(rng: np.random.Generator) -> None:
    X, y, Q = regression(rng, n=40)
    model = LocalPolynomialRegressor(bandwidth=0.8).fit(chunked(X, 13), chunked(y, 13))
    for call in (lambda: model.predict(Q, return_std=True),
                 lambda: model.predict_interval(Q), lambda: model.bootstrap(Q),
                 lambda: model.smoother_matrix()):
        with pytest.raises(NadarayaError, match="not available for Dask"):
            call()
    with pytest.raises(NadarayaError, match="mask="):
        from nadaraya.masks import KNearest

        LocalPolynomialRegressor(bandwidth=0.8, mask=KNearest(5)).fit(chunked(X, 13), y)
