"""Formulas: ``y ~ x + C(g) + O(k)`` gives the features, their types and their names."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import (
    KernelClassifier,
    LocalPolynomialRegressor,
    MetricKernelRegressor,
    NadarayaWatsonRegressor,
    from_formula,
    parse_formula,
)

pd = pytest.importorskip("pandas")
pytest.importorskip("formulaic")


def _data(seed: int = 0, n: int = 80) -> object:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "x": rng.uniform(1, 3, n),
        "g": rng.choice(["a", "b", "c"], n),
        "k": rng.integers(0, 4, n),
    })
    df["y"] = np.sin(2 * df["x"]) + (df["g"] == "b") - 0.3 * df["k"] + 0.2 * rng.normal(size=n)
    return df


def _naive_nw(x, g, k, y, xq, gq, kq, h, lam_g, lam_k, levels_g):
    """Nadaraya-Watson with the product of Gaussian, Aitchison-Aitken and Li-Racine ordered."""
    out = []
    for a, b, c in zip(xq, gq, kq, strict=True):
        w = (np.exp(-0.5 * ((a - x) / h) ** 2)
             * np.where(g == b, 1 - lam_g, lam_g / (levels_g - 1))
             * lam_k ** np.abs(k - c))
        out.append(np.sum(w * y) / np.sum(w))
    return np.array(out)


def test_formula_fit_matches_the_naive_product_kernel() -> None:
    df = _data()
    h = [0.3, 0.2, 0.4]
    model = from_formula("y ~ x + C(g) + O(k)", df, NadarayaWatsonRegressor(bandwidth=h))
    assert model._types == "cuo"
    assert model.feature_names_in_.tolist() == ["x", "g", "k"]
    queries = df.iloc[:7]
    got = model.predict(model.formula_.features(queries))
    want = _naive_nw(df.x.to_numpy(), df.g.to_numpy(), df.k.to_numpy(), df.y.to_numpy(),
                     queries.x.to_numpy(), queries.g.to_numpy(), queries.k.to_numpy(),
                     *h, levels_g=3)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("Est", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_formula_equals_a_typed_frame(Est) -> None:
    df = _data(1)
    model = from_formula("y ~ x + C(g) + O(k)", df, Est(bandwidth=[0.5, 0.3, 0.5]))
    X = pd.DataFrame({"x": df.x, "g": df.g.astype("category"),
                      "k": pd.Categorical(df.k, ordered=True)})
    same = Est(bandwidth=[0.5, 0.3, 0.5]).fit(X, df.y)
    np.testing.assert_array_equal(model.predict(model.formula_.features(df)), same.predict(X))


def test_expressions_are_continuous_features_named_by_their_text() -> None:
    df = _data(2)
    model = from_formula("y ~ np.log(x) + C(g)", df, NadarayaWatsonRegressor(bandwidth=[0.2, 0.1]))
    assert model.feature_names_in_.tolist() == ["np.log(x)", "g"]
    X = pd.DataFrame({"lx": np.log(df.x), "g": df.g.astype("category")})
    same = NadarayaWatsonRegressor(bandwidth=[0.2, 0.1]).fit(X, df.y)
    np.testing.assert_allclose(model.predict(model.formula_.features(df)), same.predict(X),
                               rtol=1e-13)


def test_plain_names_follow_the_dtype() -> None:
    df = _data(3)
    df["g"] = df["g"].astype("category")
    df["k"] = pd.Categorical(df["k"], ordered=True)
    design = parse_formula("y ~ x + g + k")
    X, _ = design.frames(df)
    assert [X[c].dtype.name for c in X] == ["float64", "category", "category"]
    assert X["k"].cat.ordered and not X["g"].cat.ordered
    # O() of an unordered category keeps its order of levels; C() of an ordered one drops order
    X, _ = parse_formula("y ~ O(g) + C(k)").frames(df)
    assert X["g"].cat.ordered and list(X["g"].cat.categories) == ["a", "b", "c"]
    assert not X["k"].cat.ordered


def test_missing_rows_are_dropped_and_counted() -> None:
    df = _data(4)
    df.loc[[2, 5], "x"] = np.nan
    df.loc[5, "g"] = None
    df.loc[9, "y"] = np.nan
    model = from_formula("y ~ x + C(g)", df, NadarayaWatsonRegressor(bandwidth=[0.4, 0.2]))
    assert model.formula_.dropped == 3
    assert model.formula_.missing_by_column == {"x": 2, "g": 1, "y": 1}
    assert model.n_features_in_ == 2 and model.X_fit_.shape[0] == len(df) - 3
    with pytest.raises(NadarayaError, match=r"3 row\(s\).*x: 2, g: 1, y: 1"):
        from_formula("y ~ x + C(g)", df, missing="raise")
    with pytest.raises(NadarayaError, match="missing must be"):
        parse_formula("y ~ x").frames(df, missing="keep")


def test_classifier_and_metric_regressor() -> None:
    df = _data(5)
    df["label"] = np.where(df.y > df.y.median(), "high", "low")
    clf = from_formula("label ~ x + C(g)", df, KernelClassifier(bandwidth=[0.3, 0.1]))
    assert clf.feature_names_in_.tolist() == ["x", "g"] and set(clf.classes_) == {"high", "low"}
    codes = np.column_stack([df.x, df.g.astype("category").cat.codes]).astype(float)
    same = KernelClassifier(bandwidth=[0.3, 0.1], var_types="cu").fit(codes, df.label)
    np.testing.assert_array_equal(clf.predict_proba(clf.formula_.features(df)),
                                  same.predict_proba(codes))
    with pytest.raises(NadarayaError, match="feature 'g' is categorical"):
        from_formula("y ~ x + C(g)", df, MetricKernelRegressor(max_iter=2))
    metric = from_formula("y ~ x + np.sqrt(x)", df, MetricKernelRegressor(max_iter=2))
    assert metric.feature_names_in_.tolist() == ["x", "np.sqrt(x)"]


@pytest.mark.parametrize("formula, match", [
    ("y ~ x:g", "interaction 'x:g'"),
    ("y ~ x * C(g)", "interaction"),
    ("~ x", "one target"),
    ("y ~ x | g", "no '|' parts"),
    ("C(y) ~ x", "cannot be C"),
    ("y ~ C(g, levels=['a'])", "takes one column name"),
    ("y ~ 1", "no feature"),
    ("y ~ x + C(x)", "more than one feature"),
    ("y ~ x +", "cannot be parsed"),
])
def test_bad_formulas_are_refused(formula, match) -> None:
    with pytest.raises(NadarayaError, match=match):
        parse_formula(formula)


def test_bad_data_is_refused() -> None:
    df = _data(6)
    with pytest.raises(NadarayaError, match="must be a string"):
        parse_formula(3)
    with pytest.raises(NadarayaError, match="column 'zz', which is not in the data"):
        from_formula("y ~ x + C(zz)", df)
    with pytest.raises(NadarayaError, match="must be a pandas DataFrame"):
        from_formula("y ~ x", df.to_numpy())
    with pytest.raises(NadarayaError, match="write C\\(g\\)"):
        from_formula("y ~ x + g", df)  # a text column needs a type
    with pytest.raises(NadarayaError, match="cannot be evaluated"):
        from_formula("y ~ np.log(nothere)", df)
    empty = df.copy()
    empty["x"] = np.nan
    with pytest.raises(NadarayaError, match="every row"):
        from_formula("y ~ x", empty)
    inf = df.copy()
    inf.loc[0, "x"] = np.inf
    with pytest.raises(ValueError, match=r"(?i)inf"):
        from_formula("y ~ x", inf, NadarayaWatsonRegressor(bandwidth=0.3))


def test_one_row_and_unseen_levels() -> None:
    df = _data(7)
    model = from_formula("y ~ x + C(g)", df, NadarayaWatsonRegressor(bandwidth=[0.3, 0.1]))
    new = pd.DataFrame({"x": [1.5], "g": ["z"]})
    with pytest.raises(NadarayaError, match="did not have at fit"):
        model.predict(model.formula_.features(new))
    one = model.predict(model.formula_.features(df.iloc[[0]]))
    assert one.shape == (1,) and np.isfinite(one).all()


def test_missing_formulaic_names_the_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "formulaic", None)
    with pytest.raises(NadarayaError, match="pip install formulaic"):
        parse_formula("y ~ x")
