"""Mixed data: continuous, unordered and ordered features (``var_types``), statsmodels as oracle."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.estimators._mixed import LOGIT_BOUND, mixed_types
from nadaraya.kernels import Gaussian, LiRacine, LiRacineOrdered

KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg

#: statsmodels' names of our categorical kernels
SM_U = {"li-racine": "aitchison_aitken_reg", "aitchison-aitken": "aitchisonaitken"}


def _data(seed: int, n: int, effect: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    u = rng.integers(0, 3, n)
    o = rng.integers(0, 4, n)
    y = np.sin(2 * x) + effect * u - 0.5 * o + 0.3 * rng.normal(size=n)
    return np.column_stack([x, u, o]).astype(float), y


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.abs(b)))


@pytest.mark.parametrize("ukernel", ["li-racine", "aitchison-aitken"])
@pytest.mark.parametrize("bw", [[0.4, 0.3, 0.6], [0.25, 0.05, 0.9], [1.5, 0.6, 0.2]])
def test_nadaraya_watson_is_kernel_reg_lc(ukernel: str, bw: list[float]) -> None:
    X, y = _data(0, 120)
    model = NadarayaWatsonRegressor(bandwidth=bw, var_types="cuo", ukernel=ukernel).fit(X, y)
    sm = KernelReg(y, X, "cuo", reg_type="lc", bw=bw, ukertype=SM_U[ukernel],
                   okertype="wangryzin_reg")
    Xq = _data(1, 30)[0]
    assert _rel(model.predict(X), sm.fit(X)[0]) < 1e-10
    assert _rel(model.predict(Xq), sm.fit(Xq)[0]) < 1e-10


@pytest.mark.parametrize("bw", [[0.4, 0.3, 0.6], [0.8, 0.6, 0.2]])
def test_local_linear_product_kernel_is_kernel_reg_ll(bw: list[float]) -> None:
    # statsmodels' ll puts every column, codes included, in the polynomial: so does a
    # product kernel object on plain columns (var_types=None)
    X, y = _data(0, 100)
    kernel = Gaussian(bw[0]).on([0]) * LiRacine(bw[1]).on([1]) * LiRacineOrdered(bw[2]).on([2])
    model = LocalPolynomialRegressor(kernel=kernel, bandwidth=None).fit(X, y)
    sm = KernelReg(y, X, "cuo", reg_type="ll", bw=bw, ukertype="aitchison_aitken_reg",
                   okertype="wangryzin_reg")
    assert _rel(model.predict(X), sm.fit(X)[0]) < 1e-10


@pytest.mark.parametrize("bw", [[0.4, 0.3, 0.6], [0.3, 0.0, 1.0]])
def test_local_linear_is_linear_in_the_continuous_features_only(bw: list[float]) -> None:
    # Li and Racine (2004): weighted least squares on [1, x - x0], categorical features in
    # the kernel only
    X, y = _data(3, 80)
    model = LocalPolynomialRegressor(bandwidth=bw, var_types="cuo", ukernel="li-racine")
    got = model.fit(X, y).predict(X[:20])
    want = []
    for q in X[:20]:
        k = (np.exp(-0.5 * ((X[:, 0] - q[0]) / bw[0]) ** 2)
             * np.where(X[:, 1] == q[1], 1.0, bw[1]) * bw[2] ** np.abs(X[:, 2] - q[2]))
        A = np.column_stack([np.ones(len(y)), X[:, 0] - q[0]]) * np.sqrt(k)[:, None]
        want.append(np.linalg.lstsq(A, y * np.sqrt(k), rcond=None)[0][0])
    assert _rel(got, np.array(want)) < 1e-10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cv_search_is_never_worse_than_kernel_reg_cv_ls(seed: int) -> None:
    X, y = _data(seed, 40)
    sm = KernelReg(y, X, "cuo", reg_type="lc", bw="cv_ls", ukertype="aitchison_aitken_reg",
                   okertype="wangryzin_reg")
    # statsmodels' search is unconstrained; lambda outside [0, 1] is not a kernel: compare
    # with its criterion at its bandwidths brought into range
    at = np.clip(sm.bw, [1e-12, 0.0, 0.0], [np.inf, 1.0, 1.0])
    theirs = float(sm.cv_loo(at, sm.est["lc"])[0])
    model = NadarayaWatsonRegressor(var_types="cuo", ukernel="li-racine").fit(X, y)
    assert model.cv_score_ <= theirs + 1e-8
    # and ours is statsmodels' criterion, at our bandwidths
    assert model.cv_score_ == pytest.approx(float(sm.cv_loo(model.bandwidth_,
                                                            sm.est["lc"])[0]), rel=1e-10)


@pytest.mark.parametrize("Est", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
@pytest.mark.parametrize("ukernel, top", [("li-racine", 1.0), ("aitchison-aitken", 2 / 3)])
def test_a_categorical_feature_without_effect_is_irrelevant(Est, ukernel: str,
                                                            top: float) -> None:
    rng = np.random.default_rng(3)
    n = 150
    x = rng.uniform(-2, 2, n)
    X = np.column_stack([x, rng.integers(0, 3, n)]).astype(float)
    y = np.sin(2 * x) + 0.3 * rng.normal(size=n)
    model = Est(var_types="cu", ukernel=ukernel).fit(X, y)
    assert model.bandwidth_[1] == top
    assert list(model.irrelevant_) == ["x1"]
    # smoothed out exactly: the fit on the continuous feature alone
    alone = Est(bandwidth=model.bandwidth_[0]).fit(X[:, :1], y)
    np.testing.assert_allclose(model.predict(X), alone.predict(X[:, :1]), rtol=1e-12)


def test_a_categorical_feature_with_effect_is_kept() -> None:
    X, y = _data(0, 120, effect=2.0)
    model = NadarayaWatsonRegressor(var_types="cuo").fit(X, y)
    assert "x1" not in model.irrelevant_
    assert 0 <= model.bandwidth_[1] < 2 / 3 and 0 <= model.bandwidth_[2] <= 1
    assert model.cv_results_["bandwidth"].shape[1] == 3


@pytest.mark.parametrize("okernel", ["li-racine", "wang-van-ryzin"])
def test_levels_far_apart_get_lambda_near_zero(okernel: str) -> None:
    # leave-one-out always gains from a little borrowing across levels (the criterion falls
    # from lambda = 0), so far-apart levels get a lambda just above it
    rng = np.random.default_rng(6)
    n = 120
    X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    y = 10.0 * X[:, 0] - 7.0 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    model = NadarayaWatsonRegressor(var_types="uo", okernel=okernel).fit(X, y)
    assert np.all(model.bandwidth_ < 1e-4)
    assert list(model.irrelevant_) == []


def test_the_search_ends_map_to_lambda_zero_and_its_upper_end() -> None:
    mixed = mixed_types("cuo", "aitchison-aitken", "li-racine",
                        np.column_stack([np.arange(6.0), np.arange(6) % 3, np.arange(6) % 2]))
    lo, hi = np.exp(-LOGIT_BOUND), np.exp(LOGIT_BOUND)
    np.testing.assert_array_equal(mixed.from_search(np.array([0.3, lo, hi])), [0.3, 0.0, 1.0])
    np.testing.assert_array_equal(mixed.from_search(np.array([0.3, hi, 1.0])), [0.3, 2 / 3, 0.5])
    np.testing.assert_array_equal(mixed.from_search(np.array([np.inf, np.inf, np.inf])),
                                  [np.inf, 2 / 3, 1.0])


def test_lambda_zero_fits_each_level_on_its_own() -> None:
    X, y = _data(0, 90)
    model = NadarayaWatsonRegressor(bandwidth=[0.4, 0.0, 1.0], var_types="cuo").fit(X, y)
    for level in range(3):
        rows = X[:, 1] == level
        alone = NadarayaWatsonRegressor(bandwidth=0.4).fit(X[rows, :1], y[rows])
        np.testing.assert_allclose(model.predict(X[rows]), alone.predict(X[rows, :1]),
                                   rtol=1e-12)
    assert list(model.irrelevant_) == ["x2"]


@pytest.mark.parametrize("bandwidth, words", [
    ([0.3, 1.2, 0.5], r"bandwidth\[1\] is the lambda of categorical feature 1"),
    ([0.3, 0.5, -0.1], "must be > 0"),
    ([0.0, 0.5, 0.5], r"bandwidth\[0\] is the bandwidth of continuous feature 0"),
    (0.3, "one value per feature"),
    ("scott", "gives no lambda"),
    (None, "gives no lambda"),
])
def test_bad_bandwidths_are_refused_by_feature(bandwidth, words: str) -> None:
    X, y = _data(0, 30)
    with pytest.raises(NadarayaError, match=words):
        NadarayaWatsonRegressor(bandwidth=bandwidth, var_types="cuo", ukernel="li-racine"
                                ).fit(X, y)


@pytest.mark.parametrize("params, words", [
    ({"var_types": "cx"}, "var_types must be a string"),
    ({"var_types": "cu"}, "var_types has 2 letter"),
    ({"var_types": "cuo", "ukernel": "gaussian"}, "ukernel must be one of"),
    ({"var_types": "cuo", "okernel": "aitchison-aitken"}, "okernel must be one of"),
    ({"var_types": "cuo", "kernel": Gaussian(0.3), "bandwidth": None}, "kernel by name"),
])
def test_bad_parameters_are_refused_by_name(params, words: str) -> None:
    X, y = _data(0, 30)
    with pytest.raises(NadarayaError, match=words):
        NadarayaWatsonRegressor(**params).fit(X, y)


def test_unseen_codes_in_arrays_get_weight_from_lambda_alone() -> None:
    X, y = _data(0, 60)
    model = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3, 0.6], var_types="cuo",
                                    ukernel="li-racine").fit(X, y)
    q = X[:5].copy()
    q[:, 1] = 7.0  # a level no row has: lambda from every row, as if the feature were out
    cont = NadarayaWatsonRegressor(bandwidth=[0.4, 1.0, 0.6], var_types="cuo",
                                   ukernel="li-racine").fit(X, y)
    np.testing.assert_allclose(model.predict(q), cont.predict(q), rtol=1e-12)


def test_clone_get_params_and_grid_search() -> None:
    X, y = _data(0, 60)
    model = LocalPolynomialRegressor(var_types="cuo", ukernel="li-racine")
    params = model.get_params()
    assert params["var_types"] == "cuo" and params["okernel"] == "li-racine"
    assert clone(model).get_params() == params
    grid = GridSearchCV(NadarayaWatsonRegressor(var_types="cuo"),
                        {"bandwidth": [[0.3, 0.2, 0.5], [0.6, 0.5, 0.5]]}, cv=3).fit(X, y)
    assert grid.best_estimator_.var_types == "cuo"


def test_standard_errors_and_smoother_matrix_with_mixed_features() -> None:
    X, y = _data(0, 60)
    for Est in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        model = Est(bandwidth=[0.4, 0.3, 0.6], var_types="cuo").fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mean, std = model.predict(X[:10], return_std=True)
        S = model.smoother_matrix(X[:10])
        np.testing.assert_allclose(S @ y, mean, rtol=1e-9, atol=1e-12)
        assert np.all(std > 0)
        np.testing.assert_allclose(np.diag(model.smoother_matrix()), model.smoother_diagonal(),
                                   rtol=1e-9, atol=1e-12)
