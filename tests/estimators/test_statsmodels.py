"""The regressors against statsmodels' KernelReg (local constant and local linear).

statsmodels evaluates the product Gaussian kernel point by point with plain
numpy and solves the local-linear normal equations with a pseudo-inverse; its
``bw="cv_ls"`` minimises the leave-one-out criterion with Nelder-Mead from
``1.06 sd n^(-1/(d+4))``, to about 1e-4 in the bandwidth.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg

ESTIMATORS = {"lc": NadarayaWatsonRegressor, "ll": LocalPolynomialRegressor}


def _data_1d(rng: np.random.Generator, n: int = 80) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(0, 6, (n, 1))
    return x, 2 * np.sin(x[:, 0]) + rng.normal(size=n)


def _data_3d(rng: np.random.Generator, n: int = 80) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - np.cos(X[:, 2]) + 0.3 * rng.normal(size=n)
    return X, y


def _statsmodels(X: np.ndarray, y: np.ndarray, reg: str, bw: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KernelReg(y, X, "c" * X.shape[1], reg_type=reg, bw=bw)


@pytest.mark.parametrize("reg", ["lc", "ll"])
@pytest.mark.parametrize("dim", [1, 3])
def test_fixed_bandwidth_fitted_values(rng: np.random.Generator, reg: str, dim: int) -> None:
    X, y = _data_1d(rng) if dim == 1 else _data_3d(rng)
    bw = [0.4] if dim == 1 else [0.5, 0.7, 0.9]
    lo, hi = X.min(0) - 0.3, X.max(0) + 0.3
    Xq = rng.uniform(lo, hi, (40, dim))
    expected = _statsmodels(X, y, reg, bw).fit(Xq)[0]
    ours = ESTIMATORS[reg](bandwidth=np.array(bw)).fit(X, y).predict(Xq)
    np.testing.assert_allclose(ours, expected, rtol=1e-8, atol=0)


@pytest.mark.parametrize("reg", ["lc", "ll"])
def test_fixed_bandwidth_at_training_points(rng: np.random.Generator, reg: str) -> None:
    X, y = _data_1d(rng, 60)
    expected = _statsmodels(X, y, reg, [0.3]).fit()[0]
    ours = ESTIMATORS[reg](bandwidth=0.3).fit(X, y).predict(X)
    np.testing.assert_allclose(ours, expected, rtol=1e-8, atol=0)


@pytest.mark.parametrize("reg", ["lc", "ll"])
def test_cv_bandwidth_1d(rng: np.random.Generator, reg: str) -> None:
    X, y = _data_1d(rng, 100)
    sm = _statsmodels(X, y, reg, "cv_ls")
    model = ESTIMATORS[reg]().fit(X, y)
    assert model.bandwidth_ == pytest.approx(abs(float(sm.bw[0])), rel=1e-3)
    # the criterion itself agrees with statsmodels' leave-one-out function
    ours = model.cv_score_
    theirs = float(np.ravel(sm.cv_loo(np.array([model.bandwidth_]), sm.est[reg]))[0])
    assert ours == pytest.approx(theirs, rel=1e-10)


@pytest.mark.parametrize("seed", [0, 3])
def test_cv_bandwidth_multivariate(seed: int) -> None:
    # data whose criterion has one basin, so both searches find the same minimum
    rng = np.random.default_rng(seed)
    n, d = 60, 2 + seed % 2
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + (X[:, 2] if d == 3 else 0) \
        + 0.3 * rng.normal(size=n)
    sm = _statsmodels(X, y, "lc", "cv_ls")
    model = NadarayaWatsonRegressor().fit(X, y)
    np.testing.assert_allclose(model.bandwidth_, np.abs(sm.bw), rtol=1e-3)
