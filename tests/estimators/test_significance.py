"""Racine's significance test against statsmodels, naive formulas and simulated size and power."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from nadaraya._errors import NadarayaError
from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    significance_test,
)


def _nw_gradient(X: np.ndarray, y: np.ndarray, h: np.ndarray, k: int) -> np.ndarray:
    """Analytic gradient of Gaussian Nadaraya-Watson in feature ``k`` at the data."""
    D = X[:, None, :] - X[None, :, :]  # query minus key
    K = np.exp(-0.5 * ((D / h) ** 2).sum(axis=2))
    dK = -D[:, :, k] / h[k] ** 2 * K
    s, sy = K.sum(1), K @ y
    return ((dK @ y) * s - sy * dK.sum(1)) / s**2


def _null(X: np.ndarray, y: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian NW fit at the data and residuals over ``sqrt(1 - S_jj)``."""
    K = np.exp(-0.5 * ((((X[:, None, :] - X[None, :, :]) / h) ** 2).sum(axis=2)))
    S = K / K.sum(1, keepdims=True)
    return S @ y, (y - S @ y) / np.sqrt(1 - np.diag(S))


def _data(rng: np.random.Generator, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 1, (n, 2))
    return X, np.sin(2 * np.pi * X[:, 0]) + 0.3 * X[:, 1] + 0.3 * rng.normal(size=n)


def test_gradient_statistic_matches_statsmodels() -> None:
    from statsmodels.nonparametric.kernel_regression import KernelReg, TestRegCoefC

    rng = np.random.default_rng(3)
    n, h = 50, 0.08
    x = rng.uniform(0, 1, n)
    y = np.sin(6 * x) + 0.3 * rng.normal(size=n)
    ours = significance_test(NadarayaWatsonRegressor(bandwidth=h).fit(x[:, None], y), 0,
                             n_resamples=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = TestRegCoefC(KernelReg(y, x, "c", reg_type="lc", bw=[h]), [0], nboot=1, rng=0)
    # statsmodels' marginal effect is 2 / n times the gradient: its d_gaussian carries a
    # factor 2 (the derivative of exp(-u^2 / 2) is -u exp(-u^2 / 2)) and B_x is divided by nobs
    assert ours.statistic == pytest.approx(float(sm.test_stat) * n**2 / 4, rel=1e-6)
    assert ours.details == {"features": ["x0"], "statistics": ["gradient"]}


def test_level_difference_statistic_matches_statsmodels() -> None:
    from statsmodels.nonparametric.kernel_regression import KernelReg, TestRegCoefD

    rng = np.random.default_rng(4)
    n = 60
    X = np.c_[rng.uniform(0, 1, n), rng.integers(0, 3, n)]
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    model = NadarayaWatsonRegressor(bandwidth=[0.1, 0.3], var_types="cu").fit(X, y)
    ours = significance_test(model, 1, n_resamples=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = TestRegCoefD(KernelReg(y, X, "cu", reg_type="lc", bw=[0.1, 0.3]), [1], nboot=1,
                          rng=0)
    assert ours.statistic == pytest.approx(float(np.squeeze(sm.test_stat)), rel=1e-10)
    assert ours.details["statistics"] == ["difference"]


def test_group_statistic_and_null_distribution_from_naive_formulas(
        rng: np.random.Generator) -> None:
    X, y = _data(rng)
    h = np.array([0.1, 0.3])
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    g = [np.mean(_nw_gradient(X, y, h, k) ** 2) for k in range(2)]
    one = significance_test(model, [1], n_resamples=30, random_state=7)
    assert one.statistic == pytest.approx(g[1], rel=1e-6)
    both = significance_test(model, ["x0", "x1"], n_resamples=5, random_state=7)
    assert both.statistic == pytest.approx(g[0] + g[1], rel=1e-6)
    # the bootstrap: NW on x0 alone, centred residuals resampled with replacement
    g0, u = _null(X[:, :1], y, h[:1])
    idx = np.random.RandomState(7).randint(0, len(y), size=(len(y), 30))
    Ystar = g0[:, None] + (u - u.mean())[idx]
    null = [np.mean(_nw_gradient(X, Ystar[:, b], h, 1) ** 2) for b in range(30)]
    np.testing.assert_allclose(one.null_distribution, null, rtol=1e-6)
    expected = (1 + np.sum(np.asarray(null) >= one.statistic)) / 31
    assert one.pvalue == pytest.approx(expected)
    # testing every feature: the null fit is the mean, of leverage 1 / n
    idx = np.random.RandomState(7).randint(0, len(y), size=(len(y), 5))
    Ystar = y.mean() + (y - y.mean())[idx] / np.sqrt(1 - 1 / len(y))
    null = [sum(np.mean(_nw_gradient(X, Ystar[:, b], h, k) ** 2) for k in range(2))
            for b in range(5)]
    np.testing.assert_allclose(both.null_distribution, null, rtol=1e-6)


def test_wild_bootstrap_draws(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    h = np.array([0.1, 0.3])
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    g0, u = _null(X[:, :1], y, h[:1])
    r5 = np.sqrt(5.0)
    draw = np.random.RandomState(2).random_sample((len(y), 8))
    V = np.where(draw < (r5 + 1) / (2 * r5), -(r5 - 1) / 2, (r5 + 1) / 2)
    Ystar = g0[:, None] + u[:, None] * V
    null = [np.mean(_nw_gradient(X, Ystar[:, b], h, 1) ** 2) for b in range(8)]
    res = significance_test(model, 1, n_resamples=8, random_state=2, bootstrap="wild")
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-6)
    signs = np.random.RandomState(2).choice(np.array([-1.0, 1.0]), size=(len(y), 8))
    null = [np.mean(_nw_gradient(X, g0 + u * signs[:, b], h, 1) ** 2) for b in range(8)]
    res = significance_test(model, 1, n_resamples=8, random_state=2,
                            bootstrap="wild-rademacher")
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-6)


def test_local_linear_gradient_is_the_derivative_of_the_fitted_curve(
        rng: np.random.Generator) -> None:
    n, h = 40, 0.15
    x = rng.uniform(0, 1, n)
    y = np.sin(6 * x) + 0.2 * rng.normal(size=n)
    model = LocalPolynomialRegressor(bandwidth=h).fit(x[:, None], y)
    # naive local linear in closed form, differentiated by autograd
    q = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    xs, ys = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    d = xs[None, :] - q[:, None]
    K = torch.exp(-0.5 * (d / h) ** 2)
    s0, s1, s2 = K.sum(1), (K * d).sum(1), (K * d * d).sum(1)
    t0, t1 = K @ ys, (K * d) @ ys
    fit = (s2 * t0 - s1 * t1) / (s0 * s2 - s1**2)
    (grad,) = torch.autograd.grad(fit.sum(), q)
    res = significance_test(model, 0, n_resamples=2, random_state=0)
    assert res.statistic == pytest.approx(float(torch.mean(grad**2)), rel=1e-6)


def test_names_from_a_frame_and_repr(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    frame = pd.DataFrame({"dose": X[:, 0], "shop": pd.Categorical(rng.choice(["a", "b"], 40))})
    model = NadarayaWatsonRegressor(bandwidth=[0.1, 0.5]).fit(frame, y)
    res = significance_test(model, ["dose", "shop"], n_resamples=19, random_state=0)
    assert res.details == {"features": ["dose", "shop"], "statistics": ["gradient", "difference"]}
    assert res.null_distribution.shape == (19,) and res.n_resamples == 19
    text = repr(res)
    assert text.startswith("BootstrapTest(test='significance', statistic=")
    assert "pvalue=" in text and "features=['dose', 'shop']" in text
    assert 1 / 20 <= res.pvalue <= 1


def test_scale_of_the_targets(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=[0.1, 0.3])
    a = significance_test(model.fit(X, y), 1, n_resamples=20, random_state=1)
    b = significance_test(model.fit(X, 1e200 * y), 1, n_resamples=20, random_state=1)
    assert b.statistic == pytest.approx(1e400 * a.statistic if np.isfinite(b.statistic)
                                        else np.inf)
    assert b.pvalue == a.pvalue
    c = significance_test(model.fit(X, 1e-100 * y), 1, n_resamples=20, random_state=1)
    assert c.statistic == pytest.approx(1e-200 * a.statistic, rel=1e-9)
    assert c.pvalue == a.pvalue


def _rejections(make, reps: int, seed: int, effect: float, categorical: bool = False,
                n_resamples: int = 99) -> float:
    rng = np.random.default_rng(seed)
    n, rejected = 50, 0
    for r in range(reps):
        x = rng.uniform(0, 1, n)
        z = rng.integers(0, 3, n).astype(float) if categorical else rng.uniform(0, 1, n)
        y = np.sin(2 * np.pi * x) + effect * z + 0.5 * rng.normal(size=n)
        model = make().fit(np.c_[x, z], y)
        res = significance_test(model, 1, n_resamples=n_resamples, random_state=r)
        rejected += res.pvalue <= 0.05
    return rejected / reps


@pytest.mark.slow
def test_size_and_power_continuous() -> None:
    def make() -> NadarayaWatsonRegressor:
        return NadarayaWatsonRegressor(bandwidth=[0.08, 0.25])

    # 300 null data sets: a standard error of 1.3% on the rejection rate at 5%
    size = _rejections(make, 300, 0, effect=0.0)
    assert 0.05 - 3 * 0.0126 < size < 0.05 + 3 * 0.0126
    assert _rejections(make, 100, 1, effect=1.5) > 0.8


@pytest.mark.slow
def test_size_and_power_categorical_local_linear() -> None:
    def make() -> LocalPolynomialRegressor:
        return LocalPolynomialRegressor(bandwidth=[0.1, 0.3], var_types="cu")

    # mixed kernels take the streamed engine: fewer data sets (a standard error of 1.5%)
    # and 39 resamples (an exact 5% test: p <= 0.05 when at most one resample exceeds)
    size = _rejections(make, 200, 2, effect=0.0, categorical=True, n_resamples=39)
    assert 0.05 - 3 * 0.0154 < size < 0.05 + 3 * 0.0154
    assert _rejections(make, 50, 3, effect=0.5, categorical=True, n_resamples=39) > 0.8


def test_hostile_inputs(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=[0.1, 0.3]).fit(X, y)
    for features in (2, -3, "x7", [], [0, 0], True, 1.0, [None]):
        with pytest.raises(NadarayaError, match="features"):
            significance_test(model, features)
    for n_resamples in (0, -1, 1.5, True, None):
        with pytest.raises(NadarayaError, match="n_resamples"):
            significance_test(model, 0, n_resamples=n_resamples)
    with pytest.raises(NadarayaError, match="statistic"):
        significance_test(model, 0, statistic="wald")
    with pytest.raises(NadarayaError, match="statistic='gradient'"):
        mixed = NadarayaWatsonRegressor(bandwidth=[0.1, 0.3], var_types="cu").fit(
            np.c_[X[:, 0], rng.integers(0, 2, 40)], y)
        significance_test(mixed, 1, statistic="gradient")
    with pytest.raises(NadarayaError, match="bootstrap"):
        significance_test(model, 0, bootstrap="pairs")
    with pytest.raises(Exception, match="not fitted"):
        significance_test(NadarayaWatsonRegressor(), 0)
    with pytest.raises(NadarayaError, match="model must be"):
        significance_test(KernelClassifier(bandwidth=0.3).fit(X, y > 0), 0)
    with pytest.raises(NadarayaError, match="one target"):
        significance_test(NadarayaWatsonRegressor(bandwidth=0.3).fit(X, np.c_[y, y]), 0)
    with pytest.raises(NadarayaError, match="sample_weight"):
        significance_test(NadarayaWatsonRegressor(bandwidth=0.3).fit(
            X, y, sample_weight=np.ones(40)), 0)
    from nadaraya.kernels import Gaussian

    with pytest.raises(NadarayaError, match="kernel given by name"):
        significance_test(NadarayaWatsonRegressor(Gaussian(0.3), bandwidth=None).fit(X, y), 0)
