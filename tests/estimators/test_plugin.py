"""``bandwidth="dpi"``: Ruppert, Sheather and Wand's direct plug-in, as R's ``KernSmooth::dpill``.

The reference values were computed once with R 4.2 and KernSmooth 2.23-20;
the R code is beside each value. The simulated sets are deterministic
(quasi-random ``x``, a deterministic wiggle for the noise) so that R and
numpy build the same data.
"""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya._errors import NadarayaError
from nadaraya.datasets import load_mcycle
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.estimators._plugin import dpill

RTOL = 1e-6


def _golden(n: int, slope: float, wiggle: float, power: float, amp: float
            ) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(1, n + 1, dtype=float)
    x = (i * 0.6180339887498949) % 1
    return x, slope * x + amp * np.sin(wiggle * i**power)


def test_mcycle_matches_r() -> None:
    # library(KernSmooth); library(MASS); print(dpill(mcycle$times, mcycle$accel), digits=17)
    X, y = load_mcycle(return_X_y=True)
    assert dpill(X[:, 0], y) == pytest.approx(1.4452583655703251, rel=RTOL)
    model = LocalPolynomialRegressor(bandwidth="dpi").fit(X, y)
    assert model.bandwidth_ == pytest.approx(1.4452583655703251, rel=RTOL)
    assert LocalPolynomialRegressor(bandwidth="plug-in").fit(X, y).bandwidth_ == model.bandwidth_


def test_sine_matches_r() -> None:
    # i <- 1:300; x <- (i*0.6180339887498949) %% 1
    # y <- sin(2*pi*x) + 0.3*sin(7*i^1.5); print(dpill(x, y), digits=17)
    i = np.arange(1, 301, dtype=float)
    x = (i * 0.6180339887498949) % 1
    y = np.sin(2 * np.pi * x) + 0.3 * np.sin(7 * i**1.5)
    assert dpill(x, y) == pytest.approx(0.032348192553501146, rel=RTOL)


def test_skewed_design_matches_r() -> None:
    # i <- 1:1000; x <- 3*((i*0.7548776662466927) %% 1)^2
    # y <- x*exp(-x) + 0.1*cos(11*i^1.3); print(dpill(x, y), digits=17)
    i = np.arange(1, 1001, dtype=float)
    x = 3 * ((i * 0.7548776662466927) % 1) ** 2
    y = x * np.exp(-x) + 0.1 * np.cos(11 * i**1.3)
    assert dpill(x, y) == pytest.approx(0.1016154890484586, rel=RTOL)


def test_small_linear_set_and_options_match_r() -> None:
    # i <- 1:60; x <- (i*0.6180339887498949) %% 1; y <- 2*x + 0.5*sin(13*i^1.2)
    # print(dpill(x, y), digits=17)
    # print(dpill(x, y, blockmax=2, gridsize=101, trim=0.05, proptrun=0.1), digits=17)
    x, y = _golden(60, 2.0, 13.0, 1.2, 0.5)
    assert dpill(x, y) == pytest.approx(0.15223069196510769, rel=RTOL)
    assert dpill(x, y, blockmax=2, gridsize=101, trim=0.05, proptrun=0.1) == pytest.approx(
        0.083332414511378142, rel=RTOL)


def test_equivariance() -> None:
    # affine maps of x scale h, affine maps of y leave it, a permutation of the rows changes
    # nothing
    rng = np.random.default_rng(2)
    x = rng.normal(size=500)
    y = x**3 - x + rng.normal(size=500)
    h = dpill(x, y)
    assert dpill(3.0 * x + 7.0, y) == pytest.approx(3.0 * h, rel=1e-9)
    assert dpill(x, -2.0 * y + 5.0) == pytest.approx(h, rel=1e-9)
    p = rng.permutation(500)
    assert dpill(x[p], y[p]) == pytest.approx(h, rel=1e-12)


def test_integer_weights_are_repeated_rows() -> None:
    x, y = _golden(80, 1.0, 5.0, 1.4, 0.3)
    w = np.arange(80) % 3 + 1
    repeated = LocalPolynomialRegressor(bandwidth="dpi").fit(
        np.repeat(x, w)[:, None], np.repeat(y, w))
    weighted = LocalPolynomialRegressor(bandwidth="dpi").fit(x[:, None], y, sample_weight=w)
    assert weighted.bandwidth_ == pytest.approx(repeated.bandwidth_, rel=1e-12)


def test_targets_scale_changes_nothing() -> None:
    x, y = _golden(120, 1.0, 5.0, 1.4, 0.3)
    h = LocalPolynomialRegressor(bandwidth="dpi").fit(x[:, None], y).bandwidth_
    big = LocalPolynomialRegressor(bandwidth="dpi").fit(x[:, None], 1e200 * y).bandwidth_
    assert big == pytest.approx(h, rel=1e-12)


@pytest.mark.parametrize("make, match", [
    (lambda: NadarayaWatsonRegressor(bandwidth="dpi"), "local linear"),
    (lambda: LocalPolynomialRegressor(degree=2, bandwidth="dpi"), "local linear"),
    (lambda: LocalPolynomialRegressor(kernel="epanechnikov", bandwidth="dpi"), "Gaussian"),
])
def test_refused_settings(make: object, match: str) -> None:
    x, y = _golden(60, 2.0, 13.0, 1.2, 0.5)
    with pytest.raises(NadarayaError, match=match):
        make().fit(x[:, None], y)


def test_refused_data() -> None:
    x, y = _golden(60, 2.0, 13.0, 1.2, 0.5)
    model = LocalPolynomialRegressor(bandwidth="dpi")
    with pytest.raises(NadarayaError, match="one output"):
        model.fit(x[:, None], np.c_[y, y])
    with pytest.raises(NadarayaError, match="feature"):
        model.fit(np.c_[x, x**2], y)
    with pytest.raises(NadarayaError, match="integer frequencies"):
        model.fit(x[:, None], y, sample_weight=np.full(60, 0.5))
    with pytest.raises(NadarayaError, match="integer frequencies"):
        LocalPolynomialRegressor(bandwidth="dpi", weight_type="analytic").fit(
            x[:, None], y, sample_weight=np.full(60, 2.0))
    with pytest.raises(NadarayaError, match="at least"):
        model.fit(x[:4, None], y[:4])
    with pytest.raises(NadarayaError, match="at least"):
        model.fit(np.ones((30, 1)), y[:30])
    with pytest.raises(ValueError):
        model.fit(np.r_[x[:-1], np.nan][:, None], y)
    with pytest.raises(NadarayaError, match="pilot"):
        model.fit(x[:, None], 2.0 * x + 1.0)
