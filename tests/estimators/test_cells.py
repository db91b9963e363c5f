"""The mixed-data CV criterion summed by cells of levels equals the product-kernel pass."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    _base,
)
from nadaraya.estimators._cells import MAX_CELLS, cell_objective


def _data(n: int = 120, seed: int = 0, p: int = 1):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(size=n), rng.integers(0, 3, n), rng.uniform(size=n),
                         rng.integers(0, 4, n)]).astype(float)
    Y = np.sin(4 * X[:, :1]) + (X[:, 1:2] == 1) - 0.2 * X[:, 3:4] + rng.normal(0, 0.3, (n, p))
    return X, (Y[:, 0] if p == 1 else Y)


def _cells_score(model, h) -> float:
    """The cell-summed criterion at ``h``, in the targets' units."""
    objective = cell_objective(model, "cv", model.X_fit_, model._y_train)
    assert objective is not None
    return objective(np.asarray(h, float)) * 2.0 ** (2 * model._y_exp)


@pytest.mark.parametrize("types, ukernel, okernel, h", [
    ("cucu", "aitchison-aitken", "li-racine", [0.1, 0.2, 0.3, 0.4]),
    ("cucu", "aitchison-aitken", "li-racine", [0.05, 0.0, np.inf, 0.75]),  # lambda 0, h inf
    ("cucu", "li-racine", "li-racine", [0.2, 1.0, 0.3, 1.0]),  # lambdas smoothing out
    ("cuco", "aitchison-aitken", "li-racine", [0.1, 2 / 3, 0.2, 0.5]),
    ("cuco", "aitchison-aitken", "wang-van-ryzin", [0.1, 0.3, 0.2, 0.6]),
    ("cuco", "li-racine", "wang-van-ryzin", [np.inf, 0.3, np.inf, 0.0]),  # no continuous kernel
    ("cucu", "aitchison-aitken", "li-racine", [1e-4, 0.2, 1e-4, 0.2]),  # far points underflow
])
@pytest.mark.parametrize("p", [1, 2])
def test_equals_the_product_kernel_pass(types, ukernel, okernel, h, p) -> None:
    X, y = _data(p=p)
    model = NadarayaWatsonRegressor(bandwidth=np.array(h), var_types=types, ukernel=ukernel,
                                    okernel=okernel).fit(X, y)
    want = model.cv_score_  # the engine's leave-one-out pass with the product kernel
    got = _cells_score(model, h)
    if np.isfinite(want):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    else:
        assert not np.isfinite(got)


def test_naive_leave_one_out() -> None:
    """The criterion against a loop written from the formula (Gaussian x Aitchison-Aitken)."""
    X, y = _data(n=60, seed=3)
    h = np.array([0.15, 0.3, 0.25, 0.5])
    model = NadarayaWatsonRegressor(bandwidth=h, var_types="cucu").fit(X, y)
    err = []
    for i in range(len(y)):
        w = (np.exp(-0.5 * ((X[:, 0] - X[i, 0]) / h[0]) ** 2)
             * np.exp(-0.5 * ((X[:, 2] - X[i, 2]) / h[2]) ** 2)
             * np.where(X[:, 1] == X[i, 1], 1 - h[1], h[1] / 2)
             * np.where(X[:, 3] == X[i, 3], 1 - h[3], h[3] / 3))
        w[i] = 0.0
        err.append((y[i] - w @ y / w.sum()) ** 2)
    np.testing.assert_allclose(_cells_score(model, h), np.mean(err), rtol=1e-12)


def test_where_it_applies() -> None:
    X, y = _data()
    h = np.array([0.1, 0.2, 0.3, 0.4])
    nw = NadarayaWatsonRegressor(bandwidth=h, var_types="cucu").fit(X, y)
    assert cell_objective(nw, "cv", nw.X_fit_, nw._y_train) is not None
    assert cell_objective(nw, "gcv", nw.X_fit_, nw._y_train) is None
    weighted = NadarayaWatsonRegressor(bandwidth=h, var_types="cucu").fit(X, y, np.ones(len(y)))
    assert cell_objective(weighted, "cv", weighted.X_fit_, weighted._y_train) is None
    ll = LocalPolynomialRegressor(bandwidth=h, var_types="cucu").fit(X, y)
    assert cell_objective(ll, "cv", ll.X_fit_, ll._y_train) is None
    many = X.copy()
    many[:, 1] = np.arange(len(y)) % (MAX_CELLS + 1)  # more cells than the limit
    wide = NadarayaWatsonRegressor(bandwidth=h, var_types="cucu").fit(many, y)
    assert cell_objective(wide, "cv", wide.X_fit_, wide._y_train) is None
    clf = KernelClassifier(bandwidth=h, var_types="cucu").fit(X, y > 0)
    assert cell_objective(clf, "cv", clf.X_fit_, clf._y_train) is not None


def test_search_finds_the_same_bandwidth(monkeypatch) -> None:
    X, y = _data(n=80, seed=5)
    fast = NadarayaWatsonRegressor(var_types="cucu").fit(X, y)
    monkeypatch.setattr(_base, "cell_objective", lambda *args: None)
    plain = NadarayaWatsonRegressor(var_types="cucu").fit(X, y)
    np.testing.assert_allclose(fast.bandwidth_, plain.bandwidth_, rtol=1e-6)
    np.testing.assert_allclose(fast.cv_score_, plain.cv_score_, rtol=1e-10)
