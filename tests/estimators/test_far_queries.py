"""Local-linear fits far from the global centre: rows solved directly from their kernel weights.

The oracle is the formula itself: at each query, weighted least squares on
``[1, X - x0]`` with the kernel weights of :func:`nadaraya.weights` (float64),
solved by ``numpy.linalg.lstsq``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya.estimators import LocalPolynomialRegressor


def _far_cluster(rng: np.random.Generator, d: int = 6) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """A wide bulk near the origin and a tight cluster far from it, with queries by the cluster.

    With the bandwidth 0.01 the cluster lies hundreds of bandwidths from the
    global centre while its own spread is 1e-5: moments about the centre
    cancel to about 1e-4 there.
    """
    bulk = rng.uniform(0, 1, (40, d))
    cluster = 5.0 + 1e-5 * rng.normal(size=(25, d))
    X = np.vstack([bulk, cluster])
    y = X.sum(axis=1) ** 2 / d + rng.normal(size=X.shape[0])
    queries = 5.0 + 3e-5 * rng.normal(size=(6, d))
    return X, y, queries


def _oracle(X: np.ndarray, y: np.ndarray, queries: np.ndarray, h: float,
            w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Local-linear fits and smoother rows by weighted least squares, query by query."""
    W = nadaraya.weights(queries, X, "gaussian", bandwidth=h)
    if w is not None:
        W = W * w[None, :]
    fits, rows = [], []
    for q, wq in zip(queries, W, strict=True):
        A = np.sqrt(wq)[:, None] * np.hstack([np.ones((X.shape[0], 1)), X - q])
        beta = np.linalg.lstsq(A, np.sqrt(wq) * y, rcond=None)[0]
        fits.append(beta[0])
        rows.append(np.linalg.pinv(A)[0] * np.sqrt(wq))
    return np.array(fits), np.array(rows)


def test_far_queries_match_weighted_least_squares() -> None:
    rng = np.random.default_rng(0)
    X, y, queries = _far_cluster(rng)
    model = LocalPolynomialRegressor(bandwidth=0.01).fit(X, y)
    expected, rows = _oracle(X, y, queries, 0.01)
    pred, std = model.predict(queries, return_std=True)
    np.testing.assert_allclose(pred, expected, rtol=1e-8)
    np.testing.assert_allclose(model.smoother_matrix(queries), rows, rtol=1e-6, atol=1e-10)
    oracle_std = np.sqrt(model.residual_variance_ * (rows**2).sum(axis=1))
    np.testing.assert_allclose(std, oracle_std, rtol=1e-6)


def test_far_training_points_leave_one_out_matches_formula() -> None:
    rng = np.random.default_rng(1)
    X, y, _ = _far_cluster(rng)
    model = LocalPolynomialRegressor(bandwidth=0.01).fit(X, y)
    cluster = np.arange(40, X.shape[0])
    loo = []
    for i in cluster:
        keep = np.arange(X.shape[0]) != i
        loo.append(_oracle(X[keep], y[keep], X[i:i + 1], 0.01)[0][0])
    fitted, rows = _oracle(X, y, X[cluster], 0.01)
    # the estimator keeps its leave-one-out and in-sample fits in the targets' frame
    np.testing.assert_allclose(model._out(model._loo_fit.loo[cluster, 0]), loo, rtol=1e-8)
    np.testing.assert_allclose(model._out(model._loo_fit.fitted[cluster, 0]), fitted,
                               rtol=1e-8)
    np.testing.assert_allclose(model.smoother_diagonal()[cluster],
                               rows[np.arange(cluster.size), cluster], rtol=1e-6)


def test_weighted_rows_equal_repeated_rows_far_from_the_centre() -> None:
    rng = np.random.default_rng(2)
    X, y, queries = _far_cluster(rng)
    sw = rng.integers(0, 4, X.shape[0])
    sw[-1] = 0
    repeated = LocalPolynomialRegressor(bandwidth=0.01).fit(X.repeat(sw, axis=0),
                                                             y.repeat(sw))
    weighted = LocalPolynomialRegressor(bandwidth=0.01).fit(X, y, sample_weight=sw)
    points = np.vstack([X, queries])
    np.testing.assert_allclose(weighted.predict(points), repeated.predict(points), rtol=1e-9)
    np.testing.assert_allclose(weighted.cv_score_, repeated.cv_score_, rtol=1e-8)
    expected = _oracle(X, y, queries, 0.01, sw.astype(float))[0]
    np.testing.assert_allclose(weighted.predict(queries), expected, rtol=1e-8)


def test_far_queries_are_solved_directly(direct_rows: list[int]) -> None:
    rng = np.random.default_rng(0)
    X, y, queries = _far_cluster(rng)
    model = LocalPolynomialRegressor(bandwidth=0.01).fit(X, y)
    before = sum(direct_rows)
    model.predict(queries)
    assert sum(direct_rows) - before == queries.shape[0]


@pytest.mark.parametrize("d", [1, 3])
def test_ordinary_problems_are_not_solved_directly(direct_rows: list[int], d: int) -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 6, (300, d))
    y = 2 * np.sin(X[:, 0]) + X.sum(axis=1) + rng.normal(size=300)
    # the search may visit tiny bandwidths, whose rows need the direct solve; the fit at
    # the bandwidth it chose, and everything after, must not
    h = LocalPolynomialRegressor().fit(X, y).bandwidth_
    direct_rows.clear()
    model = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    model.predict(X + 0.01, return_std=True)
    model.smoother_matrix(X[:20])
    assert direct_rows == []


def test_small_bandwidth_on_dense_data_is_not_solved_directly(direct_rows: list[int]
                                                              ) -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 6, (6000, 1))
    y = 2 * np.sin(x[:, 0]) + 0.1 * rng.normal(size=6000)
    model = LocalPolynomialRegressor(bandwidth=6e-3).fit(x, y)
    model.predict(np.linspace(0, 6, 50)[:, None])
    assert direct_rows == []
