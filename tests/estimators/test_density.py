"""KernelDensity against statsmodels, scipy, scikit-learn, R and formulas written here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity as SkKernelDensity
from statsmodels.nonparametric.kernel_density import KDEMultivariate

from nadaraya import NadarayaError
from nadaraya.estimators import KernelDensity
from nadaraya.estimators._density_cv import objective_for
from nadaraya.estimators._density_fit import density_model, levels_of


def _mixed(seed: int = 0, n: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.normal(size=n), rng.integers(0, 3, n),
                            rng.integers(0, 4, n), rng.gamma(2.0, size=n)]).astype(float)


@pytest.mark.parametrize("types", ["cuoc", "c", "u", "o", "cc", "uo"])
def test_pdf_equals_statsmodels(types: str) -> None:
    X = _mixed()
    cols = {"cuoc": [0, 1, 2, 3], "c": [0], "u": [1], "o": [2], "cc": [0, 3], "uo": [1, 2]}
    X = X[:, cols[types]]
    bw = np.array([{"c": 0.4, "u": 0.3, "o": 0.35}[t] for t in types])
    kde = KernelDensity(bandwidth=bw, var_types=types).fit(X)
    Q = X[:15] + np.where(np.array(list(types)) == "c", 0.13, 0.0)
    ours = np.exp(kde.score_samples(Q))
    theirs = KDEMultivariate(X, var_type=types, bw=bw).pdf(Q)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_gaussian_equals_scipy_gaussian_kde(weighted: bool) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_t(4, size=300)
    w = rng.uniform(0.2, 2.0, size=300) if weighted else None
    h = 0.27
    sd = math.sqrt(float(np.cov(x, aweights=w)))
    ref = stats.gaussian_kde(x, bw_method=h / sd, weights=w)
    q = np.linspace(-6, 6, 41)
    ours = KernelDensity(bandwidth=h).fit(x[:, None], sample_weight=w).score_samples(q[:, None])
    np.testing.assert_allclose(ours, ref.logpdf(q), rtol=1e-12)


@pytest.mark.parametrize(("ours", "theirs"), [("epanechnikov", "epanechnikov"),
                                              ("laplacian", "exponential"),
                                              ("uniform", "tophat"), ("gaussian", "gaussian")])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_radial_normalization_equals_scikit_learn(ours: str, theirs: str, d: int) -> None:
    rng = np.random.default_rng(d)
    X = rng.normal(size=(120, d))
    Q = X[:20] + 0.1
    a = KernelDensity(ours, bandwidth=0.9).fit(X).score_samples(Q)
    b = SkKernelDensity(kernel=theirs, bandwidth=0.9).fit(X).score_samples(Q)
    np.testing.assert_allclose(a, b, rtol=1e-10)


def integrate_pieces(f: object, breaks: np.ndarray, nodes: int = 24) -> float:
    """``int f`` over the line: Gauss-Legendre on the pieces between ``breaks`` (where ``f``
    may have kinks) and on the two tails after ``t = b + s / (1 - s)``; ``f`` takes arrays."""
    s, wts = np.polynomial.legendre.leggauss(nodes)
    b = np.unique(breaks)
    lo, hi = b[:-1, None], b[1:, None]
    inner = ((hi - lo) / 2 * (s + 1) + lo).ravel()
    inner_w = ((hi - lo) / 2 * wts).ravel()
    u = (s + 1) / 2  # tails on s in [0, 1)
    tails = np.concatenate([b[-1] + u / (1 - u), b[0] - u / (1 - u)])
    tails_w = np.concatenate([wts / 2 / (1 - u) ** 2] * 2)
    t = np.concatenate([inner, tails])
    return float(np.concatenate([inner_w, tails_w]) @ f(t))


@pytest.mark.parametrize("kernel", ["tricube", "matern32", "matern52", "cauchy", "laplacian",
                                    "epanechnikov", "uniform"])
def test_one_dimensional_density_integrates_to_one(kernel: str) -> None:
    x = np.array([[-1.0], [0.2], [0.5], [2.0]])
    h = 0.4
    kde = KernelDensity(kernel, bandwidth=h).fit(x)
    breaks = np.concatenate([x[:, 0], x[:, 0] - h, x[:, 0] + h])
    pieces = np.linspace(breaks.min(), breaks.max(), 200)
    total = integrate_pieces(lambda t: np.exp(kde.score_samples(t[:, None])),
                             np.concatenate([breaks, pieces]))
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize(("ukernel", "okernel"), [("aitchison-aitken", "wang-van-ryzin"),
                                                  ("li-racine", "li-racine")])
def test_categorical_factors_sum_to_one(ukernel: str, okernel: str) -> None:
    X = _mixed(2)[:, [1, 2]]
    kde = KernelDensity(bandwidth=[0.4, 0.6], var_types="uo", ukernel=ukernel,
                        okernel=okernel).fit(X)
    span = np.arange(-60, 64) if okernel == "wang-van-ryzin" else np.arange(4)
    grid = np.array([[u, o] for u in range(3) for o in span], dtype=float)
    assert np.exp(logsumexp(kde.score_samples(grid))) == pytest.approx(1.0, abs=1e-12)


def test_far_queries_stay_in_the_log_domain() -> None:
    x = np.array([[0.0], [0.3], [1.0]])
    q = np.array([[40.0], [1e3], [-1e150], [1e200]])
    h = 0.1
    got = KernelDensity(bandwidth=h).fit(x).score_samples(q)
    naive = logsumexp(-0.5 * ((q - x.T) / h) ** 2, axis=1) - math.log(
        3 * h * math.sqrt(2 * math.pi))
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[:2], naive[:2], rtol=1e-13)
    assert np.all((got[2:] == -np.inf) | np.isfinite(got[2:]))
    compact = KernelDensity("epanechnikov", bandwidth=h).fit(x).score_samples(q)
    assert np.all(compact == -np.inf)


def test_unseen_level_with_zero_lambda_is_minus_infinity() -> None:
    X = np.array([[0.0, 0.0], [0.5, 1.0], [1.0, 1.0]])
    kde = KernelDensity(bandwidth=[0.5, 0.0], var_types="cu").fit(X)
    out = kde.score_samples([[0.0, 0.0], [0.0, 5.0]])
    assert np.isfinite(out[0]) and out[1] == -np.inf
    assert kde.score([[0.0, 5.0]]) == -np.inf


def _sm_objective(X: np.ndarray, types: str, bw: np.ndarray) -> float:
    return KDEMultivariate(X, var_type=types, bw=bw).loo_likelihood(bw, np.log)


@pytest.mark.slow
@pytest.mark.parametrize("types", ["c", "cuo"])
def test_cv_ml_is_at_least_as_good_as_statsmodels(types: str) -> None:
    X = _mixed(3, 50)[:, : len(types)]
    ours = KernelDensity(var_types=types).fit(X)
    sm = KDEMultivariate(X, var_type=types, bw="cv_ml")
    # statsmodels' objective is -sum log(sum_{j != i} K): ours is it, + n log(n - 1), over n
    n = X.shape[0]
    assert (_sm_objective(X, types, ours.bandwidth_) + n * math.log(n - 1)) / n == \
        pytest.approx(ours.cv_score_, rel=1e-10)
    # statsmodels' search leaves lambda unbounded (Aitchison-Aitken above (c - 1) / c weighs a
    # sample's own level below the others); compare with its optimum in the kernels' range
    upper = np.array([np.inf if t == "c" else (2 / 3 if t == "u" else 1.0) for t in types])
    theirs = np.minimum(sm.bw, upper)
    assert _sm_objective(X, types, ours.bandwidth_) <= _sm_objective(X, types, theirs) + 1e-9


def test_cv_ls_criterion_equals_statsmodels_imse() -> None:
    X = _mixed(4, 40)
    types = "cuoc"
    bw = np.array([0.5, 0.3, 0.4, 0.7])
    make = density_model("gaussian", types, levels_of(X, types), "aitchison-aitken",
                         "wang-van-ryzin")
    ours = objective_for("cv_ls", make, X, np.ones(X.shape[0]))(bw)
    theirs = KDEMultivariate(X, var_type=types, bw=bw).imse(bw)
    assert ours == pytest.approx(theirs, rel=1e-10)


@pytest.mark.slow
def test_cv_ls_search_is_at_least_as_good_as_statsmodels() -> None:
    x = _mixed(5, 60)[:, :1]
    ours = KernelDensity(bandwidth="cv_ls").fit(x)
    sm = KDEMultivariate(x, var_type="c", bw="cv_ls")
    imse = KDEMultivariate(x, var_type="c", bw=sm.bw).imse
    assert imse(ours.bandwidth_) <= imse(sm.bw) + 1e-12
    assert ours.cv_score_ == pytest.approx(imse(ours.bandwidth_), rel=1e-10)


def _naive_sj(x: np.ndarray) -> float:
    """Sheather-Jones 'ste' written out with explicit pair differences (R's bw.SJ, unbinned)."""
    n = x.size
    d = np.subtract.outer(x, x).ravel()

    def phi(u: np.ndarray) -> np.ndarray:
        return np.exp(-u * u / 2) / math.sqrt(2 * math.pi)

    def SD(g: float) -> float:
        u = d / g
        return float(np.sum((u**4 - 6 * u**2 + 3) * phi(u))) / (n * (n - 1) * g**5)

    def TD(g: float) -> float:
        u = d / g
        return float(np.sum((u**6 - 15 * u**4 + 45 * u**2 - 15) * phi(u))) / (n * (n - 1) * g**7)

    q75, q25 = np.percentile(x, [75, 25])
    scale = min(float(np.std(x, ddof=1)), (q75 - q25) / 1.349)
    a, b = 1.24 * scale * n ** (-1 / 7), 1.23 * scale * n ** (-1 / 9)
    c1 = 1 / (2 * math.sqrt(math.pi) * n)
    alph2 = 1.357 * (SD(a) / -TD(b)) ** (1 / 7)
    hmax = 1.144 * scale * n ** (-1 / 5)
    from scipy.optimize import brentq

    return brentq(lambda h: (c1 / SD(alph2 * h ** (5 / 7))) ** 0.2 - h, 0.1 * hmax, hmax,
                  xtol=1e-15, rtol=1e-14)


def test_sheather_jones_equals_naive_formula() -> None:
    x = np.random.default_rng(6).normal(size=(150, 1)) ** 3
    kde = KernelDensity(bandwidth="sheather-jones").fit(x)
    assert kde.bandwidth_[0] == pytest.approx(_naive_sj(x[:, 0]), rel=1e-10)


def test_sheather_jones_matches_r() -> None:
    from nadaraya.datasets import load_faithful

    data = load_faithful()
    # Computed once with R 4.2 (stats::bw.SJ, method "ste"):
    #   x <- faithful$eruptions; y <- faithful$waiting
    #   sprintf("%.17g", c(bw.SJ(x), bw.SJ(x, nb = 100000L, tol = 1e-14)))
    #   sprintf("%.17g", c(bw.SJ(y), bw.SJ(y, nb = 100000L, tol = 1e-14)))
    # R bins the pairwise distances (nb bins) and stops uniroot at tol = 0.1 * lower by
    # default; with 1e5 bins and a tight tol it approaches the exact sums computed here.
    r_values = {"eruptions": (0.14004353589438365, 0.13968409710065688),
                "waiting": (2.5043706713337994, 2.4968782564845045)}
    for x, (default, fine) in ((data.data[:, 0], r_values["eruptions"]),
                               (data.target, r_values["waiting"])):
        h = KernelDensity(bandwidth="sheather-jones").fit(x[:, None]).bandwidth_[0]
        assert h == pytest.approx(fine, rel=5e-5)
        assert h == pytest.approx(default, rel=5e-3)


def test_integer_weights_equal_repeated_rows() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 1))
    w = rng.integers(1, 4, size=40)
    rep = np.repeat(x, w, axis=0)
    q = np.linspace(-3, 3, 9)[:, None]
    for bw in (0.4, "scott", "silverman", "sheather-jones"):
        a = KernelDensity(bandwidth=bw).fit(x, sample_weight=w)
        b = KernelDensity(bandwidth=bw).fit(rep)
        np.testing.assert_allclose(a.bandwidth_, b.bandwidth_, rtol=1e-12)
        np.testing.assert_allclose(a.score_samples(q), b.score_samples(q), rtol=1e-12)


def test_dataframe_categories_equal_codes() -> None:
    X = _mixed(8, 50)[:, :3]
    frame = pd.DataFrame({"x": X[:, 0],
                          "u": pd.Categorical(np.array(["a", "b", "c"])[X[:, 1].astype(int)]),
                          "o": pd.Categorical(X[:, 2].astype(int), ordered=True,
                                              categories=[0, 1, 2, 3])})
    bw = [0.5, 0.3, 0.4]
    a = KernelDensity(bandwidth=bw).fit(frame)
    b = KernelDensity(bandwidth=bw, var_types="cuo").fit(X)
    assert a.var_types_ == "cuo"
    np.testing.assert_allclose(a.score_samples(frame.iloc[:10]), b.score_samples(X[:10]),
                               rtol=1e-13)


def test_tolerance_stays_within_its_bound() -> None:
    x = np.random.default_rng(9).normal(size=(3000, 1))
    q = np.linspace(-3, 3, 50)[:, None]
    exact = KernelDensity(bandwidth=0.2).fit(x).score_samples(q)
    fast = KernelDensity(bandwidth=0.2, tolerance=1e-8).fit(x).score_samples(q)
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-7)


@pytest.mark.parametrize(("kernel", "cdf"), [
    ("gaussian", stats.norm.cdf), ("laplacian", stats.laplace.cdf),
    ("epanechnikov", lambda u: np.where(u <= -1, 0.0, np.where(
        u >= 1, 1.0, 0.5 + 0.75 * u - 0.25 * u**3)))])
def test_samples_follow_the_density(kernel: str, cdf: object) -> None:
    x = np.array([[-2.0], [0.0], [0.5], [3.0]])
    w = np.array([1.0, 2.0, 1.0, 0.5])
    h = 0.7
    kde = KernelDensity(kernel, bandwidth=h).fit(x, sample_weight=w)
    draws = kde.sample(4000, random_state=0)[:, 0]

    def mixture(t: np.ndarray) -> np.ndarray:
        u = np.clip((np.asarray(t)[:, None] - x[:, 0]) / h, -1e9, 1e9)
        return np.clip(cdf(u), 0, 1) @ (w / w.sum())

    assert stats.kstest(draws, mixture).pvalue > 1e-3


def test_categorical_samples_follow_the_pmf() -> None:
    X = _mixed(10, 30)[:, [1, 2]]
    kde = KernelDensity(bandwidth=[0.3, 0.4], var_types="uo").fit(X)
    draws = kde.sample(20000, random_state=1)
    for level in range(3):
        for o in range(-2, 6):
            p = float(np.exp(kde.score_samples([[level, o]]))[0])
            freq = np.mean((draws[:, 0] == level) & (draws[:, 1] == o))
            assert abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / 20000) + 1e-4


@pytest.mark.parametrize(("X", "kwargs", "match"), [
    (np.array([[np.nan], [1.0]]), {"bandwidth": 1.0}, "NaN"),
    (np.array([[np.inf], [1.0]]), {"bandwidth": 1.0}, "infinity"),
    (np.zeros((0, 1)), {"bandwidth": 1.0}, "0 sample"),
    (np.array([[1.0]]), {"bandwidth": "cv_ml"}, "n_samples=1"),
    (np.array([[1.0]]), {"bandwidth": "scott"}, "n_samples=1"),
    (np.array([[1.0]]), {"bandwidth": "sheather-jones"}, "n_samples=1"),
    (np.ones((5, 1)), {"bandwidth": "cv_ml"}, "constant"),
    (np.ones((5, 1)), {"bandwidth": "sheather-jones"}, "spread"),
    (np.ones((5, 1)), {"bandwidth": 0.0}, "bandwidth\\[0\\]"),
    (np.ones((5, 1)), {"bandwidth": -1.0}, "must be a finite number > 0"),
    (np.ones((5, 1)), {"bandwidth": "nope"}, "not known"),
    (np.arange(10.0).reshape(5, 2), {"bandwidth": "sheather-jones"}, "collinear"),
    (np.ones((5, 1)), {"kernel": "softmax"}, "radial kernel"),
    (np.ones((5, 1)), {"bandwidth": "cv_ls", "kernel": "epanechnikov"}, "convolution"),
    (np.column_stack([np.arange(5.0), np.arange(5) % 2]),
     {"bandwidth": [0.5, 0.9], "var_types": "cu"}, "lambda"),
    (np.ones((5, 2)), {"bandwidth": "scott", "var_types": "cu"}, "categorical"),
    (np.ones((5, 2)), {"var_types": "c"}, "var_types"),
    (np.ones((5, 1)), {"ukernel": "x"}, "ukernel"),
    (np.ones((5, 2)), {"kernel": "cauchy", "bandwidth": 1.0}, "integral"),
])
def test_hostile_inputs(X: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        KernelDensity(**kwargs).fit(X).score_samples(X)


def test_one_row_with_a_number_is_a_kernel() -> None:
    kde = KernelDensity(bandwidth=2.0).fit([[1.0]])
    assert kde.score_samples([[1.0]])[0] == pytest.approx(-math.log(2.0 * math.sqrt(2 * math.pi)))
    assert kde.sample(3, random_state=0).shape == (3, 1)


def test_constant_column_with_numeric_bandwidth() -> None:
    X = np.column_stack([np.ones(10), np.arange(10.0)])
    kde = KernelDensity(bandwidth=[0.5, 1.0]).fit(X)
    assert np.isfinite(kde.score_samples(X)).all()


def test_bad_sample_arguments_and_queries() -> None:
    kde = KernelDensity(bandwidth=1.0).fit(np.arange(6.0)[:, None])
    with pytest.raises(NadarayaError, match="n_samples"):
        kde.sample(-1)
    with pytest.raises(ValueError, match="features"):
        kde.score_samples(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        kde.score_samples([[np.nan]])
    assert kde.score_samples(np.zeros((0, 1))).shape == (0,)
    with pytest.raises(NadarayaError, match="draws from the kernels"):
        KernelDensity("cauchy", bandwidth=1.0).fit([[0.0], [1.0]]).sample(2)
