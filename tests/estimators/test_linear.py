"""LinearSmoother against scikit-learn LinearRegression and statsmodels OLS."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.linear_model import LinearRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from nadaraya.estimators.linear import LinearSmoother

TOL = 1e-10


def _design(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "full":
        X = rng.normal(size=(60, 5))
    elif kind == "rank-deficient":
        X = rng.normal(size=(60, 5))
        X[:, 3] = 2 * X[:, 0] - X[:, 1]
        X[:, 4] = X[:, 2]
    else:  # n < d
        X = rng.normal(size=(9, 20))
    y = X @ rng.normal(size=X.shape[1]) + 1.5 + rng.normal(size=len(X))
    return X, y


KINDS = ["full", "rank-deficient", "n<d"]


def _fit(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return LinearSmoother(**kw).fit(X, y)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_predictions_equal_sklearn(rng, kind, fit_intercept):
    X, y = _design(rng, kind)
    ours = _fit(X, y, fit_intercept=fit_intercept)
    ref = LinearRegression(fit_intercept=fit_intercept).fit(X, y)
    Xnew = rng.normal(size=(7, X.shape[1]))
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=TOL)
    np.testing.assert_allclose(ours.predict(Xnew), ref.predict(Xnew), atol=TOL)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=TOL)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=TOL)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_leverages_equal_statsmodels(rng, kind, fit_intercept):
    X, y = _design(rng, kind)
    exog = sm.add_constant(X, has_constant="add") if fit_intercept else X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sm.OLS(y, exog).fit().get_influence().hat_matrix_diag
    ours = _fit(X, y, fit_intercept=fit_intercept)
    np.testing.assert_allclose(ours.leverage_, ref, atol=TOL)
    rank = np.linalg.matrix_rank(exog)
    assert ours.rank_ == rank
    assert ours.effective_dof_ == pytest.approx(rank, abs=1e-9)


def test_leave_one_out_residuals_equal_refits(rng):
    X, y = _design(rng, "full")
    ours = LinearSmoother().fit(X, y)
    loo = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        loo[i] = y[i] - LinearRegression().fit(X[keep], y[keep]).predict(X[i:i + 1])[0]
    np.testing.assert_allclose(ours.loo_residuals_, loo, atol=1e-9)
    assert ours.press_ == pytest.approx(np.sum(loo**2), rel=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sm.OLS(y, sm.add_constant(X)).fit().get_influence()
    np.testing.assert_allclose(ours.press_, np.sum(ref.resid_press**2), rtol=1e-10)
    assert ours.cv_score_ == pytest.approx(np.mean(loo**2), rel=1e-10)


@pytest.mark.parametrize("kind", ["full", "rank-deficient"])
def test_residual_variance_equals_statsmodels_scale(rng, kind):
    X, y = _design(rng, kind)
    ours = LinearSmoother().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sm.OLS(y, sm.add_constant(X, has_constant="add")).fit()
    assert ours.residual_variance_ == pytest.approx(ref.scale, rel=1e-10)


def test_smoother_matrix_is_the_hat_matrix(rng):
    X, y = _design(rng, "rank-deficient")
    ours = LinearSmoother().fit(X, y)
    S = ours.smoother_matrix()
    Z = sm.add_constant(X)
    np.testing.assert_allclose(S, Z @ np.linalg.pinv(Z), atol=TOL)
    np.testing.assert_allclose(np.diag(S), ours.smoother_diagonal(), atol=TOL)
    np.testing.assert_allclose(S.sum(1), 1.0, atol=TOL)
    np.testing.assert_allclose(S @ y, ours.fitted_, atol=TOL)
    Xnew = rng.normal(size=(4, X.shape[1]))
    np.testing.assert_allclose(ours.smoother_matrix(Xnew) @ y, ours.predict(Xnew), atol=TOL)


def test_multi_output_matches_sklearn(rng):
    X = rng.normal(size=(40, 3))
    Y = rng.normal(size=(40, 2))
    ours, ref = LinearSmoother().fit(X, Y), LinearRegression().fit(X, Y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=TOL)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=TOL)
    assert ours.loo_residuals_.shape == Y.shape


def test_leverage_one_warns_and_gives_nan(rng):
    X, y = _design(rng, "n<d")
    with pytest.warns(RuntimeWarning, match="leverage 1"):
        ours = LinearSmoother().fit(X, y)
    assert np.isnan(ours.loo_residuals_).all()
    np.testing.assert_allclose(ours.leverage_, 1.0, atol=TOL)


@parametrize_with_checks([LinearSmoother()])
def test_sklearn_contract(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)
