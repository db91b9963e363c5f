"""summary(): every field against the fitted attributes it reports, in text, frame and HTML."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def _frame(rng: np.random.Generator, n: int = 80) -> tuple[pd.DataFrame, np.ndarray]:
    df = pd.DataFrame({"x": rng.uniform(0, 3, n),
                       "shop": pd.Categorical(rng.choice(["a", "b", "c"], n)),
                       "size": pd.Categorical(rng.choice(["s", "m", "l"], n),
                                              categories=["s", "m", "l"], ordered=True)})
    y = np.sin(2 * df["x"].to_numpy()) + (df["shop"] == "a").to_numpy() + 0.1 * rng.normal(size=n)
    return df, y


def _r2(y: np.ndarray, fitted: np.ndarray, w: np.ndarray | None = None) -> float:
    w = np.ones(len(y)) if w is None else w
    mean = np.average(y, weights=w)
    return float(1 - w @ (y - fitted) ** 2 / (w @ (y - mean) ** 2))


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_fields_are_the_fitted_attributes(rng: np.random.Generator, cls: type) -> None:
    df, y = _frame(rng)
    # lambda of 'size' at the upper end of Li-Racine's range: smoothed out
    model = cls(bandwidth=[0.4, 0.1, 1.0]).fit(df, y)
    s = model.summary()
    info = s.info
    assert info["n_samples"] == 80 and info["n_features"] == 3 and info["n_outputs"] == 1
    assert info["kernel"] == "gaussian" and info["criterion"] == "fixed"
    assert info["cv_score"] == model.cv_score_
    assert info["effective_dof"] == model.effective_dof_
    assert info["residual_std"] == np.sqrt(model.residual_variance_)
    assert info["irrelevant"] == ["size"] == list(model.irrelevant_)
    np.testing.assert_allclose(info["r_squared"], _r2(y, model.predict(df)), rtol=1e-10)
    assert [f["name"] for f in s.features] == list(model.feature_names_in_)
    assert [f["type"] for f in s.features] == ["continuous", "unordered", "ordered"]
    assert [f["kernel"] for f in s.features] == ["gaussian", "aitchison-aitken", "li-racine"]
    assert [f["parameter"] for f in s.features] == ["h", "lambda", "lambda"]
    assert [f["bandwidth"] for f in s.features] == list(model.bandwidth_)
    assert [f["smoothed_out"] for f in s.features] == [False, False, True]

    text = str(s)
    assert type(model).__name__ in text and "smoothed out" in text
    for token in ("shop", "aitchison-aitken", "lambda=0.1", "h=0.4", f"{model.cv_score_:.6g}",
                  f"{model.effective_dof_:.6g}", "Irrelevant regressors:", "size"):
        assert token in text
    frame = s.as_frame()
    assert list(frame.index) == ["x", "shop", "size"]
    assert frame.loc["size", "smoothed_out"] and frame.loc["shop", "bandwidth"] == 0.1
    assert frame.attrs["cv_score"] == model.cv_score_
    html = s._repr_html_()
    assert html.startswith("<h4>") and "<table" in html and "aitchison-aitken" in html


def test_criterion_and_search_results(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 3, (60, 1))
    y = np.sin(2 * x[:, 0]) + 0.2 * rng.normal(size=60)
    for bandwidth, criterion in (("cv", "cv"), ("aicc", "aicc"), ("scott", "scott")):
        model = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(x, y)
        s = model.summary()
        assert s.info["criterion"] == criterion
        assert s.features[0]["bandwidth"] == model.bandwidth_
        assert s.info["irrelevant"] == []
    assert "LocalPolynomialRegressor (degree 2)" in str(
        LocalPolynomialRegressor(degree=2, bandwidth=0.5).fit(x, y).summary())


def test_multi_output_and_sample_weights(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 3, (50, 2))
    Y = np.c_[X[:, 0] + 0.1 * rng.normal(size=50), np.sin(X[:, 1])]
    w = rng.uniform(0.5, 2, 50)
    model = LocalPolynomialRegressor(bandwidth=[0.5, np.inf]).fit(X, Y, sample_weight=w)
    s = model.summary()
    assert s.info["n_outputs"] == 2
    fitted = model.predict(X)
    expected = [_r2(Y[:, k], fitted[:, k], w) for k in range(2)]
    np.testing.assert_allclose(s.info["r_squared"], expected, rtol=1e-10)
    np.testing.assert_allclose(s.info["residual_std"], np.sqrt(model.residual_variance_))
    assert s.info["irrelevant"] == ["x1"] and s.features[1]["smoothed_out"]
    assert "x1" in str(s) and "inf" in str(s)


def test_kernel_object_without_bandwidth(rng: np.random.Generator) -> None:
    from nadaraya.kernels import Gaussian

    x = rng.uniform(0, 3, (30, 1))
    model = NadarayaWatsonRegressor(Gaussian(0.3), bandwidth=None).fit(x, x[:, 0])
    s = model.summary()
    assert s.features[0]["bandwidth"] is None and "in kernel" in str(s)
    assert "Gaussian" in s.info["kernel"]


def test_unfitted_model_is_refused() -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        NadarayaWatsonRegressor().summary()
