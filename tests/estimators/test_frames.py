"""DataFrames with categorical columns: types from dtypes, levels coded at fit and predict."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

pd = pytest.importorskip("pandas")

BW = [0.4, 0.3, 0.6, 0.5]


def _frame(seed: int = 0, n: int = 90) -> tuple[object, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    u = rng.integers(0, 3, n)
    o = rng.integers(0, 4, n)
    b = rng.integers(0, 2, n).astype(bool)
    df = pd.DataFrame({
        "x": x,
        "colour": pd.Categorical(np.array(["red", "green", "blue"])[u]),
        "size": pd.Categorical(np.array(["S", "M", "L", "XL"])[o],
                               categories=["S", "M", "L", "XL"], ordered=True),
        "flag": b,
    })
    y = np.sin(2 * x) + u - 0.5 * o + b + 0.3 * rng.normal(size=n)
    # the same data as numbers: colour by its categories' (sorted) order, size by rank
    codes = np.column_stack([x, df["colour"].cat.codes, o, b]).astype(float)
    return df, y, codes


@pytest.mark.parametrize("Est", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_dtypes_give_the_types_and_codes(Est) -> None:
    df, y, codes = _frame()
    model = Est(bandwidth=BW).fit(df, y)
    assert model._types == "cuou"
    assert list(model.feature_names_in_) == ["x", "colour", "size", "flag"]
    same = Est(bandwidth=BW, var_types="cuou").fit(codes, y)
    np.testing.assert_array_equal(model.predict(df), same.predict(codes))
    # predict codes by value, whatever the order of the queries' own categories
    shuffled = df.copy()
    shuffled["colour"] = shuffled["colour"].cat.reorder_categories(["red", "blue", "green"])
    shuffled["size"] = shuffled["size"].astype(str)  # plain strings of known levels
    np.testing.assert_array_equal(model.predict(shuffled), same.predict(codes))


def test_cv_names_the_irrelevant_features() -> None:
    rng = np.random.default_rng(3)
    n = 150
    x = rng.uniform(-2, 2, n)
    df = pd.DataFrame({"x": x, "noise": pd.Categorical(rng.integers(0, 3, n))})
    y = np.sin(2 * x) + 0.3 * rng.normal(size=n)
    model = NadarayaWatsonRegressor().fit(df, y)
    assert list(model.irrelevant_) == ["noise"]
    assert model.bandwidth_[1] == 2 / 3


def test_var_types_override_the_dtypes() -> None:
    df, y, codes = _frame()
    model = NadarayaWatsonRegressor(bandwidth=BW, var_types="cuuc").fit(df, y)
    same = NadarayaWatsonRegressor(bandwidth=BW, var_types="cuuc").fit(codes, y)
    np.testing.assert_array_equal(model.predict(df), same.predict(codes))
    # a numeric column as levels
    ints = df.assign(x=np.round(df["x"]).astype(int))
    NadarayaWatsonRegressor(bandwidth=BW, var_types="ouou").fit(ints, y)
    with pytest.raises(NadarayaError, match="var_types\\[1\\] is 'c' but column 'colour'"):
        NadarayaWatsonRegressor(bandwidth=BW, var_types="ccoc").fit(df, y)
    with pytest.raises(NadarayaError, match="var_types has 3 letter"):
        NadarayaWatsonRegressor(bandwidth=BW, var_types="cuo").fit(df, y)


def test_unseen_levels_are_refused_by_column_and_level() -> None:
    df, y, _ = _frame()
    model = NadarayaWatsonRegressor(bandwidth=BW).fit(df, y)
    q = df.iloc[:3].copy()
    q["colour"] = pd.Categorical(["red", "purple", "red"])
    with pytest.raises(NadarayaError, match=r"column 'colour' of X holds level\(s\) \['purple'\]"):
        model.predict(q)


def test_declared_levels_without_rows_get_weight_from_lambda_alone() -> None:
    df, y, _ = _frame()
    df["colour"] = df["colour"].cat.add_categories(["purple"])
    model = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3, 0.6, 0.5], ukernel="li-racine"
                                    ).fit(df, y)
    q = df.iloc[:3].copy()
    q["colour"] = pd.Categorical(["purple"] * 3, categories=df["colour"].cat.categories)
    out = NadarayaWatsonRegressor(bandwidth=[0.4, 1.0, 0.6, 0.5], ukernel="li-racine"
                                  ).fit(df, y)
    np.testing.assert_allclose(model.predict(q), out.predict(q), rtol=1e-12)


@pytest.mark.parametrize("when", ["fit", "predict"])
def test_missing_levels_are_refused_by_column(when: str) -> None:
    df, y, _ = _frame()
    bad = df.copy()
    bad.loc[2, "size"] = np.nan
    model = NadarayaWatsonRegressor(bandwidth=BW)
    with pytest.raises(NadarayaError, match=f"column 'size' of X has missing values at {when}"):
        if when == "fit":
            model.fit(bad, y)
        else:
            model.fit(df, y).predict(bad)


@pytest.mark.parametrize("column", [["a", "b", "c"], pd.array(["a", "b", "c"], dtype="string")])
def test_string_columns_are_refused_with_the_fix(column) -> None:
    df = pd.DataFrame({"x": [0.0, 1.0, 2.0], "s": column})
    with pytest.raises(NadarayaError, match=r"column 's' of X .*astype\('category'\)"):
        NadarayaWatsonRegressor(bandwidth=[0.5, 0.5]).fit(df, [1.0, 2.0, 3.0])


def test_numeric_frames_are_unchanged() -> None:
    _, y, codes = _frame()
    plain = pd.DataFrame({"a": codes[:, 0], "b": codes[:, 2]})
    model = NadarayaWatsonRegressor(bandwidth=0.5).fit(plain, y)
    assert model._coding is None and list(model.feature_names_in_) == ["a", "b"]
    arrays = NadarayaWatsonRegressor(bandwidth=0.5).fit(codes[:, [0, 2]], y)
    np.testing.assert_array_equal(model.predict(plain), arrays.predict(codes[:, [0, 2]]))
    with pytest.raises(ValueError, match="feature names"):
        model.predict(plain.rename(columns={"a": "z"}))


def test_grid_search_and_clone_on_a_frame() -> None:
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    df, y, _ = _frame()
    grid = GridSearchCV(LocalPolynomialRegressor(ukernel="li-racine"),
                        {"bandwidth": [BW, [0.8, 0.5, 0.5, 0.5]]}, cv=3).fit(df, y)
    assert list(grid.best_estimator_.feature_names_in_) == list(df.columns)
    assert clone(grid.best_estimator_).get_params()["ukernel"] == "li-racine"
    assert grid.predict(df).shape == y.shape
