"""Partial dependence and gradient figures: what they draw is what the estimators compute."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.plot import plot_gradient, plot_partial_dependence

matplotlib.use("Agg")


def _frame(rng: np.random.Generator, n: int = 60) -> tuple[pd.DataFrame, np.ndarray]:
    df = pd.DataFrame({"x": rng.uniform(0, 3, n), "z": rng.uniform(0, 1, n),
                       "shop": pd.Categorical(rng.choice(["a", "b"], n))})
    y = np.sin(2 * df["x"].to_numpy()) + df["z"].to_numpy() + (df["shop"] == "a").to_numpy()
    return df, y


def test_partial_dependence_of_a_continuous_feature(rng: np.random.Generator) -> None:
    df, y = _frame(rng)
    model = NadarayaWatsonRegressor(bandwidth=[0.3, 0.4, 0.2]).fit(df, y)
    ax = plot_partial_dependence(model, df, "x", grid=7)
    xs, curve = ax.lines[0].get_data()
    np.testing.assert_allclose(xs, np.linspace(df["x"].min(), df["x"].max(), 7))
    naive = [model.predict(df.assign(x=v)).mean() for v in xs]
    np.testing.assert_allclose(curve, naive, rtol=1e-12)
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), df["x"].to_numpy())  # the rug
    assert ax.get_xlabel() == "x"


def test_partial_dependence_of_a_categorical_feature(rng: np.random.Generator) -> None:
    df, y = _frame(rng)
    model = LocalPolynomialRegressor(bandwidth=[0.5, 0.5, 0.1]).fit(df, y)
    ax = plot_partial_dependence(model, df, 2)
    pos, curve = ax.lines[0].get_data()
    np.testing.assert_array_equal(pos, [0.0, 1.0])
    for level, value in zip(["a", "b"], curve, strict=True):
        q = df.assign(shop=pd.Categorical([level] * len(df), categories=["a", "b"]))
        np.testing.assert_allclose(value, model.predict(q).mean(), rtol=1e-12)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]


def test_gradient_of_a_one_feature_model_with_its_band(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, (80, 1))
    y = np.sin(x[:, 0]) + 0.2 * rng.normal(size=80)
    model = LocalPolynomialRegressor(bandwidth=0.5).fit(x, y)
    ax = plot_gradient(model, x, grid=9, level=0.9)
    xs, g = ax.lines[0].get_data()
    grad, std = model.gradient(xs[:, None], return_std=True)
    np.testing.assert_allclose(g, grad[:, 0], rtol=1e-12)
    band = ax.collections[0].get_paths()[0].vertices
    z = 1.6448536269514722  # the 95% quantile of the standard normal
    np.testing.assert_allclose(band[:, 1].max(), (grad[:, 0] + z * std[:, 0]).max(), rtol=1e-9)
    np.testing.assert_allclose(band[:, 1].min(), (grad[:, 0] - z * std[:, 0]).min(), rtol=1e-9)


def test_gradient_averaged_over_the_rows(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 3, (40, 2))
    y = X[:, 0] ** 2 + X[:, 1]
    model = NadarayaWatsonRegressor(bandwidth=[0.4, 0.4]).fit(X, y)
    ax = plot_gradient(model, X, 0, grid=5)
    xs, g = ax.lines[0].get_data()
    naive = []
    for v in xs:
        Q = X.copy()
        Q[:, 0] = v
        naive.append(model.gradient(Q)[:, 0].mean())
    np.testing.assert_allclose(g, naive, rtol=1e-10)
    assert not ax.collections  # no band for the average


def test_bad_arguments(rng: np.random.Generator) -> None:
    df, y = _frame(rng)
    model = NadarayaWatsonRegressor(bandwidth=[0.3, 0.4, 0.2]).fit(df, y)
    with pytest.raises(NadarayaError, match="categorical"):
        plot_gradient(model, df, "shop")
    with pytest.raises(NadarayaError, match="feature"):
        plot_partial_dependence(model, df, "nope")
    with pytest.raises(NadarayaError, match="level"):
        plot_gradient(model, df, "x", level=95)
    with pytest.raises(NadarayaError, match="output"):
        plot_partial_dependence(NadarayaWatsonRegressor(bandwidth=0.5).fit(
            df[["x"]], np.c_[y, y]), df[["x"]], 0, output=2)
