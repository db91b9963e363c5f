"""Standard errors of ``level_effects``: asymptotic (shared-data delta method) and bootstrap.

Oracles: the smoother rows written out here (a Gaussian times the
Aitchison-Aitken kernel; Nadaraya-Watson and local linear by weighted least
squares), with the HC2 residuals ``e_i = r_i / sqrt(1 - S_ii)`` and
``Var d(x) = sum_i (S_ai - S_bi)^2 e_i^2``; the wild bootstrap's spread,
whose variance given the data is that sum; and the coverage of the interval of
a known level effect (a local linear fit of a linear curve with ``lambda =
0`` is unbiased, so the interval covers the effect itself).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtri

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def _data(rng: np.random.Generator, n: int = 90) -> tuple[np.ndarray, np.ndarray]:
    X = np.c_[rng.uniform(0, 3, n), rng.integers(0, 3, n)]
    y = np.sin(2 * X[:, 0]) + np.array([0.0, 1.0, -0.5])[X[:, 1].astype(int)]
    return X, y + (0.1 + 0.2 * X[:, 0]) * rng.normal(size=n)


def _rows(X: np.ndarray, Q: np.ndarray, h: float, lam: float, degree: int,
          w: np.ndarray) -> np.ndarray:
    """Smoother rows ``(m, n)`` at the queries ``Q``, written out."""
    out = []
    for q in Q:
        k = np.exp(-0.5 * ((X[:, 0] - q[0]) / h) ** 2)
        k = k * np.where(X[:, 1] == q[1], 1 - lam, lam / 2) * w
        if degree == 0:
            out.append(k / k.sum())
        else:
            B = np.c_[np.ones(len(k)), X[:, 0] - q[0]]
            out.append(np.linalg.solve(B.T @ (k[:, None] * B), (k[:, None] * B).T)[0])
    return np.array(out)


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
@pytest.mark.parametrize("weighted", [False, True])
def test_asymptotic_std_equals_the_naive_formula(rng: np.random.Generator, cls: type,
                                                  weighted: bool) -> None:
    X, y = _data(rng)
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else np.ones(len(y))
    h, lam = 0.4, 0.2
    model = cls(bandwidth=[h, lam], var_types="cu").fit(X, y, sample_weight=w if weighted
                                                        else None)
    Q = np.c_[rng.uniform(0, 3, 7), rng.integers(0, 3, 7)]
    levels, eff, std = model.level_effects(Q, 1, base=1.0, return_std=True)
    assert levels.tolist() == [0.0, 1.0, 2.0]
    S = _rows(X, X, h, lam, cls is LocalPolynomialRegressor, w)
    e2 = ((y - S @ y) / np.sqrt(1 - np.diag(S))) ** 2
    Sb = _rows(X, np.c_[Q[:, 0], np.full(7, 1.0)], h, lam, cls is LocalPolynomialRegressor, w)
    for i, c in enumerate(levels):
        Sa = _rows(X, np.c_[Q[:, 0], np.full(7, c)], h, lam, cls is LocalPolynomialRegressor, w)
        np.testing.assert_allclose(eff[:, i], (Sa - Sb) @ y, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(std[:, i], np.sqrt((Sa - Sb) ** 2 @ e2), rtol=1e-10,
                                   atol=1e-14)
        # the covariance of the two fits matters: the naive sum of variances differs
        if c != 1.0:
            assert not np.allclose(std[:, i] ** 2, Sa**2 @ e2 + Sb**2 @ e2, rtol=1e-3)
    assert np.all(std[:, 1] == 0)


def test_several_outputs_and_dataframes(rng: np.random.Generator) -> None:
    X, y = _data(rng, 60)
    Y = np.c_[y, 2 * y + rng.normal(size=60)]
    model = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3], var_types="cu").fit(X, Y)
    levels, eff, std = model.level_effects(X[:4], 1, return_std=True)
    assert eff.shape == std.shape == (4, 3, 2)
    for k in range(2):
        single = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3], var_types="cu").fit(X, Y[:, k])
        np.testing.assert_allclose(single.level_effects(X[:4], 1, return_std=True)[2],
                                   std[:, :, k], rtol=1e-12)
    shops = pd.Categorical(np.array(["a", "b", "c"])[X[:, 1].astype(int)])
    df = pd.DataFrame({"x": X[:, 0], "shop": shops})
    framed = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3]).fit(df, y)
    levels, _, std = framed.level_effects(df.iloc[:4], "shop", base="b", return_std=True)
    plain = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3], var_types="cu").fit(X, y)
    np.testing.assert_allclose(std, plain.level_effects(X[:4], 1, base=1.0,
                                                        return_std=True)[2], rtol=1e-12)
    assert levels.tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_bootstrap_std_agrees_with_the_asymptotic_one(rng: np.random.Generator,
                                                      cls: type) -> None:
    X, y = _data(rng, 200)
    model = cls(bandwidth=[0.5, 0.2], var_types="cu").fit(X, y)
    Q = np.c_[np.linspace(0.5, 2.5, 4), np.zeros(4)]
    _, eff, asym = model.level_effects(Q, 1, return_std=True)
    _, eff_b, boot = model.level_effects(Q, 1, return_std=True, method="bootstrap",
                                         n_resamples=2000, random_state=0)
    np.testing.assert_array_equal(eff_b, eff)
    # the bootstrap variance has mean asym^2; its relative error is about 1 / sqrt(2 B)
    np.testing.assert_allclose(boot[:, 1:], asym[:, 1:], rtol=0.1)
    assert np.all(boot[:, 0] == 0)
    again = model.level_effects(Q, 1, return_std=True, method="bootstrap", n_resamples=2000,
                                random_state=0)[2]
    np.testing.assert_array_equal(again, boot)


@pytest.mark.slow
def test_coverage_of_a_known_level_effect() -> None:
    rng = np.random.default_rng(11)
    n, trials, hits = 150, 400, 0
    z = float(ndtri(0.975))
    for _ in range(trials):
        x = rng.uniform(0, 3, n)
        level = rng.integers(0, 2, n)
        noise = (0.2 + 0.4 * x) * rng.normal(size=n)  # heteroscedastic
        y = 1.0 + 2.0 * x + 0.7 * level + noise
        model = LocalPolynomialRegressor(bandwidth=[0.6, 0.0], var_types="cu")
        model.fit(np.c_[x, level], y)
        _, eff, se = model.level_effects([[1.5, 0.0]], 1, return_std=True)
        hits += abs(eff[0, 1] - 0.7) <= z * se[0, 1]
    # 0.95 within about 3.5 binomial standard errors (0.011 at 400 trials)
    assert 0.91 <= hits / trials <= 0.99


def test_no_residual_degrees_of_freedom_gives_nan() -> None:
    X = np.array([[0.0, 0.0], [1.0, 1.0]])
    model = NadarayaWatsonRegressor(bandwidth=[1.0, 0.0], var_types="cu").fit(X, [1.0, 2.0])
    _, eff, std = model.level_effects(X, 1, return_std=True)
    assert np.isfinite(eff).all() and np.isnan(std[:, 1]).all()


def test_hostile_inputs(rng: np.random.Generator) -> None:
    X, y = _data(rng, 40)
    df = pd.DataFrame({"x": X[:, 0], "shop": pd.Categorical(
        np.array(["a", "b", "c"])[X[:, 1].astype(int)], categories=["a", "b", "c", "d"])})
    model = NadarayaWatsonRegressor(bandwidth=[0.5, 0.2]).fit(df, y)
    # a declared category without training rows, an unknown level name, an unknown column
    with pytest.raises(NadarayaError, match="base='d'"):
        model.level_effects(df.iloc[:3], "shop", base="d", return_std=True)
    with pytest.raises(NadarayaError, match="base='zzz'"):
        model.level_effects(df.iloc[:3], "shop", base="zzz")
    with pytest.raises(NadarayaError, match="feature must be"):
        model.level_effects(df.iloc[:3], "shops")
    with pytest.raises(NadarayaError, match="method"):
        model.level_effects(df.iloc[:3], "shop", return_std=True, method="delta")
    with pytest.raises(NadarayaError, match="n_resamples"):
        model.level_effects(df.iloc[:3], "shop", return_std=True, method="bootstrap",
                            n_resamples=1)
    with pytest.raises(NadarayaError, match="NaN"):
        model.level_effects(df.iloc[:3].assign(x=np.nan), "shop", return_std=True)
    # one level among the training rows
    one = NadarayaWatsonRegressor(bandwidth=[0.5, 0.2], var_types="cu")
    one.fit(np.c_[X[:, 0], np.zeros(40)], y)
    with pytest.raises(NadarayaError, match="feature 1 has one level"):
        one.level_effects(X[:3], 1, return_std=True)
