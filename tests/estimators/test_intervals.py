"""Confidence bands and prediction intervals against the dense smoother matrix and simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from nadaraya._errors import NadarayaError
from nadaraya.datasets import load_mcycle
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

MAKERS = [
    lambda: NadarayaWatsonRegressor(bandwidth=0.5),
    lambda: LocalPolynomialRegressor(bandwidth=0.7),
    lambda: LocalPolynomialRegressor(degree=2, bandwidth=1.0),
    lambda: NadarayaWatsonRegressor("tricube", bandwidth=1.2),
]
Z95 = norm.ppf(0.975)


def _spread(x: np.ndarray) -> np.ndarray:
    return 0.1 + 0.4 * x  # noise standard deviation growing along x


def _data(rng: np.random.Generator, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, 1))
    return X, 2 * np.sin(X[:, 0]) + _spread(X[:, 0]) * rng.normal(size=n)


def _naive(model, X: np.ndarray, y: np.ndarray, Xq: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit, HC2 variance and leverage-corrected squared residuals from dense float64 S."""
    S, Sq = model.smoother_matrix(), model.smoother_matrix(Xq)
    e2 = (y - S @ y) ** 2 / (1 - np.diag(S))
    return Sq @ y, Sq**2 @ e2, e2


def _gauss(Xq: np.ndarray, X: np.ndarray, h: float) -> np.ndarray:
    return np.exp(-0.5 * ((Xq[:, None, 0] - X[None, :, 0]) / h) ** 2)


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("weighted", [False, True])
def test_default_band_is_hc2_from_the_smoother_matrix(rng: np.random.Generator, make,
                                                      weighted: bool) -> None:
    X, y = _data(rng)
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    model = make().fit(X, y, sample_weight=w)
    Xq = np.linspace(0.1, 5.9, 23)[:, None]
    mean, var, _ = _naive(model, X, y, Xq)
    lo, hi = model.predict_interval(Xq)
    np.testing.assert_allclose((lo + hi) / 2, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose((hi - lo) / 2, Z95 * np.sqrt(var), rtol=1e-7)


@pytest.mark.parametrize("weighted", [False, True])
def test_prediction_interval_adds_the_local_noise(rng: np.random.Generator,
                                                  weighted: bool) -> None:
    X, y = _data(rng)
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    h = 0.6
    model = LocalPolynomialRegressor(bandwidth=h).fit(X, y, sample_weight=w)
    Xq = np.linspace(0.1, 5.9, 17)[:, None]
    mean, var, e2 = _naive(model, X, y, Xq)
    omega = np.ones(len(y)) if w is None else w
    K = _gauss(Xq, X, h) * omega
    noise = K @ (omega * e2) / K.sum(axis=1)  # NW smooth of w_j e_j^2
    lo, hi = model.predict_interval(Xq, kind="prediction", level=0.9)
    np.testing.assert_allclose((hi - lo) / 2, norm.ppf(0.95) * np.sqrt(var + noise), rtol=1e-7)
    np.testing.assert_allclose((lo + hi) / 2, mean, rtol=1e-9, atol=1e-12)
    # homoscedastic: the standard error of predict plus sigma^2
    lo, hi = model.predict_interval(Xq, kind="prediction", method="normal")
    _, std = model.predict(Xq, return_std=True)
    np.testing.assert_allclose((hi - lo) / 2,
                               Z95 * np.sqrt(std**2 + model.residual_variance_), rtol=1e-12)


def test_bootstrap_intervals_from_the_draws(rng: np.random.Generator) -> None:
    X, y = _data(rng, 50)
    model = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    Xq = np.linspace(0.2, 5.8, 11)[:, None]
    draws = model.bootstrap(Xq, n_resamples=300, random_state=4)
    mean = model.predict(Xq)
    dev = draws - mean
    # basic pointwise interval
    lo, hi = model.predict_interval(Xq, method="bootstrap", n_resamples=300, random_state=4)
    np.testing.assert_allclose(lo, mean - np.quantile(dev, 0.975, axis=0), rtol=1e-12)
    np.testing.assert_allclose(hi, mean - np.quantile(dev, 0.025, axis=0), rtol=1e-12)
    # sup-t simultaneous band
    se = dev.std(axis=0, ddof=1)
    c = np.quantile(np.max(np.abs(dev) / se, axis=1), 0.95)
    lo, hi = model.predict_interval(Xq, method="bootstrap", simultaneous=True,
                                    n_resamples=300, random_state=4)
    np.testing.assert_allclose(hi - mean, c * se, rtol=1e-10)
    np.testing.assert_allclose(mean - lo, c * se, rtol=1e-10)
    assert c > Z95  # wider than the pointwise band
    # prediction: bootstrap variance of the estimate plus the local noise
    _, _, e2 = _naive(model, X, y, Xq)
    K = _gauss(Xq, X, 0.5)
    noise = K @ e2 / K.sum(axis=1)
    lo, hi = model.predict_interval(Xq, kind="prediction", method="bootstrap",
                                    n_resamples=300, random_state=4)
    np.testing.assert_allclose((hi - lo) / 2, Z95 * np.sqrt(dev.var(axis=0, ddof=1) + noise),
                               rtol=1e-10)


def test_mammen_multipliers(rng: np.random.Generator) -> None:
    X, y = _data(rng, 40)
    model = LocalPolynomialRegressor(bandwidth=0.7).fit(X, y)
    Xq = np.linspace(0, 6, 7)[:, None]
    S, Sq = model.smoother_matrix(), model.smoother_matrix(Xq)
    e = (y - S @ y) / np.sqrt(1 - np.diag(S))
    u = np.random.RandomState(5).random_sample((40, 30))
    r5 = np.sqrt(5.0)
    V = np.where(u < (r5 + 1) / (2 * r5), -(r5 - 1) / 2, (r5 + 1) / 2)
    assert abs(V.mean()) < 0.2
    expected = Sq @ (e[:, None] * V)
    lo, hi = model.predict_interval(Xq, method="bootstrap", multiplier="mammen",
                                    n_resamples=30, random_state=5)
    mean = Sq @ y
    np.testing.assert_allclose(lo, mean - np.quantile(expected, 0.975, axis=1), rtol=1e-9)
    np.testing.assert_allclose(hi, mean - np.quantile(expected, 0.025, axis=1), rtol=1e-9)
    # the law: mean 0, variance 1, third moment 1
    big = np.where(np.random.RandomState(0).random_sample(400_000) < (r5 + 1) / (2 * r5),
                   -(r5 - 1) / 2, (r5 + 1) / 2)
    np.testing.assert_allclose([big.mean(), big.var(), (big**3).mean()], [0, 1, 1], atol=0.02)


def test_hc_variance_is_the_wild_bootstrap_variance(rng: np.random.Generator) -> None:
    X, y = _data(rng, 80)
    model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, y)
    Xq = np.linspace(0.3, 5.7, 9)[:, None]
    draws = model.bootstrap(Xq, n_resamples=2000, random_state=1)
    lo, hi = model.predict_interval(Xq)
    # sd of a standard deviation from 2000 draws: about 1.6%
    np.testing.assert_allclose((hi - lo) / (2 * Z95), draws.std(axis=0), rtol=0.05)


def test_multiple_outputs_and_frames(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    Y = np.c_[y, 3 * y + rng.normal(size=len(y))]
    model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, Y)
    for kind in ("confidence", "prediction"):
        lo, hi = model.predict_interval(X[:5], kind=kind)
        assert lo.shape == hi.shape == (5, 2)
        for k in range(2):
            single = LocalPolynomialRegressor(bandwidth=0.6).fit(X, Y[:, k])
            l1, h1 = single.predict_interval(X[:5], kind=kind)
            np.testing.assert_allclose(lo[:, k], l1, rtol=1e-12)
            np.testing.assert_allclose(hi[:, k], h1, rtol=1e-12)
    frame = pd.DataFrame({"t": X[:, 0]})
    on_frame = LocalPolynomialRegressor(bandwidth=0.6).fit(frame, y)
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error")
        for method in ("hc", "normal"):
            lo, hi = on_frame.predict_interval(frame.iloc[:4], method=method)
            ref = LocalPolynomialRegressor(bandwidth=0.6).fit(X, y).predict_interval(
                X[:4], method=method)
            np.testing.assert_allclose(lo, ref[0], rtol=1e-12)


@pytest.mark.parametrize("make", MAKERS[:2])
def test_mcycle_default_band_agrees_with_the_wild_bootstrap(make) -> None:
    # the issue: on mcycle (noise growing after the impact) the homoscedastic band is
    # +/- 20 g before the impact, where the data lie within a few g, and too narrow after
    X, y = load_mcycle(return_X_y=True)
    model = make().set_params(bandwidth="cv").fit(X, y)
    Xq = np.linspace(3, 57, 40)[:, None]
    lo, hi = model.predict_interval(Xq)
    lo_b, hi_b = model.predict_interval(Xq, method="bootstrap", n_resamples=999,
                                        random_state=0)
    ratio = (hi - lo) / (hi_b - lo_b)
    assert abs(np.median(ratio) - 1) < 0.2
    # where one large residual dominates a query the bootstrap law has short tails and its
    # basic interval is narrower than +/- z sd; the standard deviations agree throughout
    assert np.quantile(ratio, 0.1) > 0.8 and np.quantile(ratio, 0.9) < 1.6
    lo_n, hi_n = model.predict_interval(Xq, method="normal")
    calm = Xq[:, 0] < 12
    assert np.all((hi - lo)[calm] < 0.5 * (hi_n - lo_n)[calm])
    # the prediction interval follows the spread of the data
    plo, phi = model.predict_interval(X, kind="prediction")
    inside = (plo <= y) & (y <= phi)
    assert 0.88 < inside.mean() < 0.995
    assert np.all((phi - plo)[X[:, 0] < 10] < 20) and np.max(phi - plo) > 100


@pytest.mark.slow
def test_coverage_of_the_smoothed_mean_and_of_new_observations() -> None:
    rng = np.random.default_rng(11)
    n, h = 150, 0.5
    X = np.sort(rng.uniform(0, 6, (n, 1)), axis=0)
    truth = 2 * np.sin(X[:, 0])
    Xq = np.linspace(0.5, 5.5, 6)[:, None]
    model = LocalPolynomialRegressor(bandwidth=h)
    smoothed = model.fit(X, truth).smoother_matrix(Xq) @ truth  # E[yhat(x)]: the band's target
    reps = 400
    hits = {"hc": np.zeros(6), "normal": np.zeros(6), "prediction": np.zeros(6)}
    for _ in range(reps):
        y = truth + _spread(X[:, 0]) * rng.normal(size=n)
        model.fit(X, y)
        for method in ("hc", "normal"):
            lo, hi = model.predict_interval(Xq, method=method)
            hits[method] += (lo <= smoothed) & (smoothed <= hi)
        new = 2 * np.sin(Xq[:, 0]) + _spread(Xq[:, 0]) * rng.normal(size=6)
        lo, hi = model.predict_interval(Xq, kind="prediction")
        hits["prediction"] += (lo <= new) & (new <= hi)
    cover = {k: v / reps for k, v in hits.items()}
    # 2400 intervals: a standard error of about 0.5% on the mean coverage
    assert 0.925 < cover["hc"].mean() < 0.97
    assert cover["hc"].min() > 0.9
    assert 0.92 < cover["prediction"].mean() < 0.975
    # the homoscedastic band over-covers where the noise is small, under-covers where large
    assert cover["normal"][0] > 0.99 and cover["normal"][-1] < 0.9


def test_hostile_inputs(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    for level in (0, 1, 1.5, -0.2, np.nan, "0.9", True):
        with pytest.raises(NadarayaError, match="level"):
            model.predict_interval(X[:3], level=level)
    with pytest.raises(NadarayaError, match="kind"):
        model.predict_interval(X[:3], kind="tolerance")
    with pytest.raises(NadarayaError, match="method"):
        model.predict_interval(X[:3], method="jackknife")
    with pytest.raises(NadarayaError, match="simultaneous"):
        model.predict_interval(X[:3], simultaneous=True)
    with pytest.raises(NadarayaError, match="simultaneous"):
        model.predict_interval(X[:3], method="bootstrap", kind="prediction", simultaneous=True)
    with pytest.raises(NadarayaError, match="multiplier"):
        model.predict_interval(X[:3], method="bootstrap", multiplier="gaussian")
    for n_resamples in (0, -1, 2.5, True):
        with pytest.raises(NadarayaError, match="n_resamples"):
            model.predict_interval(X[:3], method="bootstrap", n_resamples=n_resamples)
    with pytest.raises(ValueError):
        model.predict_interval(np.array([[np.nan]]))
    with pytest.raises(ValueError):
        model.predict_interval(np.ones((2, 3)))
    with pytest.raises(Exception, match="not fitted"):
        NadarayaWatsonRegressor().predict_interval(X[:3])
    with pytest.raises(ValueError, match="0 sample"):  # as predict
        model.predict_interval(np.zeros((0, 1)))
    # one training row: no residual degrees of freedom, an undefined (NaN) band, no crash
    one = NadarayaWatsonRegressor(bandwidth=1.0).fit(X[:1], y[:1])
    for kind in ("confidence", "prediction"):
        for method in ("hc", "normal"):
            lo, hi = one.predict_interval(X[:2], kind=kind, method=method)
            assert lo.shape == (2,) and np.isnan(lo).all() and np.isnan(hi).all()
