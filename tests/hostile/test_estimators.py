"""The scikit-learn estimators under hostile input: finite predictions or an error naming the input.

scikit-learn's own checks (``parametrize_with_checks``) already cover NaN in X,
empty data and wrong shapes; here are magnitudes, dtypes, weights and sizes.
scikit-learn's input validation raises ``ValueError`` naming X, y or
sample_weight; those count as clear errors, like :class:`nadaraya.NadarayaError`.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor

from ._inputs import as_float64, assert_finite

REGRESSORS = (NadarayaWatsonRegressor, LocalPolynomialRegressor)


def _clear(fn, *names: str):
    """``fn()``, or None after a ValueError whose message names one of ``names``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except ValueError as exc:  # NadarayaError, or scikit-learn's validation
        assert any(re.search(rf"\b{re.escape(n)}\b", str(exc)) for n in names), str(exc)
        return None


def _data(rng: np.random.Generator, n: int = 40, d: int = 1) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, d))
    return X, np.sin(X.sum(1)) + rng.normal(0, 0.3, n)


@pytest.mark.parametrize("estimator", REGRESSORS)
@given(x_exp=st.integers(-300, 300), y_exp=st.integers(-320, 307))
def test_any_scale_of_x_and_y_gives_the_rescaled_fit(estimator, x_exp: int, y_exp: int) -> None:
    # Kernel regression is equivariant: scaling X (with the bandwidth) and y scales the fit.
    X, y = _data(np.random.default_rng(0))
    h = 0.4
    sx, sy = 10.0**x_exp, 10.0**y_exp
    # subnormal targets keep fewer digits: the reference fits the targets as stored
    ref = estimator(bandwidth=h).fit(X, (y * sy) / sy).predict(X)
    got = _clear(lambda: estimator(bandwidth=h * sx).fit(X * sx, y * sy).predict(X * sx),
                 "X", "y", "bandwidth")
    if got is None:
        return
    assert_finite(got, f"X * 1e{x_exp}, y * 1e{y_exp}")
    # and a subnormal prediction is rounded to a multiple of the smallest subnormal
    tol = 1e-9 * np.abs(ref).max() + 2 * 2.0**-1074 / sy
    np.testing.assert_allclose(got / sy, ref, rtol=0, atol=tol)


@pytest.mark.parametrize("estimator", REGRESSORS)
@pytest.mark.parametrize("top", [1e300, 1.7e308])
def test_targets_near_the_largest_float_fit_and_search(estimator, top: float, rng) -> None:
    X, y = _data(rng)
    y = y / np.abs(y).max() * top
    fitted = _clear(lambda: estimator().fit(X, y), "y")
    if fitted is None:
        return
    pred = fitted.predict(X)
    assert_finite(pred, "predictions")
    assert np.abs(pred).max() <= top * (1 + 1e-12)


@pytest.mark.parametrize("estimator", (*REGRESSORS, KernelClassifier))
@pytest.mark.parametrize("weights", ["nan", "inf", "negative", "zeros", "huge", "tiny", "length"])
def test_hostile_sample_weights(estimator, weights: str, rng) -> None:
    X, y = _data(rng)
    if estimator is KernelClassifier:
        y = (y > 0).astype(int)
    w = {"nan": np.r_[np.nan, np.ones(39)], "inf": np.r_[np.inf, np.ones(39)],
         "negative": np.r_[-1.0, np.ones(39)], "zeros": np.zeros(40),
         "huge": np.full(40, 1e300), "tiny": np.full(40, 1e-320),
         "length": np.ones(7)}[weights]
    fitted = _clear(lambda: estimator(bandwidth=0.5).fit(X, y, sample_weight=w),
                    "sample_weight", "weights")
    if fitted is None:
        assert weights in ("nan", "inf", "negative", "zeros", "length")
        return
    assert weights in ("huge", "tiny")
    ref = estimator(bandwidth=0.5).fit(X, y)
    out = fitted.predict_proba(X) if estimator is KernelClassifier else fitted.predict(X)
    want = ref.predict_proba(X) if estimator is KernelClassifier else ref.predict(X)
    np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("estimator", REGRESSORS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8", "bool"])
def test_every_numeric_dtype_fits(estimator, dtype: str, rng) -> None:
    X, y = _data(rng)
    Xd = (X * (10 if dtype in ("int32", "uint8") else 1)).astype(dtype)
    h = 5.0 if dtype in ("int32", "uint8") else (3.0 if dtype == "bool" else 0.5)
    pred = estimator(bandwidth=h).fit(Xd, y).predict(Xd)
    assert_finite(pred, dtype)
    ref = estimator(bandwidth=h).fit(Xd.astype(np.float64), y).predict(Xd.astype(np.float64))
    np.testing.assert_allclose(pred, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("estimator", REGRESSORS)
def test_pandas_nullable_columns(estimator, rng) -> None:
    X, y = _data(rng)
    frame = pd.DataFrame({"x": pd.array(X[:, 0], dtype="Float64")})
    target = pd.array(y, dtype="Float64")
    pred = estimator(bandwidth=0.5).fit(frame, target).predict(frame)
    np.testing.assert_allclose(pred, estimator(bandwidth=0.5).fit(X, y).predict(X), rtol=1e-12)
    missing = frame.copy()
    missing.loc[3, "x"] = pd.NA
    assert _clear(lambda: estimator(bandwidth=0.5).fit(missing, target), "X") is None


@pytest.mark.parametrize("estimator", REGRESSORS)
@pytest.mark.parametrize("case", ["one row", "two rows", "one distinct x", "far queries"])
def test_degenerate_data(estimator, case: str, rng) -> None:
    X, y = _data(rng)
    if case == "one row":
        fitted = _clear(lambda: estimator().fit(X[:1], y[:1]), "bandwidth", "samples")
        if fitted is not None:
            assert_finite(fitted.predict(X), case)
        fitted = estimator(bandwidth=1.0).fit(X[:1], y[:1])
        np.testing.assert_allclose(fitted.predict(X), y[0], rtol=1e-12)
        return
    if case == "two rows":
        assert_finite(estimator().fit(X[:2], y[:2]).predict(X), case)
        return
    if case == "one distinct x":
        Xc = np.ones((10, 1))
        fitted = _clear(lambda: estimator().fit(Xc, y[:10]), "X", "bandwidth")
        if fitted is not None:
            pred = fitted.predict(X)
            assert_finite(pred, case)
            np.testing.assert_allclose(pred, y[:10].mean(), rtol=1e-9)
        return
    fitted = estimator(bandwidth=0.1, kernel="epanechnikov").fit(X, y)
    far = _clear(lambda: fitted.predict(X + 100.0), "empty", "bandwidth")
    if far is not None:
        assert_finite(far, case)


@pytest.mark.parametrize("estimator", REGRESSORS)
def test_predicting_with_the_wrong_number_of_features_names_x(estimator, rng) -> None:
    X, y = _data(rng)
    fitted = estimator(bandwidth=0.5).fit(X, y)
    assert _clear(lambda: fitted.predict(np.ones((3, 2))), "X", "features") is None


def test_classifier_labels_of_any_kind(rng) -> None:
    X, y = _data(rng)
    for labels in (np.where(y > 0, "yes", "no").astype(object), (y > 0), np.where(y > 0, 7, -3)):
        fitted = KernelClassifier(bandwidth=0.5).fit(X, labels)
        proba = fitted.predict_proba(X)
        assert_finite(proba, str(labels.dtype))
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
        assert set(fitted.predict(X)) <= set(labels)
    assert as_float64(KernelClassifier(bandwidth=0.5).fit(X, np.ones(40)).predict_proba(X)).shape \
        == (40, 1)
