"""Integer sample weights are repeated rows: fits and criteria agree to rounding, in any row order.

A weighted row and its repetitions pose one weighted least-squares problem per
query, so the two fits (and a fit on shuffled rows) must agree to rounding,
not merely closely: the bandwidth search compares criteria to twelve digits,
and a larger difference steers it elsewhere. The data are those of
scikit-learn's ``check_sample_weight_equivalence_on_dense_data`` (15 rows, 30
features: every local covariance is rank-deficient and the neighbours' kernel
weights span dozens of orders of magnitude) and hypothesis-generated problems
with few rows, many features and zero weights.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.utils import shuffle
from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

from nadaraya.estimators import LocalPolynomialRegressor

RTOL = 1e-12


def _check_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows, targets and integer weights of scikit-learn's check."""
    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15).astype(float)
    sw = rng.randint(0, 5, size=15)
    return X, y, sw


def _fits(X: np.ndarray, y: np.ndarray, sw: np.ndarray, seed: int,
          **params: object) -> tuple[LocalPolynomialRegressor, LocalPolynomialRegressor]:
    """A fit on the repeated rows and one on the weighted rows, shuffled."""
    repeated = LocalPolynomialRegressor(**params).fit(X.repeat(sw, axis=0), y.repeat(sw))
    Xs, ys, ws = shuffle(X, y, sw, random_state=seed)
    weighted = LocalPolynomialRegressor(**params).fit(Xs, ys, sample_weight=ws)
    return repeated, weighted


def _assert_same(repeated: LocalPolynomialRegressor, weighted: LocalPolynomialRegressor,
                 queries: np.ndarray, y: np.ndarray, rtol: float = RTOL,
                 variance_rtol: float | None = None) -> None:
    scale = float(np.max(np.abs(y))) + 1.0
    np.testing.assert_allclose(weighted.predict(queries), repeated.predict(queries),
                               rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(weighted.cv_score_, repeated.cv_score_, rtol=rtol,
                               atol=rtol * scale**2)
    np.testing.assert_allclose(weighted.effective_dof_, repeated.effective_dof_, rtol=rtol)
    if variance_rtol is not None:
        # sum_j S_qj^2 / w_j: the standard error at sigma = 1 (the fitted sigma^2 is
        # rounding noise when the fit interpolates). At a query that extrapolates along a
        # barely fixed direction the smoother weights are ~1e10 times their rounding
        # (slopes through points of kernel weight e^-20), so this agrees less closely.
        factors = []
        for model in (weighted, repeated):
            unit = copy.deepcopy(model)
            unit._sigma2 = np.ones(1)  # sigma^2 = 1 in the targets' frame (the same for both)
            factors.append(unit.predict(queries, return_std=True)[1] ** 2)
        np.testing.assert_allclose(*factors, rtol=variance_rtol)


@pytest.mark.slow
def test_scikit_learn_check_passes() -> None:
    check_sample_weight_equivalence_on_dense_data("LocalPolynomialRegressor",
                                                  LocalPolynomialRegressor())


@pytest.mark.parametrize("bandwidth", [0.15, 0.2, 0.25, 0.3, 0.5, 2.0, "vector"])
def test_local_linear_on_the_check_data(bandwidth: float | str) -> None:
    X, y, sw = _check_data()
    h = np.random.RandomState(0).uniform(0.15, 0.4, 30) if bandwidth == "vector" else bandwidth
    for seed in (0, 1):
        repeated, weighted = _fits(X, y, sw, seed, bandwidth=h)
        _assert_same(repeated, weighted, X, y, variance_rtol=1e-4)


@pytest.mark.parametrize(("degree", "n_features", "bandwidth"),
                         [(2, 6, 0.2), (2, 6, 0.6), (3, 3, 0.15), (3, 3, 0.4)])
def test_higher_degree_on_the_check_rows(degree: int, n_features: int,
                                         bandwidth: float) -> None:
    X, y, sw = _check_data()
    repeated, weighted = _fits(X[:, :n_features], y, sw, 0, degree=degree,
                               bandwidth=bandwidth)
    _assert_same(repeated, weighted, X[:, :n_features], y)


@settings(max_examples=40)
@given(data=st.data())
def test_few_rows_many_features(data: st.DataObject) -> None:
    n = data.draw(st.integers(3, 10), label="n")
    degree = data.draw(st.sampled_from([1, 1, 2]), label="degree")
    d = data.draw(st.integers(2, 5) if degree == 2 else st.integers(4, 40), label="d")
    # coordinates on a grid of 1/1000: ties, constant features and duplicate rows are
    # common; spreads are not so small that a query lies 1e100 spreads away
    X = data.draw(arrays(np.int64, (n, d), elements=st.integers(0, 1000)), label="X") / 1000.0
    y = data.draw(arrays(np.float64, n, elements=st.floats(-3.0, 3.0, allow_subnormal=False)),
                  label="y")
    sw = data.draw(arrays(np.int64, n, elements=st.integers(0, 4))
                   .filter(lambda s: (s > 0).sum() >= 2), label="sw")
    h = math.exp(data.draw(st.floats(math.log(0.05), math.log(3.0)), label="log h"))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    repeated, weighted = _fits(X, y, sw, seed, degree=degree, bandwidth=h)
    queries = np.vstack([X, np.random.default_rng(seed).uniform(0, 1, (4, d))])
    _assert_same(repeated, weighted, queries, y, rtol=1e-9)


def test_constant_features_carry_no_rounding() -> None:
    """A feature constant over the data has no spread, not the rounding of a weighted mean.

    That rounding (about 1e-18) would become the feature's scale, and a query's
    offset along the feature would look like 1e17 spreads.
    """
    X = np.zeros((3, 21))
    X[1:, 0] = 0.05
    y = np.array([0.0, 1.0, 1.0])
    sw = np.array([3, 3, 3])
    queries = np.random.default_rng(0).uniform(0, 1, (4, 21))
    for value in np.linspace(0.05, 0.06, 21):
        X[:, 1:] = value
        repeated, weighted = _fits(X, y, sw, 0, bandwidth=1.0)
        _assert_same(repeated, weighted, queries, y)
        # the constant features add the same distance to every key: the fit on the first alone
        alone = LocalPolynomialRegressor(bandwidth=1.0).fit(X[:, :1], y, sample_weight=sw)
        np.testing.assert_allclose(weighted.predict(queries), alone.predict(queries[:, :1]),
                                   rtol=1e-12)
