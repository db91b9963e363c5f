"""Estimators pass ``tolerance`` to every engine call: search, leave-one-out pass, prediction."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    _base,
)


def _data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(0, 6, (n, 1))
    return x, 2 * np.sin(x[:, 0]) + rng.normal(size=n)


def test_large_exact_fit_warns_naming_tolerance(rng: np.random.Generator,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "_EXACT_PAIRS", 1000.0)
    x, y = _data(rng, 40)
    with pytest.warns(UserWarning, match="tolerance="):
        NadarayaWatsonRegressor().fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NadarayaWatsonRegressor(bandwidth=0.3, tolerance=1e-6).fit(x, y)


def test_below_the_threshold_no_warning(rng: np.random.Generator) -> None:
    x, y = _data(rng, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NadarayaWatsonRegressor(bandwidth=0.3).fit(x, y)


@pytest.mark.parametrize("bad", [0.0, -1.0, 1.5, float("nan"), "small"])
def test_bad_tolerance_refused_at_fit(rng: np.random.Generator, bad: object) -> None:
    x, y = _data(rng, 20)
    with pytest.raises(NadarayaError, match="tolerance"):
        NadarayaWatsonRegressor(bandwidth=0.3, tolerance=bad).fit(x, y)


@pytest.mark.parametrize("make", [
    lambda t: NadarayaWatsonRegressor(bandwidth=0.2, tolerance=t),
    lambda t: LocalPolynomialRegressor(degree=1, bandwidth=0.2, tolerance=t),
])
def test_fit_within_tolerance_of_exact(rng: np.random.Generator, make: object) -> None:
    x, y = _data(rng, 3000)
    tol = 1e-9
    exact = make(None).fit(x, y)  # type: ignore[operator]
    fast = make(tol).fit(x, y)  # type: ignore[operator]
    q = np.linspace(-0.5, 6.5, 500)[:, None]
    scale = np.abs(y).max()
    # Nadaraya-Watson: each mean within tol * max|y|; the local-linear fit combines
    # moments each within tol of their column's largest, so allow its conditioning
    factor = 1.0 if isinstance(exact, NadarayaWatsonRegressor) else 1e3
    assert np.abs(fast.predict(q) - exact.predict(q)).max() <= factor * tol * scale
    np.testing.assert_allclose(fast.smoother_diagonal(), exact.smoother_diagonal(),
                               rtol=factor * 10 * tol, atol=factor * tol)


def test_cv_search_with_tolerance_finds_the_exact_bandwidth(rng: np.random.Generator) -> None:
    x, y = _data(rng, 2000)
    exact = NadarayaWatsonRegressor().fit(x, y)
    fast = NadarayaWatsonRegressor(tolerance=1e-10).fit(x, y)
    assert fast.bandwidth_ == pytest.approx(exact.bandwidth_, rel=1e-4)
    assert fast.cv_score_ == pytest.approx(exact.cv_score_, rel=1e-8)


def test_classifier_with_tolerance(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, (1500, 1))
    labels = (np.sin(x[:, 0]) + 0.3 * rng.normal(size=1500) > 0).astype(int)
    exact = KernelClassifier(bandwidth=0.3).fit(x, labels)
    fast = KernelClassifier(bandwidth=0.3, tolerance=1e-9).fit(x, labels)
    q = np.linspace(0, 6, 300)[:, None]
    assert np.abs(fast.predict_proba(q) - exact.predict_proba(q)).max() <= 1e-9
