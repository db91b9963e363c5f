"""What ``sample_weight`` means: frequency weights (copies of rows) or analytic (precisions).

Oracles: the leave-one-out score and the residual variance written out
naively from the kernel matrix (Nadaraya-Watson at a fixed bandwidth), the
fit on repeated rows, and the unweighted fit.
"""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya._errors import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def _data(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 6, n))
    y = np.sin(x) + rng.normal(0, 0.4, n)
    w = rng.integers(1, 4, n).astype(float)
    return x[:, None], y, w


def _naive_cv(x: np.ndarray, y: np.ndarray, w: np.ndarray, h: float, left: np.ndarray
              ) -> float:
    """Leave-one-out score of Nadaraya-Watson when leaving row i out leaves it ``left[i]``."""
    K = np.exp(-0.5 * ((x[:, 0][:, None] - x[:, 0][None, :]) / h) ** 2) * w[None, :]
    K[np.diag_indices_from(K)] = left * np.diag(K) / w
    loo = K @ y / K.sum(axis=1)
    return float(w @ (y - loo) ** 2 / w.sum())


def test_frequency_leave_one_out_removes_one_copy() -> None:
    x, y, w = _data()
    model = NadarayaWatsonRegressor(bandwidth=0.4).fit(x, y, sample_weight=w)
    assert model.cv_score_ == pytest.approx(_naive_cv(x, y, w, 0.4, w - 1.0), rel=1e-10)


def test_analytic_leave_one_out_removes_the_row() -> None:
    x, y, w = _data()
    w = w * 0.37
    model = NadarayaWatsonRegressor(bandwidth=0.4, weight_type="analytic").fit(
        x, y, sample_weight=w)
    assert model.cv_score_ == pytest.approx(_naive_cv(x, y, w, 0.4, np.zeros_like(w)),
                                            rel=1e-10)


def test_analytic_residual_variance_is_at_the_mean_weight() -> None:
    x, y, w = _data()
    model = NadarayaWatsonRegressor(bandwidth=0.4, weight_type="analytic").fit(
        x, y, sample_weight=w)
    K = np.exp(-0.5 * ((x[:, 0][:, None] - x[:, 0][None, :]) / 0.4) ** 2) * w[None, :]
    S = K / K.sum(axis=1, keepdims=True)
    r = y - S @ y
    naive = float((w / w.mean()) @ r**2 / (len(y) - np.trace(S)))
    assert model.residual_variance_ == pytest.approx(naive, rel=1e-10)
    assert model.effective_dof_ == pytest.approx(np.trace(S), rel=1e-10)


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_analytic_weights_scale_free(cls: type) -> None:
    x, y, w = _data()
    w = w * np.linspace(0.3, 2.0, w.size)
    fits = [cls(weight_type="analytic").fit(x, y, sample_weight=s * w)
            for s in (1.0, 1000.0, 1e-200)]
    for other in fits[1:]:
        assert other.bandwidth_ == pytest.approx(fits[0].bandwidth_, rel=1e-8)
        assert other.cv_score_ == pytest.approx(fits[0].cv_score_, rel=1e-8)
        assert other.residual_variance_ == pytest.approx(fits[0].residual_variance_, rel=1e-8)
        np.testing.assert_allclose(other.predict(x, return_std=True),
                                   fits[0].predict(x, return_std=True), rtol=1e-7)


def test_frequency_weights_scaled_up_shrink_the_cv_bandwidth() -> None:
    # each row once, then a thousand copies of it: leave-one-out keeps 999, and the
    # bandwidth collapses toward interpolation
    x, y, _ = _data()
    w = np.ones(y.size)
    once = NadarayaWatsonRegressor().fit(x, y, sample_weight=w)
    many = NadarayaWatsonRegressor().fit(x, y, sample_weight=1000.0 * w)
    assert many.bandwidth_ < 0.1 * once.bandwidth_
    assert many.cv_score_ < 0.1 * once.cv_score_
    analytic = NadarayaWatsonRegressor(weight_type="analytic").fit(
        x, y, sample_weight=1000.0 * w)
    assert analytic.bandwidth_ == pytest.approx(once.bandwidth_, rel=1e-8)


def test_equal_analytic_weights_are_the_unweighted_fit() -> None:
    x, y, _ = _data()
    plain = LocalPolynomialRegressor().fit(x, y)
    same = LocalPolynomialRegressor(weight_type="analytic").fit(
        x, y, sample_weight=np.full(y.size, 7.5))
    assert same.bandwidth_ == pytest.approx(plain.bandwidth_, rel=1e-8)
    assert same.cv_score_ == pytest.approx(plain.cv_score_, rel=1e-8)
    assert same.residual_variance_ == pytest.approx(plain.residual_variance_, rel=1e-8)


def test_frequency_weights_are_repeated_rows_in_the_search() -> None:
    x, y, w = _data(40)
    k = w.astype(int)
    repeated = NadarayaWatsonRegressor().fit(np.repeat(x, k, axis=0), np.repeat(y, k))
    weighted = NadarayaWatsonRegressor().fit(x, y, sample_weight=w)
    assert weighted.bandwidth_ == pytest.approx(repeated.bandwidth_, rel=1e-8)
    assert weighted.cv_score_ == pytest.approx(repeated.cv_score_, rel=1e-8)


def test_rules_count_rows_for_analytic_weights() -> None:
    x, y, w = _data()
    a = NadarayaWatsonRegressor(bandwidth="scott", weight_type="analytic")
    b = NadarayaWatsonRegressor(bandwidth="scott", weight_type="analytic")
    assert a.fit(x, y, sample_weight=w).bandwidth_ == pytest.approx(
        b.fit(x, y, sample_weight=1e6 * w).bandwidth_, rel=1e-12)
    plain = NadarayaWatsonRegressor(bandwidth="scott").fit(x, y)
    same = NadarayaWatsonRegressor(bandwidth="scott", weight_type="analytic").fit(
        x, y, sample_weight=np.full(y.size, 3.0))
    assert same.bandwidth_ == pytest.approx(plain.bandwidth_, rel=1e-12)


@pytest.mark.parametrize("bad", ["aweight", None, 1, "Frequency"])
def test_bad_weight_type(bad: object) -> None:
    x, y, w = _data(20)
    with pytest.raises(NadarayaError, match="weight_type"):
        NadarayaWatsonRegressor(weight_type=bad).fit(x, y, sample_weight=w)


def test_analytic_with_one_positive_row_and_zeros() -> None:
    x, y, w = _data(20)
    w = np.zeros_like(w)
    w[3] = 5.0
    model = NadarayaWatsonRegressor(bandwidth=0.5, weight_type="analytic").fit(
        x, y, sample_weight=w)
    assert model.predict(x[:2]) == pytest.approx([y[3], y[3]])
    with pytest.raises(NadarayaError, match="at least 2 samples"):
        NadarayaWatsonRegressor(weight_type="analytic").fit(x, y, sample_weight=w)


def test_dask_refuses_analytic_weights() -> None:
    da = pytest.importorskip("dask.array")
    x, y, w = _data(20)
    with pytest.raises(NadarayaError, match="weight_type"):
        NadarayaWatsonRegressor(weight_type="analytic").fit(
            da.from_array(x), da.from_array(y), sample_weight=da.from_array(w))
