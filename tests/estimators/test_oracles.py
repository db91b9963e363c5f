"""Predictions against independent oracles: naive sums, weighted least squares, scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
)
from nadaraya.masks import KNearest


def _gauss(q: np.ndarray, x: np.ndarray, h: np.ndarray) -> float:
    return math.exp(-0.5 * float(np.sum(((q - x) / h) ** 2)))


def _epan(q: np.ndarray, x: np.ndarray, h: np.ndarray) -> float:
    r2 = float(np.sum(((q - x) / h) ** 2))
    return max(0.0, 1.0 - r2)


def naive_nw(Xq, X, Y, h, w=None, kernel=_gauss):
    """Double loop: sum_j K w_j y_j / sum_j K w_j."""
    w = np.ones(len(X)) if w is None else w
    out = np.zeros((len(Xq), Y.shape[1]))
    for i, q in enumerate(Xq):
        num, den = np.zeros(Y.shape[1]), 0.0
        for j, x in enumerate(X):
            k = kernel(q, x, h) * w[j]
            num += k * Y[j]
            den += k
        out[i] = num / den
    return out


def naive_local_poly(Xq, X, y, h, degree, w=None):
    """Weighted least squares on monomials of x - q, one query at a time (1-D or any d, deg 1)."""
    w = np.ones(len(X)) if w is None else w
    out = np.empty(len(Xq))
    for i, q in enumerate(Xq):
        u = X - q
        if X.shape[1] == 1:
            B = np.vander(u[:, 0], degree + 1, increasing=True)
        else:
            assert degree == 1
            B = np.c_[np.ones(len(X)), u]
        k = np.array([_gauss(q, x, h) for x in X]) * w
        sw = np.sqrt(k)
        beta = np.linalg.lstsq(B * sw[:, None], y * sw, rcond=None)[0]
        out[i] = beta[0]
    return out


def test_nadaraya_watson_weights_multioutput(rng: np.random.Generator) -> None:
    X = rng.normal(size=(40, 2))
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2, X.sum(1)] + 0.1 * rng.normal(size=(40, 3))
    w = rng.uniform(0.2, 3.0, 40)
    h = np.array([0.6, 0.9])
    Xq = rng.normal(size=(15, 2))
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, Y, sample_weight=w)
    np.testing.assert_allclose(model.predict(Xq), naive_nw(Xq, X, Y, h, w), rtol=1e-12)


def test_compact_kernel_matches_naive(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 1, (60, 1))
    y = np.cos(4 * X[:, 0]) + 0.1 * rng.normal(size=60)
    Xq = np.linspace(0.05, 0.95, 20)[:, None]
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.2).fit(X, y)
    expected = naive_nw(Xq, X, y[:, None], np.array([0.2]), kernel=_epan)[:, 0]
    np.testing.assert_allclose(model.predict(Xq), expected, rtol=1e-12)


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_local_polynomial_1d_matches_weighted_least_squares(rng: np.random.Generator,
                                                          degree: int) -> None:
    X = rng.uniform(0, 6, (70, 1))
    y = 2 * np.sin(X[:, 0]) + 0.5 * rng.normal(size=70)
    w = rng.integers(1, 4, 70).astype(float)
    Xq = np.linspace(-0.2, 6.2, 25)[:, None]
    model = LocalPolynomialRegressor(degree=degree, bandwidth=0.5).fit(X, y, sample_weight=w)
    expected = naive_local_poly(Xq, X, y, np.array([0.5]), degree, w)
    # moments about a query come from moments about the centre: higher degrees lose
    # accuracy at the boundary to cancellation (and to the ridge that guards it)
    rtol = {1: 1e-9, 2: 1e-7, 3: 1e-4}[degree]
    np.testing.assert_allclose(model.predict(Xq), expected, rtol=rtol, atol=rtol * 1e-2)


def test_local_linear_per_feature_bandwidth(rng: np.random.Generator) -> None:
    X = rng.normal(size=(80, 2)) * [1.0, 10.0]
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.1 * rng.normal(size=80)
    h = np.array([0.5, 6.0])
    Xq = rng.normal(size=(20, 2)) * [1.0, 10.0]
    model = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    np.testing.assert_allclose(model.predict(Xq), naive_local_poly(Xq, X, y, h, 1),
                               rtol=1e-8, atol=1e-10)


def test_degree_zero_is_nadaraya_watson(rng: np.random.Generator) -> None:
    X = rng.normal(size=(50, 2))
    y = X[:, 0] - X[:, 1] ** 2 + 0.2 * rng.normal(size=50)
    w = rng.uniform(0.5, 2.0, 50)
    Xq = rng.normal(size=(10, 2))
    nw = NadarayaWatsonRegressor(bandwidth=0.7).fit(X, y, sample_weight=w)
    lp = LocalPolynomialRegressor(degree=0, bandwidth=0.7).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(lp.predict(Xq), nw.predict(Xq), rtol=1e-12)
    assert lp.effective_dof_ == pytest.approx(nw.effective_dof_, rel=1e-12)


@pytest.mark.parametrize("d", [1, 3])
def test_infinite_bandwidth_local_linear_is_linear_regression(rng: np.random.Generator,
                                                              d: int) -> None:
    X = rng.normal(size=(50, d)) * 3 + 5
    y = X @ rng.normal(size=d) + 2.0 + rng.normal(size=50)
    Xq = rng.normal(size=(12, d)) * 3 + 5
    ours = LocalPolynomialRegressor(bandwidth=np.inf).fit(X, y).predict(Xq)
    theirs = LinearRegression().fit(X, y).predict(Xq)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8)
    # an infinite bandwidth turns Nadaraya-Watson into the mean
    mean = NadarayaWatsonRegressor(bandwidth=np.inf).fit(X, y).predict(Xq)
    np.testing.assert_allclose(mean, np.full(12, y.mean()), rtol=1e-12)


def test_infinite_bandwidth_on_one_feature_smooths_it_out(rng: np.random.Generator) -> None:
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    Xq = rng.normal(size=(8, 2))
    both = NadarayaWatsonRegressor(bandwidth=[0.5, np.inf]).fit(X, y).predict(Xq)
    first = NadarayaWatsonRegressor(bandwidth=0.5).fit(X[:, :1], y).predict(Xq[:, :1])
    np.testing.assert_allclose(both, first, rtol=1e-12)


@pytest.mark.parametrize("k", [1, 5, 12])
def test_uniform_k_nearest_is_kneighbors_regressor(rng: np.random.Generator, k: int) -> None:
    X = rng.uniform(0, 6, (80, 2))
    y = 2 * np.sin(X[:, 0]) + rng.normal(size=80)
    Xq = rng.uniform(0, 6, (30, 2))
    model = NadarayaWatsonRegressor("uniform", bandwidth=100.0, mask=KNearest(k)).fit(X, y)
    expected = KNeighborsRegressor(n_neighbors=k).fit(X, y).predict(Xq)
    np.testing.assert_allclose(model.predict(Xq), expected, rtol=1e-12)


def test_uniform_k_nearest_classifier_is_kneighbors_classifier(rng: np.random.Generator
                                                              ) -> None:
    X = rng.normal(size=(90, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=90) > 0, "yes", "no")
    Xq = rng.normal(size=(25, 2))
    model = KernelClassifier("uniform", bandwidth=100.0, mask=KNearest(7)).fit(X, y)
    peer = KNeighborsClassifier(n_neighbors=7).fit(X, y)
    np.testing.assert_array_equal(model.classes_, peer.classes_)
    np.testing.assert_allclose(model.predict_proba(Xq), peer.predict_proba(Xq), atol=1e-12)
    np.testing.assert_array_equal(model.predict(Xq), peer.predict(Xq))


def test_classifier_probabilities_are_weighted_label_averages(rng: np.random.Generator
                                                              ) -> None:
    X = rng.normal(size=(50, 2))
    y = rng.integers(0, 3, 50)
    w = rng.uniform(0.1, 2.0, 50)
    Xq = rng.normal(size=(12, 2))
    model = KernelClassifier(bandwidth=0.8).fit(X, y, sample_weight=w)
    onehot = np.eye(3)[y]
    expected = naive_nw(Xq, X, onehot, np.array([0.8, 0.8]), w)
    np.testing.assert_allclose(model.predict_proba(Xq), expected, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(Xq), np.argmax(expected, axis=1))
