"""Bandwidth selection: the bracketed search and the criteria it minimises."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.estimators._search import brent, coordinate_search, minimize_log


def test_brent_finds_the_minimum_of_a_parabola() -> None:
    calls = []

    def f(t: float) -> float:
        calls.append(t)
        return (t - 1.3) ** 2 + 0.1

    x, fx = brent(f, -2.0, 4.0, 0.0, f(0.0), xtol=1e-8)
    assert x == pytest.approx(1.3, abs=1e-7)
    assert fx == pytest.approx(0.1, abs=1e-12)
    assert len(calls) < 15  # parabolic steps, not a grid


@pytest.mark.parametrize("start", [-6.0, 0.0, 5.0])
def test_minimize_log_brackets_from_any_start(start: float) -> None:
    x, _, at_bound = minimize_log(lambda t: math.cosh(t - 2.0), start, -10, 10, xtol=1e-6)
    assert x == pytest.approx(2.0, abs=1e-5)
    assert not at_bound


def test_minimize_log_reports_a_minimum_on_the_bound() -> None:
    x, _, at_bound = minimize_log(lambda t: -t, 0.0, -3.0, 3.0)
    assert x == 3.0 and at_bound


def test_minimize_log_walks_out_of_an_inadmissible_region() -> None:
    # infinite below t = 1 (no neighbours for some point), minimum at 2
    x, _, _ = minimize_log(lambda t: math.inf if t < 1 else (t - 2) ** 2, -2.0, -5.0, 5.0,
                            xtol=1e-6)
    assert x == pytest.approx(2.0, abs=1e-5)


def test_coordinate_search_follows_a_curved_valley() -> None:
    # a banana-shaped valley in log h with its minimum at log h = (0.5, 0.25)
    target = np.array([0.5, 0.25])

    def f(h: np.ndarray) -> float:
        t = np.log(h)
        return float(10 * (t[1] - t[0] ** 2) ** 2 + (t[0] - target[0]) ** 2)

    result = coordinate_search(f, np.ones(2), np.full(2, 1e-3), np.full(2, 1e3),
                               np.array([True, True]), xtol=1e-6)
    np.testing.assert_allclose(np.log(result.bandwidth), target, atol=1e-3)


def _explicit_criteria(X: np.ndarray, y: np.ndarray, h: float, make) -> dict[str, float]:
    S = make(h).fit(X, y).smoother_matrix()
    n, tr = len(y), np.trace(S)
    mse = np.mean((y - S @ y) ** 2)
    loo = (y - S @ y) / (1 - np.diag(S))
    return {"cv": np.mean(loo**2), "gcv": mse / (1 - tr / n) ** 2,
            "aicc": np.log(mse) + (1 + tr / n) / (1 - (tr + 2) / n)}


@pytest.mark.parametrize("criterion", ["cv", "gcv", "aicc"])
@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_chosen_bandwidth_minimises_the_criterion_on_a_fine_grid(rng: np.random.Generator,
                                                                 criterion: str, cls) -> None:
    X = rng.uniform(0, 6, (60, 1))
    y = 2 * np.sin(X[:, 0]) + rng.normal(size=60)
    model = cls(bandwidth=criterion).fit(X, y)
    assert model.cv_results_["criterion"] == criterion

    def make(h: float):
        return cls(bandwidth=h)

    grid = np.exp(np.linspace(np.log(0.05), np.log(5.0), 300))
    values = np.array([_explicit_criteria(X, y, h, make)[criterion] for h in grid])
    best = int(np.argmin(values))
    ours = _explicit_criteria(X, y, model.bandwidth_, make)[criterion]
    assert ours <= values[best] + 1e-9 * abs(values[best])
    # the search lands in the grid's best cell
    assert grid[max(best - 1, 0)] <= model.bandwidth_ <= grid[min(best + 1, len(grid) - 1)]


def test_cv_results_record_the_criterion(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 6, (40, 1))
    y = 2 * np.sin(X[:, 0]) + rng.normal(size=40)
    model = NadarayaWatsonRegressor(bandwidth="gcv").fit(X, y)
    res = model.cv_results_
    assert res["bandwidth"].shape == (len(res["score"]), 1)
    assert 5 <= len(res["score"]) < 60
    for h, score in list(zip(res["bandwidth"][:, 0], res["score"], strict=True))[:5]:
        expected = _explicit_criteria(X, y, h, lambda h: NadarayaWatsonRegressor(bandwidth=h))
        assert score == pytest.approx(expected["gcv"], rel=1e-8)
    assert res["score"].min() == pytest.approx(
        _explicit_criteria(X, y, model.bandwidth_,
                           lambda h: NadarayaWatsonRegressor(bandwidth=h))["gcv"], rel=1e-8)


def test_search_does_not_depend_on_row_order(rng: np.random.Generator) -> None:
    X = rng.normal(size=(50, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.normal(size=50)
    order = rng.permutation(50)
    a = NadarayaWatsonRegressor().fit(X, y)
    b = NadarayaWatsonRegressor().fit(X[order], y[order])
    np.testing.assert_array_equal(a.bandwidth_, b.bandwidth_)


def test_search_tries_smoothing_a_feature_out(rng: np.random.Generator) -> None:
    X = np.c_[rng.uniform(0, 6, 80), rng.normal(size=80)]
    y = 2 * np.sin(X[:, 0]) + 0.3 * rng.normal(size=80)
    model = NadarayaWatsonRegressor().fit(X, y)
    out = NadarayaWatsonRegressor(bandwidth=[model.bandwidth_[0], np.inf]).fit(X, y)
    assert model.cv_score_ <= out.cv_score_ * (1 + 1e-9)
    assert model.bandwidth_[0] < 1.0


def test_feature_smoothed_out_when_it_only_splits_the_data(rng: np.random.Generator) -> None:
    # the second feature splits the rows into two identical copies: pooling them
    # gives each point its twin, so the bandwidth of that feature runs to its bound
    x = np.linspace(0, 6, 60)
    X = np.c_[np.r_[x, x], np.r_[np.zeros(60), np.ones(60)]]
    y = np.tile(2 * np.sin(x) + 0.3 * rng.normal(size=60), 2)
    model = NadarayaWatsonRegressor().fit(X, y)
    assert model.bandwidth_[1] >= 100.0
    assert 1 in model.cv_results_["at_bound"]


def test_constant_feature_gets_infinite_bandwidth(rng: np.random.Generator) -> None:
    X = np.c_[rng.uniform(0, 6, 40), np.full(40, 3.0)]
    y = 2 * np.sin(X[:, 0]) + 0.3 * rng.normal(size=40)
    model = NadarayaWatsonRegressor().fit(X, y)
    assert np.isinf(model.bandwidth_[1])
    one = NadarayaWatsonRegressor().fit(X[:, :1], y)
    assert model.bandwidth_[0] == pytest.approx(one.bandwidth_, rel=1e-3)


def test_compact_kernel_search_keeps_every_point_covered(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 6, (50, 1))
    y = 2 * np.sin(X[:, 0]) + 0.3 * rng.normal(size=50)
    model = NadarayaWatsonRegressor("epanechnikov").fit(X, y)
    gaps = np.diff(np.sort(X[:, 0]))
    assert model.bandwidth_ > gaps.max() / 2
    assert np.isfinite(model.cv_score_)


def test_classifier_cv_minimises_the_brier_score(rng: np.random.Generator) -> None:
    X = rng.normal(size=(60, 1))
    y = (X[:, 0] + 0.7 * rng.normal(size=60) > 0).astype(int)
    model = KernelClassifier().fit(X, y)
    onehot = np.eye(2)[y]

    def brier(h: float) -> float:
        S = KernelClassifier(bandwidth=h).fit(X, y).smoother_matrix()
        loo = (onehot - S @ onehot) / (1 - np.diag(S))[:, None]
        return float(np.mean(loo**2))

    # a local minimum of the criterion (below ~0.1 the one-nearest-neighbour limit
    # of the leave-one-out error may be lower still)
    around = model.bandwidth_ * np.exp(np.linspace(-0.05, 0.05, 11))
    assert brier(model.bandwidth_) <= min(brier(h) for h in around) + 1e-9


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_searched_fit_equals_a_fit_at_the_chosen_bandwidth(rng: np.random.Generator,
                                                           cls) -> None:
    X = rng.uniform(0, 6, (70, 1))
    y = 2 * np.sin(X[:, 0]) + rng.normal(size=70)
    searched = cls().fit(X, y)
    given = cls(bandwidth=searched.bandwidth_).fit(X, y)
    assert searched.cv_score_ == pytest.approx(given.cv_score_, rel=1e-12)
    assert searched.effective_dof_ == pytest.approx(given.effective_dof_, rel=1e-12)
    Xq = np.linspace(0, 6, 11)[:, None]
    np.testing.assert_allclose(searched.predict(Xq, return_std=True),
                               given.predict(Xq, return_std=True), rtol=1e-12)


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_rules_are_the_package_rules_and_weights_repeat_rows(rng: np.random.Generator,
                                                             rule: str) -> None:
    import torch
    from scipy.stats import gaussian_kde

    import nadaraya.bandwidth as bw

    X = rng.normal(size=(40, 3)) * [1.0, 2.0, 0.5]
    y = X.sum(1)
    h = NadarayaWatsonRegressor(bandwidth=rule).fit(X, y).bandwidth_
    np.testing.assert_allclose(h, getattr(bw, rule)(torch.as_tensor(X)).numpy(), rtol=1e-12)
    # scipy's kde factor times each feature's sample standard deviation
    factor = gaussian_kde(X.T, bw_method=rule).factor
    np.testing.assert_allclose(h, factor * X.std(0, ddof=1), rtol=1e-12)
    w = rng.integers(1, 4, 40)
    weighted = NadarayaWatsonRegressor(bandwidth=rule).fit(X, y, sample_weight=w).bandwidth_
    repeated = NadarayaWatsonRegressor(bandwidth=rule).fit(X.repeat(w, 0), y.repeat(w))
    np.testing.assert_allclose(weighted, repeated.bandwidth_, rtol=1e-12)
