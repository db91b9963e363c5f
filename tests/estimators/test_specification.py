"""Härdle-Mammen specification test against the naive formula and simulated size and power."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya._errors import NadarayaError
from nadaraya.estimators import (
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    specification_test,
)

R5 = np.sqrt(5.0)


def _mammen(seed: int, shape: tuple[int, int]) -> np.ndarray:
    u = np.random.RandomState(seed).random_sample(shape)
    return np.where(u < (R5 + 1) / (2 * R5), -(R5 - 1) / 2, (R5 + 1) / 2)


def _data(rng: np.random.Generator, n: int = 50, curve: float = 0.0
          ) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(0, 1, (n, 1))
    noise = (0.1 + 0.4 * x[:, 0]) * rng.normal(size=n)  # heteroscedastic
    return x, 1 + 2 * x[:, 0] + curve * np.sin(2 * np.pi * x[:, 0]) + noise


def _naive(S: np.ndarray, H: np.ndarray, y: np.ndarray, scale: float) -> float:
    r = S @ (y - H @ y)
    return float(scale * np.sum(r**2))


@pytest.mark.parametrize("make", [lambda: NadarayaWatsonRegressor(bandwidth=0.1),
                                  lambda: LocalPolynomialRegressor(bandwidth=0.15)])
def test_statistic_and_null_distribution_from_the_smoother_matrix(rng: np.random.Generator,
                                                                  make) -> None:
    x, y = _data(rng, curve=0.3)
    model = make().fit(x, y)
    n, B = len(y), 40
    S = model.smoother_matrix()
    Z = np.c_[np.ones(n), x]
    H = Z @ np.linalg.solve(Z.T @ Z, Z.T)
    scale = np.sqrt(model.bandwidth_)
    res = specification_test(model, n_resamples=B, random_state=9)
    assert res.statistic == pytest.approx(_naive(S, H, y, scale), rel=1e-9)
    f0 = H @ y
    Ystar = f0[:, None] + (y - f0)[:, None] * _mammen(9, (n, B))
    null = [_naive(S, H, Ystar[:, b], scale) for b in range(B)]
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-8)
    assert res.pvalue == pytest.approx((1 + np.sum(np.asarray(null) >= res.statistic)) / 41)
    assert res.bootstrap == "wild-mammen" and res.details == {"parametric": "linear"}


def test_design_matrix_callable_and_constant_agree(rng: np.random.Generator) -> None:
    x, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=0.1).fit(x, y)
    Z = np.c_[np.ones(len(y)), x, x**2]

    def quadratic(X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.polyval(np.polyfit(X[:, 0], t, 2), X[:, 0])

    a = specification_test(model, Z, n_resamples=30, random_state=1)
    b = specification_test(model, quadratic, n_resamples=30, random_state=1)
    assert a.statistic == pytest.approx(b.statistic, rel=1e-8)
    np.testing.assert_allclose(a.null_distribution, b.null_distribution, rtol=1e-7)
    assert b.details == {"parametric": "quadratic"}
    c = specification_test(model, "constant", n_resamples=30, random_state=1)
    d = specification_test(model, np.ones(len(y)), n_resamples=30, random_state=1)
    assert c.statistic == pytest.approx(d.statistic, rel=1e-10)
    # a rank-deficient design is its column space
    e = specification_test(model, np.c_[Z, 2 * Z[:, 1]], n_resamples=30, random_state=1)
    assert e.statistic == pytest.approx(a.statistic, rel=1e-8)


def test_linear_with_a_categorical_feature_uses_indicators(rng: np.random.Generator) -> None:
    n = 60
    X = np.c_[rng.uniform(0, 1, n), rng.integers(0, 3, n)]
    y = X[:, 0] + 0.5 * (X[:, 1] == 2) + 0.2 * rng.normal(size=n)
    model = LocalPolynomialRegressor(bandwidth=[0.2, 0.3], var_types="cu").fit(X, y)
    Z = np.c_[np.ones(n), X[:, 0], X[:, 1] == 1, X[:, 1] == 2].astype(float)
    S = model.smoother_matrix()
    H = Z @ np.linalg.pinv(Z)
    res = specification_test(model, n_resamples=20, random_state=0, multiplier="rademacher")
    assert res.statistic == pytest.approx(_naive(S, H, y, np.sqrt(0.2)), rel=1e-8)
    assert res.bootstrap == "wild-rademacher"


def _rejections(reps: int, seed: int, curve: float) -> float:
    rng = np.random.default_rng(seed)
    rejected = 0
    for r in range(reps):
        x, y = _data(rng, 80, curve)
        model = NadarayaWatsonRegressor(bandwidth=0.08).fit(x, y)
        rejected += specification_test(model, n_resamples=99, random_state=r).pvalue <= 0.05
    return rejected / reps


@pytest.mark.slow
def test_size_and_power() -> None:
    # 300 linear data sets with heteroscedastic noise: 1.3% standard error at 5%
    size = _rejections(300, 0, curve=0.0)
    assert 0.05 - 3 * 0.0126 < size < 0.05 + 3 * 0.0126
    assert _rejections(100, 1, curve=0.4) > 0.8


def test_hostile_inputs(rng: np.random.Generator) -> None:
    x, y = _data(rng)
    model = NadarayaWatsonRegressor(bandwidth=0.1).fit(x, y)
    with pytest.raises(NadarayaError, match="parametric"):
        specification_test(model, "cubic")
    for bad in (np.ones((49, 2)), np.ones((50, 0)), np.full((50, 1), np.nan), np.ones((50, 2, 2))):
        with pytest.raises(NadarayaError, match="design matrix"):
            specification_test(model, bad)
    with pytest.raises(NadarayaError, match="callable must return 50"):
        specification_test(model, lambda X, t: t[:10])
    with pytest.raises(NadarayaError, match="non-finite"):
        specification_test(model, lambda X, t: np.full(50, np.nan))
    for n_resamples in (0, -3, 2.0, False):
        with pytest.raises(NadarayaError, match="n_resamples"):
            specification_test(model, n_resamples=n_resamples)
    with pytest.raises(NadarayaError, match="multiplier"):
        specification_test(model, multiplier="normal")
    with pytest.raises(Exception, match="not fitted"):
        specification_test(NadarayaWatsonRegressor(), "linear")
    with pytest.raises(NadarayaError, match="sample_weight"):
        specification_test(NadarayaWatsonRegressor(bandwidth=0.1).fit(
            x, y, sample_weight=np.ones(50)))
