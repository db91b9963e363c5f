"""Bad input: every estimator says which parameter is wrong and how to fix it."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.kernels import Gaussian

ALL = [NadarayaWatsonRegressor, LocalPolynomialRegressor, KernelClassifier]


def _data(rng: np.random.Generator, n: int = 20) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, 2))
    return X, (X[:, 0] > 3).astype(int)


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("bandwidth", [-1.0, 0.0, "widest", np.nan, [0.5, 0.5, 0.5],
                                       [[0.5]], [0.5, -2.0]])
def test_bad_bandwidth(rng: np.random.Generator, cls, bandwidth) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="bandwidth"):
        cls(bandwidth=bandwidth).fit(X, y)


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("kernel", ["gausian", 3, None])
def test_bad_kernel(rng: np.random.Generator, cls, kernel) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="kernel"):
        cls(kernel=kernel, bandwidth=1.0).fit(X, y)


@pytest.mark.parametrize("cls", ALL)
def test_bandwidth_with_a_kernel_object(rng: np.random.Generator, cls) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="bandwidth=None"):
        cls(kernel=Gaussian(0.5)).fit(X, y)
    with pytest.raises(NadarayaError, match="bandwidth"):
        cls(kernel="softmax", bandwidth="cv").fit(X, y)
    # with bandwidth=None the object's own bandwidth is used
    model = cls(kernel=Gaussian(0.5), bandwidth=None).fit(X, y)
    assert model.bandwidth_ is None


@pytest.mark.parametrize("degree", [-1, 1.5, True, 7, "1"])
def test_bad_degree(rng: np.random.Generator, degree) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="degree"):
        LocalPolynomialRegressor(degree=degree, bandwidth=1.0).fit(X, y)


@pytest.mark.parametrize("ridge", [-1e-3, np.nan, np.inf, "small"])
def test_bad_ridge(rng: np.random.Generator, ridge) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="ridge"):
        LocalPolynomialRegressor(ridge=ridge, bandwidth=1.0).fit(X, y)


@pytest.mark.parametrize("cls", ALL)
def test_bad_empty_policy(rng: np.random.Generator, cls) -> None:
    X, y = _data(rng)
    with pytest.raises(NadarayaError, match="empty"):
        cls(bandwidth=1.0, empty="zero").fit(X, y)


@pytest.mark.parametrize("cls", ALL)
def test_bad_sample_weight(rng: np.random.Generator, cls) -> None:
    X, y = _data(rng)
    with pytest.raises(ValueError, match="sample_weight"):
        cls(bandwidth=1.0).fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match=r"[Ss]ample.weight"):
        cls(bandwidth=1.0).fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="sample_weight"):
        cls(bandwidth=1.0).fit(X, y, sample_weight=np.ones(3))


@pytest.mark.parametrize("cls", ALL)
def test_missing_values_and_wrong_shapes(rng: np.random.Generator, cls) -> None:
    X, y = _data(rng)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls(bandwidth=1.0).fit(bad, y)
    model = cls(bandwidth=1.0).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        model.predict(bad)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :1])


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("criterion", ["cv", "gcv", "aicc"])
def test_one_sample_cannot_choose_a_bandwidth(cls, criterion: str) -> None:
    with pytest.raises(NadarayaError, match="1 sample"):
        cls(bandwidth=criterion).fit([[1.0, 2.0]], [1])
    # a given bandwidth fits one sample
    assert cls(bandwidth=1.0).fit([[1.0, 2.0]], [1]).predict([[0.0, 0.0]])[0] == 1


def test_rule_needs_spread(rng: np.random.Generator) -> None:
    X = np.c_[rng.normal(size=10), np.ones(10)]
    with pytest.raises(NadarayaError, match=r"feature\(s\) \[1\]"):
        NadarayaWatsonRegressor(bandwidth="scott").fit(X, rng.normal(size=10))


def test_query_outside_a_compact_kernel(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 1, (30, 1))
    y = X[:, 0] ** 2
    far = np.array([[5.0]])
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.3).fit(X, y)
    with pytest.raises(NadarayaError, match="empty="):
        model.predict(far)
    nan = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.3, empty="nan").fit(X, y)
    assert np.isnan(nan.predict(far)[0])
    assert np.isnan(nan.predict(far, return_std=True)[1][0])
    near = LocalPolynomialRegressor(kernel="epanechnikov", bandwidth=0.3,
                                    empty="nearest").fit(X, y)
    assert near.predict(far)[0] == pytest.approx(y[np.argmax(X[:, 0])], rel=1e-12)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, "95%", True])
def test_bad_level(rng: np.random.Generator, level) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=1.0).fit(X, y.astype(float))
    for method in ("normal", "bootstrap"):
        with pytest.raises(NadarayaError, match="level"):
            model.predict_interval(X, level=level, method=method)


def test_bad_interval_method_and_resamples(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = LocalPolynomialRegressor(bandwidth=1.0).fit(X, y.astype(float))
    with pytest.raises(NadarayaError, match="method"):
        model.predict_interval(X, method="jackknife")
    for n in (0, -5, 2.5):
        with pytest.raises(NadarayaError, match="n_resamples"):
            model.bootstrap(X, n_resamples=n)


def test_classifier_refuses_continuous_targets(rng: np.random.Generator) -> None:
    X = rng.normal(size=(20, 2))
    with pytest.raises(ValueError, match="Unknown label type"):
        KernelClassifier(bandwidth=1.0).fit(X, rng.normal(size=20))
