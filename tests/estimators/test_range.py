"""Targets, sample weights and bandwidths at the edges of the float range, and wide searches.

Oracles: the same estimator on rescaled data. Scaling the targets by a power
of two scales every output exactly (the estimators work on the targets
divided by a power of two near their largest); scaling the sample weights
changes no prediction; a bandwidth so small that the moments of the local
polynomial cannot hold the coordinates gives the fit at an ordinary
bandwidth with the same (exactly zero or one) kernel weights.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from nadaraya import NadarayaError
from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    _bandwidth,
)
from nadaraya.masks import KNearest

REGRESSORS = (NadarayaWatsonRegressor, LocalPolynomialRegressor)


def _data(rng: np.random.Generator, n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, 1))
    return X, 2 * np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)


@pytest.mark.parametrize("criterion", ["cv", "aicc"])
@pytest.mark.parametrize("estimator", REGRESSORS)
@pytest.mark.parametrize("k", [-900, -37, 41, 900])
def test_targets_scaled_by_a_power_of_two_scale_every_output_exactly(
        rng: np.random.Generator, estimator, criterion: str, k: int) -> None:
    X, y = _data(rng)
    Xq = np.linspace(0.2, 5.8, 7)[:, None]
    base = estimator(bandwidth=criterion).fit(X, y)
    scaled = estimator(bandwidth=criterion).fit(X, np.ldexp(y, k))
    # the search sees the same numbers, so it takes the same path
    assert scaled.bandwidth_ == base.bandwidth_
    np.testing.assert_array_equal(scaled.cv_results_["bandwidth"],
                                  base.cv_results_["bandwidth"])
    with np.errstate(over="ignore"):
        if criterion == "aicc":
            # log MSE moves by 2 k log 2
            np.testing.assert_allclose(scaled.cv_results_["score"],
                                       base.cv_results_["score"] + 2 * k * math.log(2.0),
                                       rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(scaled.cv_results_["score"],
                                          np.ldexp(base.cv_results_["score"], 2 * k))
        # beyond the float range a squared quantity is inf (k = 900: MSE near 1e540)
        assert scaled.cv_score_ == np.ldexp(base.cv_score_, 2 * k)
        assert scaled.residual_variance_ == np.ldexp(base.residual_variance_, 2 * k)
    mean, std = scaled.predict(Xq, return_std=True)
    ref_mean, ref_std = base.predict(Xq, return_std=True)
    np.testing.assert_array_equal(mean, np.ldexp(ref_mean, k))
    np.testing.assert_array_equal(std, np.ldexp(ref_std, k))
    assert np.isfinite(std).all()
    np.testing.assert_array_equal(scaled.predict_interval(Xq)[1],
                                  np.ldexp(base.predict_interval(Xq)[1], k))
    boot = scaled.predict_interval(Xq, method="bootstrap", n_resamples=30, random_state=0)
    ref_boot = base.predict_interval(Xq, method="bootstrap", n_resamples=30, random_state=0)
    np.testing.assert_array_equal(boot[0], np.ldexp(ref_boot[0], k))
    assert scaled.effective_dof_ == base.effective_dof_


@pytest.mark.parametrize("estimator", REGRESSORS)
@pytest.mark.parametrize("exponent", [-320, -318, -315])
def test_subnormal_targets_lose_nothing_beyond_their_own_rounding(estimator,
                                                                  exponent: int) -> None:
    X, y = _data(np.random.default_rng(0), 40)
    scale = 10.0**exponent
    tiny = y * scale  # subnormal: 10 to 20 bits of each target survive
    want = estimator(bandwidth=0.4).fit(X, tiny / scale).predict(X)
    got = estimator(bandwidth=0.4).fit(X, tiny).predict(X)
    # the fit of the targets as stored, rounded once to the subnormal grid
    atol = 1e-9 * np.abs(want).max() + 2 * 2.0**-1074 / scale
    np.testing.assert_allclose(got / scale, want, rtol=0, atol=atol)


@pytest.mark.parametrize("estimator", (*REGRESSORS, KernelClassifier))
@pytest.mark.parametrize("k", [-1070, -600, 600])
def test_sample_weights_of_any_scale_give_the_same_fit(rng: np.random.Generator, estimator,
                                                       k: int) -> None:
    X, y = _data(rng)
    if estimator is KernelClassifier:
        y = (y > 0).astype(int)
    # integer weights 1..2^20: at k = -1070 they are subnormal and keep every bit
    w = rng.integers(1, 2**20, y.size).astype(float)
    Xq = np.linspace(0.2, 5.8, 9)[:, None]
    ref = estimator(bandwidth=0.5).fit(X, y, sample_weight=w)
    got = estimator(bandwidth=0.5).fit(X, y, sample_weight=np.ldexp(w, k))
    out = getattr(got, "predict_proba", got.predict)(Xq)
    want = getattr(ref, "predict_proba", ref.predict)(Xq)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.smoother_matrix(Xq), ref.smoother_matrix(Xq),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.effective_dof_, ref.effective_dof_, rtol=1e-12)


def _groups(rng: np.random.Generator, n: int = 60) -> tuple[np.ndarray, np.ndarray,
                                                            np.ndarray]:
    """A feature of three integer levels and a continuous one; queries on the levels."""
    g = rng.integers(0, 3, n).astype(float)
    t = rng.uniform(0, 6, n)
    y = np.sin(t) + g + 0.1 * rng.normal(size=n)
    queries = np.c_[rng.integers(0, 3, 9).astype(float), rng.uniform(0.3, 5.7, 9)]
    return np.c_[g, t], y, queries


@pytest.mark.parametrize("degree", [1, 2])
# 3e-308: the smallest bandwidths the engine takes are normal numbers (>= 2.2e-308)
@pytest.mark.parametrize("tiny", [1e-160, 1e-300, 3e-308])
def test_a_bandwidth_too_small_for_the_moments_gives_the_exact_fit(
        rng: np.random.Generator, degree: int, tiny: float) -> None:
    # Along the first feature the levels lie 1 apart: at a bandwidth of 1e-3 or less each
    # query sees only its own level (the others weigh exp(-5e5) = 0), so every bandwidth
    # below gives the same fit; below ~1e-90 the squared coordinates leave the float range.
    X, y, queries = _groups(rng)
    ref = LocalPolynomialRegressor(degree=degree, bandwidth=[1e-3, 1.0]).fit(X, y)
    got = LocalPolynomialRegressor(degree=degree, bandwidth=[tiny, 1.0]).fit(X, y)
    mean, std = got.predict(queries, return_std=True)
    ref_mean, ref_std = ref.predict(queries, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std, ref_std, rtol=1e-8)
    np.testing.assert_allclose(got.smoother_matrix(queries), ref.smoother_matrix(queries),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.cv_score_, ref.cv_score_, rtol=1e-10)
    np.testing.assert_allclose(got.effective_dof_, ref.effective_dof_, rtol=1e-10)


def test_a_bandwidth_of_1e_300_fits_each_point_alone(rng: np.random.Generator) -> None:
    X, y = _data(rng, 40)
    model = LocalPolynomialRegressor(bandwidth=1e-300).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), y)
    assert model.effective_dof_ == pytest.approx(40.0, rel=1e-12)


def test_a_bandwidth_too_small_for_the_moments_with_a_mask_names_the_bandwidth(
        rng: np.random.Generator) -> None:
    X, y, _ = _groups(rng)
    with pytest.raises(NadarayaError, match=r"bandwidth=.*mask=None"):
        LocalPolynomialRegressor(bandwidth=[1e-300, 1.0], mask=KNearest(10)).fit(X, y)


def test_more_features_than_samples_search_one_common_factor() -> None:
    # 300 features and 10 samples: one bandwidth per feature is not fixed by the data
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 300))
    y = X[:, 0] + 0.1 * rng.normal(size=10)
    model = NadarayaWatsonRegressor(bandwidth="cv").fit(X, y)
    res = model.cv_results_
    assert len(res["score"]) <= _bandwidth.EVALUATIONS
    assert (res["feature"] == -1).all() and res["converged"]
    # every bandwidth is the start (the rule of thumb per feature) times one factor
    ratio = res["bandwidth"] / res["bandwidth"][:1]
    np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones((1, 300)), rtol=1e-12)
    # and the factor chosen is the best of a grid of factors (within the search's bounds)
    factors = (0.3, 0.7) if res["at_bound"] else (0.3, 0.7, 1.5)
    grid = [NadarayaWatsonRegressor(bandwidth=model.bandwidth_ * f).fit(X, y).cv_score_
            for f in factors]
    assert model.cv_score_ <= min(grid) * (1 + 1e-9)


def test_a_search_out_of_budget_warns_and_keeps_the_best_evaluated(
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bandwidth, "EVALUATIONS", 4)
    X = rng.uniform(0, 6, (60, 3))
    y = np.sin(X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=60)
    with pytest.warns(ConvergenceWarning, match="bandwidth='cv'"):
        model = NadarayaWatsonRegressor().fit(X, y)
    res = model.cv_results_
    assert not res["converged"]
    assert len(res["score"]) <= 4 * 3
    np.testing.assert_array_equal(model.bandwidth_, res["bandwidth"][np.argmin(res["score"])])


def test_a_settled_search_does_not_warn(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 6, (60, 2))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = NadarayaWatsonRegressor().fit(X, y)
    assert model.cv_results_["converged"]


@pytest.mark.parametrize("estimator", REGRESSORS)
def test_standard_errors_far_from_every_key_come_from_the_kernel_weights(
        rng: np.random.Generator, estimator) -> None:
    # Levels 1 apart and a bandwidth of 1e-100: a query between levels lies ~1e99 bandwidths
    # from every key, where log sum K is about -1e198 and the difference of the two
    # log-sums that gives sum K^2 / (sum K)^2 is pure rounding.
    X = rng.integers(0, 5, (60, 1)).astype(float)
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=60)
    w = rng.uniform(0.5, 2.0, 60)
    queries = np.array([[1.3], [2.0], [3.6], [2.5000001]])
    model = estimator(bandwidth=1e-100).fit(X, y, sample_weight=w)
    _, std = model.predict(queries, return_std=True)
    S = model.smoother_matrix(queries)
    np.testing.assert_allclose(std, np.sqrt(model.residual_variance_ * (S**2 / w).sum(axis=1)),
                               rtol=1e-9)


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_a_rule_with_weights_totalling_one_or_less_names_the_weights(
        rng: np.random.Generator, rule: str) -> None:
    # the rules count the weights as samples (a standard deviation with ddof=1)
    X, y = _data(rng)
    for w in (np.full(y.size, 1.0 / y.size), np.full(y.size, 1e-320)):
        with pytest.raises(NadarayaError, match=rf"bandwidth='{rule}'.*sample_weight"):
            NadarayaWatsonRegressor(bandwidth=rule).fit(X, y, sample_weight=w)
