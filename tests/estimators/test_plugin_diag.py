"""The diagonal plug-in bandwidths of ``KernelDensity(bandwidth="sheather-jones")`` in 2 to 6-D.

Oracle: R's ``ks`` package (1.14.0, Debian's r-cran-ks, R 4.2). The values
below were computed once from the data sets of :func:`_design` and R's
``faithful`` (written to CSV with 17 digits) by:

.. code-block:: r

    library(ks)
    x <- as.matrix(read.csv(file, header = FALSE)); n <- nrow(x); d <- ncol(x)
    H <- Hpi.diag(x, binned = FALSE, pilot = "dscalar")   # the default pilot for d > 2
    x.star <- ks:::pre.scale(x)
    g4 <- ks:::gdscalar(x = x.star, r = 0, n = n, d = d, verbose = FALSE, nstage = 2,
                        binned = FALSE)
    psi <- ks:::kfe(x = x.star, G = g4^2 * diag(d), binned = FALSE, deriv.order = 4,
                    deriv.vec = TRUE, add.index = FALSE, verbose = FALSE)
    P <- matrix(0, d, d)   # psi_ij: the entries (i, i, j, j) of vec Psi_4
    for (i in 1:d) for (j in 1:d) P[i, j] <- psi[(((i-1)*d + i) - 1)*d^2 + (j-1)*d + j]
    cc <- (4*pi)^(-d/2) / n; s <- log(sqrt(diag(Hns(x.star))))
    for (it in 1:100) {   # Newton on log h of ks' criterion (pi.temp of Hpi.diag)
      u <- exp(2*s); E <- cc*exp(-sum(s)); pu <- drop(P %*% u)
      s <- s - solve(E + 2*diag(u*pu, d) + 2*outer(u, u)*P, -E + u*pu)
    }
    sprintf("%.17g", sqrt(diag(H)))                        # "hpi"
    sprintf("%.17g", exp(s) * sqrt(diag(var(x))))          # "minimum"

``Hpi.diag`` stops its BFGS search at a relative change ``1e-8`` of the
criterion, which leaves the bandwidths about ``1e-5`` from the criterion's
minimum: ours are compared with the minimum of ks' own criterion (ks'
functionals, minimized to rounding in R) to ``1e-9``, and with ``Hpi.diag``'s
output to ``1e-4``. For ``d = 2`` ks' default pilot is ``"samse"``; the values
are those of ``pilot = "dscalar"``, the pilot used here for every ``d``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri

from nadaraya.datasets import load_faithful
from nadaraya.estimators import KernelDensity
from nadaraya.estimators._density_cv import objective_for
from nadaraya.estimators._density_fit import density_model, levels_of
from nadaraya.estimators._plugin_density import sheather_jones
from nadaraya.estimators._plugin_diag import _pilots, _psi4, plugin_diagonal

KS = {
    2: {"hpi": [0.122796914476412, 1.6094756102309289],
        "minimum": [0.12279660706107101, 1.6094725589809655]},
    3: {"hpi": [0.34581587585062423, 0.30475145892653777, 0.32370035683995702],
        "minimum": [0.34580850386405265, 0.3047578885178861, 0.3236976083173746]},
    4: {"hpi": [0.35381136775529815, 0.35320234002966444, 0.36910938053710335,
                0.36917707621162837],
        "minimum": [0.35381445519214527, 0.35320339447580568, 0.36911213008204702,
                    0.36917664526160243]},
    6: {"hpi": [0.35420046562103069, 0.39267308948243396, 0.41524438433408561,
                0.41487178740901115, 0.43323088570598833, 0.43670830265489691],
        "minimum": [0.35419000450878219, 0.3926569552355782, 0.41525791430160652,
                    0.41487129407819578, 0.43321424300880623, 0.43672151448477214]},
}


def _design(n: int, d: int) -> np.ndarray:
    """Deterministic skewed, correlated data: normal scores of a Weyl sequence, mixed."""
    i = np.arange(1, n + 1)[:, None]
    roots = np.sqrt(np.array([2.0, 3, 5, 7, 11, 13])[:d])
    z = ndtri(np.mod(i * roots, 1.0))
    M = np.eye(d) + 0.4 * np.triu(np.ones((d, d)), 1)
    return z @ M + 0.5 * z[:, ::-1] ** 2


def _data(d: int) -> np.ndarray:
    if d == 2:
        faithful = load_faithful()
        return np.c_[faithful.data[:, 0], faithful.target]
    return _design(150, d)


@pytest.mark.parametrize("d", [2, 3, 4, 6])
def test_matches_ks_hpi_diag(d: int) -> None:
    X = _data(d)
    h = KernelDensity(bandwidth="sj").fit(X).bandwidth_
    np.testing.assert_allclose(h, KS[d]["minimum"], rtol=1e-9)
    np.testing.assert_allclose(h, KS[d]["hpi"], rtol=1e-4)


def test_functionals_equal_the_naive_double_sums() -> None:
    # psi_ij = n^-2 sum_kl d^4 phi_g(x_k - x_l) / dx_i^2 dx_j^2, written out on all pairs
    X = _design(60, 3)
    Z = X / X.std(axis=0, ddof=1)
    w = np.ones(len(Z))
    g = 0.4
    U = (Z[:, None, :] - Z[None, :, :]) / g
    phi = np.exp(-0.5 * (U**2).sum(-1)) / ((2 * math.pi) ** 1.5 * g**3)
    second = (U**2 - 1) / g**2
    fourth = (U**4 - 6 * U**2 + 3) / g**4
    naive = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            term = fourth[..., i] if i == j else second[..., i] * second[..., j]
            naive[i, j] = (phi * term).sum() / 60**2
    np.testing.assert_allclose(_psi4(Z, w, g), naive, rtol=1e-12)
    # the pilot g4 of ks (gdscalar, nstage = 2) on these data, from R as in the module doc:
    #   sprintf("%.17g", ks:::gdscalar(x = ks:::pre.scale(x), r = 0, n = 150, d = 3,
    #           verbose = FALSE, nstage = 2, binned = FALSE))   # x: _design(150, 3)
    X = _design(150, 3)
    assert _pilots(X / X.std(axis=0, ddof=1), np.ones(150))[1] == pytest.approx(
        0.40145525717214903, rel=1e-12)


def test_scaling_a_column_scales_its_bandwidth() -> None:
    X = _design(120, 3)
    c = np.array([1e-3, 1.0, 250.0])
    np.testing.assert_allclose(plugin_diagonal(X * c), plugin_diagonal(X) * c, rtol=1e-10)


def test_integer_weights_equal_repeated_rows() -> None:
    X = _design(50, 2)
    w = (np.arange(50) % 3 + 1).astype(float)
    np.testing.assert_allclose(plugin_diagonal(X, w),
                               plugin_diagonal(np.repeat(X, w.astype(int), axis=0)), rtol=1e-12)


def test_one_feature_keeps_sheather_jones() -> None:
    x = _design(100, 1)
    for name in ("sj", "sheather-jones"):
        assert KernelDensity(bandwidth=name).fit(x).bandwidth_[0] == sheather_jones(x[:, 0])


def test_mixed_data_plug_in_for_continuous_and_cv_for_categorical() -> None:
    X = _design(120, 2)
    level = (np.arange(120) % 3 + (X[:, 0] > 1)).astype(float)
    M = np.c_[X[:, 0], level, X[:, 1]]
    kde = KernelDensity(bandwidth="sj", var_types="cuc").fit(M)
    h = kde.bandwidth_
    np.testing.assert_allclose(h[[0, 2]], plugin_diagonal(X), rtol=1e-12)
    # lambda minimizes the likelihood cross-validation with the continuous bandwidths held
    types = "cuc"
    make = density_model("gaussian", types, levels_of(M, types), "aitchison-aitken",
                         "wang-van-ryzin")
    cv = objective_for("cv_ml", make, M, np.ones(120), None)
    grid = np.linspace(0.0, 0.75, 61)  # the Aitchison-Aitken range for 4 levels
    best = min(cv(np.array([h[0], lam, h[2]])) for lam in grid)
    assert kde.cv_score_ == pytest.approx(cv(h), rel=1e-12)
    assert cv(h) <= best + 1e-9
    assert 0.0 <= h[1] <= 0.75
    # one continuous column with a categorical one: Sheather-Jones on it
    one = KernelDensity(bandwidth="sj", var_types="cu").fit(M[:, :2])
    assert one.bandwidth_[0] == sheather_jones(M[:, 0])


@pytest.mark.parametrize(("X", "kwargs", "match"), [
    (_design(40, 6)[:, [0, 1, 2, 3, 4, 5, 0]] + np.arange(7) * 1e-3 * np.arange(40)[:, None],
     {}, "1 to 6"),
    (np.c_[np.arange(10) % 2, np.arange(10) % 3].astype(float), {"var_types": "uu"},
     "none"),
    (np.c_[np.arange(10.0), 2 * np.arange(10.0) + 1], {}, "collinear"),
    (np.array([[1.0, 2.0]]), {}, "n_samples=1"),
    (np.c_[np.ones(10), np.arange(10.0)], {}, "constant"),
    (np.array([[np.nan, 1.0], [0.0, 1.0]]), {}, "NaN"),
])
def test_hostile_inputs(X: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        KernelDensity(bandwidth="sj", **kwargs).fit(X)
