"""Standard errors, bands and the bootstrap against the smoother matrix and simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

MAKERS = [
    lambda: NadarayaWatsonRegressor(bandwidth=0.5),
    lambda: LocalPolynomialRegressor(bandwidth=0.7),
    lambda: LocalPolynomialRegressor(degree=2, bandwidth=1.0),
    lambda: NadarayaWatsonRegressor("tricube", bandwidth=1.2),
]


def _data(rng: np.random.Generator, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, 1))
    return X, 2 * np.sin(X[:, 0]) + 0.5 * rng.normal(size=n)


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("weighted", [False, True])
def test_std_is_sigma_times_weighted_row_norm(rng: np.random.Generator, make,
                                              weighted: bool) -> None:
    X, y = _data(rng)
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    model = make().fit(X, y, sample_weight=w)
    omega = np.ones(len(y)) if w is None else w
    S = model.smoother_matrix()
    resid = y - S @ y
    sigma2 = omega @ resid**2 / (omega.sum() - np.trace(S))
    assert model.residual_variance_ == pytest.approx(sigma2, rel=1e-9)
    Xq = np.linspace(0.1, 5.9, 23)[:, None]
    Sq = model.smoother_matrix(Xq)
    mean, std = model.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean, Sq @ y, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, np.sqrt(sigma2 * (Sq**2 / omega).sum(axis=1)), rtol=1e-7)


def test_std_for_multiple_outputs(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    Y = np.c_[y, 3 * y + rng.normal(size=len(y))]
    model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, Y)
    mean, std = model.predict(X[:5], return_std=True)
    assert mean.shape == std.shape == (5, 2)
    for k in range(2):
        single = LocalPolynomialRegressor(bandwidth=0.6).fit(X, Y[:, k])
        m1, s1 = single.predict(X[:5], return_std=True)
        np.testing.assert_allclose(mean[:, k], m1, rtol=1e-12)
        np.testing.assert_allclose(std[:, k], s1, rtol=1e-12)


def test_std_is_the_sampling_spread_of_the_estimate() -> None:
    # new noise on the same design: the fits spread as predicted (with the true sigma)
    rng = np.random.default_rng(7)
    X = np.sort(rng.uniform(0, 6, (80, 1)), axis=0)
    truth, sigma = 2 * np.sin(X[:, 0]), 0.5
    Xq = np.array([[0.2], [1.5], [3.0], [5.8]])
    fits = []
    for _ in range(400):
        y = truth + sigma * rng.normal(size=80)
        model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, y)
        fits.append(model.predict(Xq))
    _, std = model.predict(Xq, return_std=True)
    predicted = std / np.sqrt(model.residual_variance_) * sigma
    np.testing.assert_allclose(np.std(fits, axis=0), predicted, rtol=0.12)


def test_normal_interval(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    lo, hi = model.predict_interval(X[:7], level=0.9, method="normal")
    mean, std = model.predict(X[:7], return_std=True)
    z = norm.ppf(0.95)
    np.testing.assert_allclose(lo, mean - z * std, rtol=1e-12)
    np.testing.assert_allclose(hi, mean + z * std, rtol=1e-12)


@pytest.mark.parametrize("make", MAKERS[:3])
def test_bootstrap_is_the_smoother_applied_to_signed_residuals(rng: np.random.Generator,
                                                               make) -> None:
    X, y = _data(rng, 40)
    model = make().fit(X, y)
    Xq = np.linspace(0, 6, 9)[:, None]
    draws = model.bootstrap(Xq, n_resamples=6, random_state=3)
    S, Sq = model.smoother_matrix(), model.smoother_matrix(Xq)
    scaled = (y - S @ y) / np.sqrt(1 - np.diag(S))
    signs = np.random.RandomState(3).choice(np.array([-1.0, 1.0]), size=(40, 6))
    expected = (Sq @ y)[None, :] + (Sq @ (scaled[:, None] * signs)).T
    np.testing.assert_allclose(draws, expected, rtol=1e-9, atol=1e-12)


def test_bootstrap_band_agrees_with_the_normal_band(rng: np.random.Generator) -> None:
    X, y = _data(rng, 150)
    model = LocalPolynomialRegressor(bandwidth=0.7).fit(X, y)
    Xq = np.linspace(0.5, 5.5, 6)[:, None]
    lo_b, hi_b = model.predict_interval(Xq, method="bootstrap", n_resamples=2000,
                                        random_state=0)
    lo_n, hi_n = model.predict_interval(Xq, method="normal")
    np.testing.assert_allclose(hi_b - lo_b, hi_n - lo_n, rtol=0.2)
    mean = model.predict(Xq)
    assert np.all((lo_b < mean) & (mean < hi_b))
