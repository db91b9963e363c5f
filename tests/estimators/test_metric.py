"""MetricKernelRegressor (MLKR): the objective against metric-learn and a double loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.utils.estimator_checks import parametrize_with_checks

from nadaraya import NadarayaError
from nadaraya.estimators import MetricKernelRegressor
from nadaraya.estimators.metric import loo_squared_error


def _naive_loo(Z: np.ndarray, y: np.ndarray, Lq: np.ndarray, Lk: np.ndarray) -> float:
    q, k = Z @ Lq.T, Z @ Lk.T
    total = 0.0
    for i in range(len(Z)):
        w = np.array([np.exp(-0.5 * np.sum((q[i] - k[j]) ** 2)) if j != i else 0.0
                      for j in range(len(Z))])
        total += (y[i] - w @ y / w.sum()) ** 2
    return total / len(Z)


def test_objective_is_the_leave_one_out_error(rng):
    Z, y = rng.standard_normal((30, 4)), rng.standard_normal(30)
    Lq, Lk = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    got = loo_squared_error(torch.as_tensor(Z), torch.as_tensor(y[:, None]), torch.as_tensor(Lq),
                            torch.as_tensor(Lk))
    assert float(got) == pytest.approx(_naive_loo(Z, y, Lq, Lk), rel=1e-12)


def test_objective_and_gradient_equal_metric_learn(rng):
    mlkr = pytest.importorskip("metric_learn.mlkr")
    X, y = rng.standard_normal((40, 5)), rng.standard_normal(40)
    A = rng.standard_normal((3, 5)) * 0.5
    peer = mlkr.MLKR()
    peer.n_iter_ = 1
    cost, grad = peer._loss(A.ravel(), X, y)
    # metric-learn's kernel is exp(-||A x - A x'||^2): ours with L = sqrt(2) A
    L = torch.as_tensor(np.sqrt(2) * A).requires_grad_()
    ours = loo_squared_error(torch.as_tensor(X), torch.as_tensor(y[:, None]), L) * len(X)
    ours.backward()
    assert ours.item() == pytest.approx(cost, rel=1e-10)
    np.testing.assert_allclose(np.sqrt(2) * L.grad.numpy().ravel(), grad, rtol=1e-8, atol=1e-10)


def _friedman(n: int = 150) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n, n_features=5, noise=0.5, random_state=0)
    return (X - X.mean(0)) / X.std(0), y


def _gradient_norm(X: np.ndarray, y: np.ndarray, L: np.ndarray) -> float:
    Lt = torch.as_tensor(L).requires_grad_()
    loo_squared_error(torch.as_tensor(X), torch.as_tensor(y[:, None]), Lt).backward()
    return float(Lt.grad.norm())


def test_fit_without_early_stopping_reaches_a_stationary_point():
    X, y = _friedman()
    L0 = 0.7 * np.eye(5)
    model = MetricKernelRegressor(init=L0, early_stopping=False, standardize=False, tol=0,
                                  max_iter=500).fit(X, y)
    assert model.n_steps_ < 500
    assert _gradient_norm(X, y, model.components_) < 1e-6 * _gradient_norm(X, y, L0)


def _adapt_metric_learn(monkeypatch: pytest.MonkeyPatch) -> None:
    """metric-learn 0.7 passes ``force_all_finite``, renamed in scikit-learn 1.6."""
    import inspect

    import sklearn.utils.validation as validation
    from metric_learn import _util

    if "force_all_finite" in inspect.signature(validation.check_array).parameters:
        return
    def adapt(fn):
        def call(*args, **kwargs):
            if "force_all_finite" in kwargs:
                kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
            return fn(*args, **kwargs)
        return call

    for name in ("check_X_y", "check_array"):
        monkeypatch.setattr(_util, name, adapt(getattr(validation, name)))


def test_fit_finds_metric_learns_minimum_from_the_same_start(monkeypatch):
    metric_learn = pytest.importorskip("metric_learn")
    _adapt_metric_learn(monkeypatch)
    X, y = _friedman()
    A0 = 0.5 * np.eye(5)
    peer = metric_learn.MLKR(init=A0, max_iter=500, tol=1e-12).fit(X, y)
    peer_loss = peer._loss(peer.components_.ravel(), X, y)[0] / len(X)
    # metric-learn's kernel is exp(-||A x - A x'||^2): ours with L = sqrt(2) A
    model = MetricKernelRegressor(init=np.sqrt(2) * A0, early_stopping=False,
                                  standardize=False, tol=0, max_iter=500).fit(X, y)
    assert model.loss_ == pytest.approx(peer_loss, rel=1e-8)
    # the map is defined up to a rotation; the metric L^T L = 2 A^T A is not
    L, A = model.components_, peer.components_
    np.testing.assert_allclose(L.T @ L, 2 * A.T @ A, atol=1e-4 * np.abs(L.T @ L).max())


def test_fit_lowers_the_objective_and_finds_the_relevant_features(rng):
    X = rng.uniform(-1, 1, (100, 4))
    y = np.sin(3 * X[:, 0]) + 0.05 * rng.standard_normal(100)
    model = MetricKernelRegressor(max_iter=20, early_stopping=False).fit(X, y)
    Z = (X - X.mean(0)) / X.std(0)
    L0 = model._initial(Z, y[:, None], 4)
    start = _naive_loo(Z, y, L0, L0)
    assert model.loss_ < start
    assert model.loss_ == pytest.approx(_naive_loo(Z, y, model.components_, model.components_),
                                        rel=1e-8)
    weight = np.linalg.norm(model.components_, axis=0)
    assert weight[0] > 2 * weight[1:].max()
    assert model.transform(X).shape == (100, 4)
    assert model.score(X, y) > 0.9


def test_early_stopping_keeps_the_best_held_out_map(rng):
    X = rng.standard_normal((120, 6))
    y = X[:, 0] + rng.standard_normal(120)  # noisy: the full metric overfits
    model = MetricKernelRegressor(max_iter=40, n_iter_no_change=3, refit=False).fit(X, y)
    assert model.validation_error_ is not None
    rows = np.sort(np.random.default_rng(0).permutation(120)[:24])
    fit = np.setdiff1d(np.arange(120), rows)
    Z = (X - X.mean(0)) / X.std(0)
    q, k = Z[rows] @ model.components_.T, Z[fit] @ model.components_.T
    w = np.exp(-0.5 * ((q[:, None] - k[None]) ** 2).sum(-1))
    pred = w @ y[fit] / w.sum(1)
    assert model.validation_error_ == pytest.approx(np.mean((pred - y[rows]) ** 2), rel=1e-8)
    refit = MetricKernelRegressor(max_iter=40, n_iter_no_change=3).fit(X, y)
    assert refit.n_steps_ == model.n_steps_
    assert not np.allclose(refit.components_, model.components_)


def test_untied_maps_and_components(rng):
    X, y = rng.standard_normal((60, 3)), rng.standard_normal(60)
    model = MetricKernelRegressor(n_components=2, tie=False, max_iter=5).fit(X, y)
    assert model.components_.shape == model.key_components_.shape == (2, 3)
    assert not np.allclose(model.components_, model.key_components_)
    assert model.predict(X[:5]).shape == (5,)


def test_bad_parameters(rng):
    X, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    with pytest.raises(NadarayaError, match="n_components"):
        MetricKernelRegressor(n_components=0).fit(X, y)
    with pytest.raises(NadarayaError, match="init must be one of"):
        MetricKernelRegressor(init="random").fit(X, y)
    with pytest.raises(NadarayaError, match=r"shape \(n_components, n_features\)"):
        MetricKernelRegressor(init=np.eye(2)).fit(X, y)
    with pytest.raises(NadarayaError, match="validation_fraction"):
        MetricKernelRegressor(validation_fraction=1.5).fit(X, y)
    with pytest.raises(NadarayaError, match="1 sample"):
        MetricKernelRegressor().fit(X[:1], y[:1])


@parametrize_with_checks([MetricKernelRegressor(max_iter=3)])
def test_scikit_learn_contract(estimator, check):
    check(estimator)
