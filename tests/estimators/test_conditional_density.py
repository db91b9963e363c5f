"""ConditionalDensity against statsmodels' KDEMultivariateConditional and formulas written here."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm
from statsmodels.nonparametric.kernel_density import KDEMultivariateConditional

from nadaraya import NadarayaError
from nadaraya.estimators import ConditionalDensity, ConditionalQuantileRegressor

from .test_density import integrate_pieces


def _data(seed: int = 0, n: int = 60) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 3, n),
                         rng.integers(0, 4, n)]).astype(float)
    ys = {"c": X[:, 0] + 0.5 * rng.normal(size=n),
          "o": rng.integers(0, 4, n).astype(float),
          "u": rng.integers(0, 3, n).astype(float)}
    return X, ys


@pytest.mark.parametrize("dep", ["c", "o", "u", "cc", "co"])
@pytest.mark.parametrize("indep", ["cu", "co", "c", "uo"])
def test_pdf_and_cdf_equal_statsmodels(dep: str, indep: str) -> None:
    X, ys = _data()
    cols = {"c": [0], "cu": [0, 1], "co": [0, 2], "uo": [1, 2]}[indep]
    Xi = X[:, cols]
    Y = np.column_stack([ys["c"] if t == "c" else ys[t] for t in dep])
    if dep == "cc":
        Y[:, 1] = Y[:, 1] ** 2 - 1
    types = dep + indep
    bw = np.array([{"c": 0.45, "u": 0.3, "o": 0.35}[t] for t in types])
    ours = ConditionalDensity(bandwidth=bw, dep_types=dep, var_types=indep).fit(Xi, Y)
    sm = KDEMultivariateConditional(endog=Y, exog=Xi, dep_type=dep, indep_type=indep, bw=bw)
    shift_x = np.where(np.array(list(indep)) == "c", 0.07, 0.0)
    shift_y = np.where(np.array(list(dep)) == "c", 0.11, 0.0)
    Qx, Qy = Xi[:12] + shift_x, Y[:12] + shift_y
    np.testing.assert_allclose(np.exp(ours.score_samples(Qx, Qy)), sm.pdf(Qy, Qx), rtol=1e-10)
    np.testing.assert_allclose(ours.cdf(Qx, Qy), sm.cdf(Qy, Qx), rtol=1e-10)


@pytest.mark.slow
def test_cv_ml_is_at_least_as_good_as_statsmodels() -> None:
    X, ys = _data(1, 50)
    Xi = X[:, :2]
    ours = ConditionalDensity(var_types="cu").fit(Xi, ys["c"])
    sm = KDEMultivariateConditional(endog=ys["c"], exog=Xi, dep_type="c", indep_type="cu",
                                    bw="cv_ml")
    # statsmodels' objective is -sum_i log f_{-i}(y_i | x_i); ours is it over n
    assert sm.loo_likelihood(ours.bandwidth_, np.log) / 50 == pytest.approx(ours.cv_score_,
                                                                          rel=1e-10)
    assert sm.loo_likelihood(ours.bandwidth_, np.log) <= \
        sm.loo_likelihood(sm.bw, np.log) + 1e-9


def test_quantiles_invert_the_cdf_and_match_a_naive_root() -> None:
    X, ys = _data(2)
    Xi = X[:, :1]
    h = np.array([0.4, 0.5])
    cd = ConditionalDensity(bandwidth=h).fit(Xi, ys["c"])
    Qx = np.array([[-1.0], [0.0], [0.7], [2.5]])
    for q in (0.05, 0.5, 0.9):
        got = cd.predict_quantile(Qx, q)
        np.testing.assert_allclose(cd.cdf(Qx, got), q, atol=1e-10)
        for x0, t in zip(Qx[:, 0], got, strict=True):
            a = np.exp(-0.5 * ((x0 - Xi[:, 0]) / h[1]) ** 2)
            a /= a.sum()
            naive = brentq(lambda t, a=a, q=q: a @ norm.cdf((t - ys["c"]) / h[0]) - q, -20, 20,
                           xtol=1e-13)
            assert t == pytest.approx(naive, abs=1e-9)


def test_ordered_quantile_is_the_first_level_reaching_q() -> None:
    X, ys = _data(3)
    cd = ConditionalDensity(bandwidth=[0.3, 0.5], dep_types="o").fit(X[:, :1], ys["o"])
    Qx = np.array([[-0.5], [0.4]])
    levels = np.unique(ys["o"])
    F = np.column_stack([cd.cdf(Qx, np.full(2, lev)) for lev in levels])
    for q in (0.2, 0.5, 0.8):
        expect = levels[np.argmax(F >= q, axis=1)]
        np.testing.assert_array_equal(cd.predict_quantile(Qx, q), expect)


@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian", "laplacian"])
def test_density_integrates_to_one_in_y(kernel: str) -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] - X[:, 1] + rng.normal(size=30)
    cd = ConditionalDensity(kernel, bandwidth=[0.6, 0.9, 0.8]).fit(X, y)
    x0 = np.array([[0.2, -0.1]])
    h = 0.6
    breaks = np.concatenate([y, y - h, y + h, np.linspace(y.min() - h, y.max() + h, 200)])
    total = integrate_pieces(lambda t: np.exp(cd.score_samples(np.repeat(x0, t.size, 0), t)),
                             breaks)
    assert total == pytest.approx(1.0, abs=1e-9)


def test_far_and_empty_queries() -> None:
    X, ys = _data(5)
    cd = ConditionalDensity("epanechnikov", bandwidth=[0.5, 0.5]).fit(X[:, :1], ys["c"])
    out = cd.score_samples([[100.0], [0.0], [1e200]], [0.0, 100.0, -1e200])
    assert not np.isnan(out).any() and np.all(out == -np.inf)
    g = ConditionalDensity(bandwidth=[0.5, 0.5]).fit(X[:, :1], ys["c"])
    far = g.score_samples([[50.0]], [1e3])
    assert np.isfinite(far).all() or far[0] == -np.inf
    with pytest.raises(NadarayaError, match="gaussian"):
        cd.cdf([[0.0]], [0.0])


@pytest.mark.parametrize(("kwargs", "fit_args", "match"), [
    ({}, (np.ones((5, 1)), np.arange(4.0)), "shape"),
    ({"bandwidth": [0.5, 0.5]}, (np.arange(5.0)[:, None], [0, 1, np.nan, 3, 4]), "NaN"),
    ({"bandwidth": "sheather-jones"}, (np.arange(5.0)[:, None], np.arange(5.0)), "not known"),
    ({"bandwidth": [0.5, -0.5]}, (np.arange(5.0)[:, None], np.arange(5.0)), "bandwidth\\[1\\]"),
    ({"bandwidth": "cv_ml"}, (np.ones((5, 1)), np.arange(5.0)), "constant"),
    ({"bandwidth": "cv_ml"}, (np.ones((1, 1)), np.ones(1)), "n_samples=1"),
    ({"dep_types": "cc"}, (np.ones((5, 1)), np.arange(5.0)), "var_types"),
])
def test_hostile_inputs(kwargs: dict, fit_args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ConditionalDensity(**kwargs).fit(*fit_args)


def test_bad_queries() -> None:
    X, ys = _data(6)
    cd = ConditionalDensity(bandwidth=[0.4, 0.4, 0.5]).fit(X[:, :1],
                                                          np.column_stack([ys["c"], ys["c"]]))
    with pytest.raises(NadarayaError, match="one dependent variable"):
        cd.predict_quantile([[0.0]], 0.5)
    with pytest.raises(NadarayaError, match="column"):
        cd.score_samples([[0.0]], [0.0])
    one = ConditionalDensity(bandwidth=[0.4, 0.4]).fit(X[:, :1], ys["c"])
    for q in (0.0, 1.0, -0.2, "half"):
        with pytest.raises(NadarayaError, match="q must be"):
            one.predict_quantile([[0.0]], q)


def test_quantile_regressor_is_the_density_quantile_and_pickles() -> None:
    X, ys = _data(7)
    reg = ConditionalQuantileRegressor(0.8, bandwidth=[0.4, 0.5]).fit(X[:, :1], ys["c"])
    cd = ConditionalDensity(bandwidth=[0.4, 0.5]).fit(X[:, :1], ys["c"])
    Qx = np.linspace(-2, 2, 7)[:, None]
    np.testing.assert_array_equal(reg.predict(Qx), cd.predict_quantile(Qx, 0.8))
    again = pickle.loads(pickle.dumps(cd))
    np.testing.assert_array_equal(again.score_samples(Qx, Qx[:, 0]),
                                  cd.score_samples(Qx, Qx[:, 0]))
    with pytest.raises(NadarayaError, match="quantile must be"):
        ConditionalQuantileRegressor(1.5).fit(X[:, :1], ys["c"])
