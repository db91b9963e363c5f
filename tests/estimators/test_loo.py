"""Leave-one-out, the smoother matrix and its diagonal against explicit refits."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor


def _data(rng: np.random.Generator, n: int = 30, d: int = 1) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, d))
    return X, 2 * np.sin(X[:, 0]) + 0.5 * rng.normal(size=n)


def _refit_loo(make, X: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """y_i - yhat_{-i}(x_i), refitting without row i each time."""
    out = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        sw = None if w is None else w[keep]
        out[i] = y[i] - make().fit(X[keep], y[keep], sample_weight=sw).predict(X[i:i + 1])[0]
    return out


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
def test_nw_loo_residuals_from_diagonal(rng: np.random.Generator, kernel: str) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor(kernel, bandwidth=1.5).fit(X, y)
    shortcut = (y - model.predict(X)) / (1 - model.smoother_diagonal())
    expected = _refit_loo(lambda: NadarayaWatsonRegressor(kernel, bandwidth=1.5), X, y)
    np.testing.assert_allclose(shortcut, expected, rtol=1e-9, atol=1e-12)
    assert model.cv_score_ == pytest.approx(np.mean(expected**2), rel=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
def test_local_polynomial_loo_residuals_from_diagonal(rng: np.random.Generator,
                                                      degree: int) -> None:
    X, y = _data(rng, 40)
    model = LocalPolynomialRegressor(degree=degree, bandwidth=0.8).fit(X, y)
    shortcut = (y - model.predict(X)) / (1 - model.smoother_diagonal())
    expected = _refit_loo(lambda: LocalPolynomialRegressor(degree=degree, bandwidth=0.8), X, y)
    np.testing.assert_allclose(shortcut, expected, rtol=1e-7, atol=1e-9)
    assert model.cv_score_ == pytest.approx(np.mean(expected**2), rel=1e-9)


def test_multivariate_cv_score_is_mean_refit_error(rng: np.random.Generator) -> None:
    X = rng.normal(size=(35, 2))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.2 * rng.normal(size=35)
    h = np.array([0.7, 1.1])
    for make in (lambda: NadarayaWatsonRegressor(bandwidth=h),
                 lambda: LocalPolynomialRegressor(bandwidth=h)):
        expected = _refit_loo(make, X, y)
        assert make().fit(X, y).cv_score_ == pytest.approx(np.mean(expected**2), rel=1e-9)


@pytest.mark.parametrize("make", [lambda: NadarayaWatsonRegressor(bandwidth=0.9),
                                  lambda: LocalPolynomialRegressor(bandwidth=0.9)])
def test_integer_weights_are_repeated_rows(rng: np.random.Generator, make) -> None:
    X, y = _data(rng, 25)
    w = rng.integers(0, 4, 25)
    weighted = make().fit(X, y, sample_weight=w)
    repeated = make().fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    Xq = np.linspace(0, 6, 13)[:, None]
    np.testing.assert_allclose(weighted.predict(Xq), repeated.predict(Xq), rtol=1e-10)
    assert weighted.cv_score_ == pytest.approx(repeated.cv_score_, rel=1e-10)
    assert weighted.effective_dof_ == pytest.approx(repeated.effective_dof_, rel=1e-10)


@pytest.mark.parametrize("make", [lambda: NadarayaWatsonRegressor(bandwidth=0.6),
                                  lambda: LocalPolynomialRegressor(bandwidth=0.6),
                                  lambda: LocalPolynomialRegressor(degree=2, bandwidth=0.9)])
def test_smoother_matrix_reproduces_predictions(rng: np.random.Generator, make) -> None:
    X, y = _data(rng, 40)
    w = rng.uniform(0.5, 2.0, 40)
    model = make().fit(X, y, sample_weight=w)
    S = model.smoother_matrix()
    np.testing.assert_allclose(S @ y, model.predict(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(S.sum(axis=1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(np.diag(S), model.smoother_diagonal(), rtol=1e-9, atol=1e-14)
    assert model.effective_dof_ == pytest.approx(np.trace(S), rel=1e-9)
    Xq = np.linspace(-0.5, 6.5, 17)[:, None]
    np.testing.assert_allclose(model.smoother_matrix(Xq) @ y, model.predict(Xq), rtol=1e-9,
                               atol=1e-12)


def test_classifier_smoother_matrix_gives_probabilities(rng: np.random.Generator) -> None:
    X = rng.normal(size=(30, 2))
    y = rng.integers(0, 3, 30)
    model = KernelClassifier(bandwidth=0.7).fit(X, y)
    Xq = rng.normal(size=(6, 2))
    np.testing.assert_allclose(model.smoother_matrix(Xq) @ np.eye(3)[y],
                               model.predict_proba(Xq), rtol=1e-12)
    assert model.effective_dof_ == pytest.approx(np.trace(model.smoother_matrix()), rel=1e-12)


def test_effective_dof_limits(rng: np.random.Generator) -> None:
    X, y = _data(rng, 30)
    # a tiny bandwidth interpolates (dof = n), an infinite one fits the mean (dof = 1)
    assert NadarayaWatsonRegressor(bandwidth=1e-4).fit(X, y).effective_dof_ == \
        pytest.approx(30, rel=1e-9)
    assert NadarayaWatsonRegressor(bandwidth=np.inf).fit(X, y).effective_dof_ == \
        pytest.approx(1, rel=1e-12)
    assert LocalPolynomialRegressor(bandwidth=np.inf).fit(X, y).effective_dof_ == \
        pytest.approx(2, rel=1e-9)
