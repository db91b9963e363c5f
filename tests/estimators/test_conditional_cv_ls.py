"""ConditionalDensity(bandwidth="cv_ls") against statsmodels' imse and a naive formula here."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from statsmodels.nonparametric.kernel_density import KDEMultivariateConditional

from nadaraya import NadarayaError, config_context
from nadaraya.estimators import ConditionalDensity, ConditionalQuantileRegressor
from nadaraya.estimators._conditional_cv import conditional_cv_ls
from nadaraya.estimators._density_fit import density_model, levels_of

_BW = {"c": 0.45, "u": 0.3, "o": 0.35}


def _data(seed: int = 0, n: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return {"x": x, "u": rng.integers(0, 3, n).astype(float),
            "o": rng.integers(0, 4, n).astype(float),
            "yc": np.sin(x) + 0.5 * rng.normal(size=n),
            "yu": rng.integers(0, 3, n).astype(float)}


def _columns(d: dict[str, np.ndarray], dep: str, indep: str) -> tuple[np.ndarray, np.ndarray]:
    """``y`` and ``x`` with the types asked (a second continuous ``y`` is the first squared)."""
    ys = {"c": d["yc"], "u": d["yu"], "o": d["o"]}
    Y = np.column_stack([ys[t] for t in dep])
    if dep == "cc":
        Y[:, 1] = Y[:, 1] ** 2 - 1
    xs = {"c": d["x"], "u": d["u"], "o": d["o"]}
    return Y, np.column_stack([xs[t] for t in indep])


def _objective(Y: np.ndarray, X: np.ndarray, dep: str, indep: str, w: np.ndarray | None = None,
               okernel: str = "wang-van-ryzin"):
    Z = np.column_stack([Y, X])
    types = dep + indep
    k = len(dep)
    blocks = [[j for j in range(k) if types[j] == "c"],
              [j for j in range(k, len(types)) if types[j] == "c"]]
    make = density_model("gaussian", types, levels_of(Z, types), "aitchison-aitken", okernel,
                         blocks)
    return conditional_cv_ls(make, k, Z, np.ones(Z.shape[0]) if w is None else w)


@pytest.mark.parametrize(("dep", "indep"), [("c", "c"), ("c", "cu"), ("c", "co"), ("c", "uo"),
                                            ("u", "c"), ("o", "cu"), ("cc", "c"), ("co", "c")])
def test_objective_equals_statsmodels_imse(dep: str, indep: str) -> None:
    Y, X = _columns(_data(), dep, indep)
    bw = np.array([_BW[t] for t in dep + indep])
    sm = KDEMultivariateConditional(endog=Y, exog=X, dep_type=dep, indep_type=indep, bw=bw)
    assert _objective(Y, X, dep, indep)(bw) == pytest.approx(sm.imse(bw), rel=1e-10)


def _naive(Y: np.ndarray, X: np.ndarray, bw: np.ndarray, w: np.ndarray, y_type: str) -> float:
    """CV_LS written out: one continuous ``x`` and one ``u`` (Aitchison-Aitken), one ``y``.

    Leaving observation ``i`` out keeps ``max(w_i - 1, 0)`` of its weight.
    """
    n = Y.shape[0]
    hy, hx, lam = bw
    levels = np.unique(X[:, 1])
    c = levels.size

    def k_x(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        same = a[1] == b[:, 1]
        return np.exp(-0.5 * ((a[0] - b[:, 0]) / hx) ** 2) * np.where(same, 1 - lam, lam / (c - 1))

    if y_type == "c":
        def k_y(a: float, b: np.ndarray) -> np.ndarray:
            return np.exp(-0.5 * ((a - b) / hy) ** 2) / (math.sqrt(2 * math.pi) * hy)

        def conv(a: float, b: np.ndarray) -> np.ndarray:
            s = math.sqrt(2.0) * hy
            return np.exp(-0.5 * ((a - b) / s) ** 2) / (math.sqrt(2 * math.pi) * s)
    else:
        ylev = np.unique(Y)
        cy = ylev.size

        def k_y(a: float, b: np.ndarray) -> np.ndarray:
            return np.where(a == b, 1 - hy, hy / (cy - 1))

        def conv(a: float, b: np.ndarray) -> np.ndarray:
            return sum(k_y(level, np.array([a])) * k_y(level, b) for level in ylev)

    total = 0.0
    for i in range(n):
        v = w.copy()
        v[i] = max(w[i] - 1.0, 0.0)
        a = v * k_x(X[i], X)
        mu = a.sum()
        f = (a * k_y(Y[i, 0], Y[:, 0])).sum()
        G = sum(a[j] * a[m] * conv(Y[j, 0], Y[m:m + 1, 0])[0]
                for j in range(n) for m in range(n))
        total += w[i] * (G / mu**2 - 2.0 * f / mu)
    return total / w.sum()


@pytest.mark.parametrize("y_type", ["c", "u"])
@pytest.mark.parametrize("weighted", [False, True])
def test_objective_equals_the_naive_triple_sum(y_type: str, weighted: bool) -> None:
    d = _data(3, 20)
    Y = (d["yc"] if y_type == "c" else d["yu"])[:, None]
    X = np.column_stack([d["x"], d["u"]])
    w = np.random.default_rng(4).uniform(0.3, 3.0, 20) if weighted else np.ones(20)
    bw = np.array([0.5 if y_type == "c" else 0.2, 0.6, 0.25])
    ours = _objective(Y, X, y_type, "cu", w)(bw)
    assert ours == pytest.approx(_naive(Y, X, bw, w, y_type), rel=1e-12)


@pytest.mark.parametrize("okernel", ["wang-van-ryzin", "li-racine"])
def test_integer_weights_equal_repeated_rows(okernel: str) -> None:
    d = _data(5, 30)
    w = np.random.default_rng(6).integers(1, 4, 30).astype(float)
    for dep, indep in (("c", "co"), ("o", "c")):
        Y, X = _columns(d, dep, indep)
        bw = np.array([_BW[t] for t in dep + indep])
        weighted = _objective(Y, X, dep, indep, w, okernel)(bw)
        rep = np.repeat(np.arange(30), w.astype(int))
        repeated = _objective(Y[rep], X[rep], dep, indep, None, okernel)(bw)
        assert weighted == pytest.approx(repeated, rel=1e-12)


@pytest.mark.slow
def test_weighted_search_equals_the_repeated_rows_search() -> None:
    d = _data(7, 30)
    w = np.random.default_rng(8).integers(1, 4, 30)
    X = d["x"][:, None]
    rep = np.repeat(np.arange(30), w)
    a = ConditionalDensity(bandwidth="cv_ls").fit(X, d["yc"], sample_weight=w)
    b = ConditionalDensity(bandwidth="cv_ls").fit(X[rep], d["yc"][rep])
    np.testing.assert_allclose(a.bandwidth_, b.bandwidth_, rtol=1e-6)
    assert a.cv_score_ == pytest.approx(b.cv_score_, rel=1e-10)


def test_blocks_within_a_small_working_memory_agree() -> None:
    Y, X = _columns(_data(9, 50), "c", "cu")
    objective = _objective(Y, X, "c", "cu", np.linspace(0.5, 2.5, 50))
    bw = np.array([0.4, 0.5, 0.3])
    whole = objective(bw)
    with config_context(working_memory=0.01):  # a few rows per block
        assert objective(bw) == pytest.approx(whole, rel=1e-13)


@pytest.mark.slow
@pytest.mark.parametrize("indep", ["c", "cu"])
def test_search_is_at_least_as_good_as_statsmodels(indep: str) -> None:
    rng = np.random.default_rng(1)
    n = 80
    x, u = rng.normal(size=n), rng.integers(0, 3, n).astype(float)
    y = np.sin(x) + 0.8 * u + 0.4 * rng.normal(size=n)
    X = np.column_stack([x, u])[:, :len(indep)]
    ours = ConditionalDensity(bandwidth="cv_ls", var_types=indep).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = KDEMultivariateConditional(endog=y, exog=X, dep_type="c", indep_type=indep,
                                        bw="cv_ls")
    assert sm.imse(ours.bandwidth_) == pytest.approx(ours.cv_score_, rel=1e-10)
    assert ours.cv_score_ <= sm.imse(sm.bw) + 1e-9


@pytest.mark.slow
def test_quantile_regressor_takes_cv_ls() -> None:
    d = _data(2, 20)
    X = d["x"][:, None]
    qr = ConditionalQuantileRegressor(0.5, bandwidth="cv_ls").fit(X, d["yc"])
    cd = ConditionalDensity(bandwidth="cv_ls").fit(X, d["yc"])
    np.testing.assert_array_equal(qr.bandwidth_, cd.bandwidth_)
    assert np.all(np.isfinite(cd.bandwidth_)) and np.all(cd.bandwidth_ > 0)
    np.testing.assert_allclose(qr.predict(X[:5]), cd.predict_quantile(X[:5], 0.5))


@pytest.mark.slow
def test_search_is_exact_whatever_the_tolerance() -> None:
    d = _data(4, 25)
    X = d["x"][:, None]
    exact = ConditionalDensity(bandwidth="cv_ls").fit(X, d["yc"])
    loose = ConditionalDensity(bandwidth="cv_ls", tolerance=1e-3).fit(X, d["yc"])
    np.testing.assert_array_equal(loose.bandwidth_, exact.bandwidth_)
    assert loose.cv_score_ == exact.cv_score_


def test_two_rows_give_a_finite_criterion() -> None:
    cd = ConditionalDensity(bandwidth="cv_ls").fit([[0.0], [1.0]], [0.0, 1.0])
    assert np.all(np.isfinite(cd.bandwidth_)) and math.isfinite(cd.cv_score_)
    assert np.isfinite(cd.score_samples([[0.5]], [0.5])).all()


@pytest.mark.parametrize(("kwargs", "X", "y", "match"), [
    ({"kernel": "epanechnikov"}, [[0.0], [1.0], [2.0]], [0.0, 1.0, 3.0], "convolution"),
    ({}, [[0.0]], [1.0], "at least 2 samples"),
    ({}, [[1.0], [1.0], [1.0]], [0.0, 1.0, 3.0], "constant"),
    ({}, [[0.0], [1.0], [2.0]], [0.0, 0.0, 0.0], "constant"),
    ({}, [[0.0], [1.0], [2.0]], [0.0, np.nan, 3.0], "NaN"),
    ({"var_types": "u"}, [[0.0], [1.0], [2.0]], [0.0, 1.0, np.inf], "NaN"),
])
def test_hostile_inputs(kwargs: dict, X: list, y: list, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        ConditionalDensity(bandwidth="cv_ls", **kwargs).fit(X, y)


def test_nan_in_x_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        ConditionalDensity(bandwidth="cv_ls").fit([[0.0], [np.nan], [2.0]], [0.0, 1.0, 2.0])


def test_unknown_method_names_cv_ls() -> None:
    with pytest.raises(NadarayaError, match="'cv_ls'"):
        ConditionalDensity(bandwidth="cv.ls").fit([[0.0], [1.0]], [0.0, 1.0])


@pytest.mark.slow
def test_a_lambda_moved_to_its_end_leaves_the_bandwidths_at_their_minimum() -> None:
    # the search ends with the level's lambda at 0 (each level alone); the continuous
    # bandwidths must then be the best for that lambda, not for the one before it
    rng = np.random.default_rng(1)
    n = 200
    x, u = rng.normal(size=n), rng.integers(0, 3, n).astype(float)
    y = np.sin(x) + 0.8 * u + 0.4 * rng.normal(size=n)
    X = np.column_stack([x, u])
    ours = ConditionalDensity(bandwidth="cv_ls", var_types="cu").fit(X, y)
    assert ours.bandwidth_[2] == 0.0
    objective = _objective(y[:, None], X, "c", "cu")
    for j in (0, 1):
        for factor in (0.97, 1.03):
            h = ours.bandwidth_.copy()
            h[j] *= factor
            assert objective(h) >= ours.cv_score_ - 1e-9, (j, factor)
