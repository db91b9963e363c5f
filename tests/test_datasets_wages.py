"""The wage1 data set: what the file holds, read independently, and its dtypes."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from nadaraya.datasets import data_path, load_wage1
from nadaraya.datasets._wages import WAGE1_FEATURES

pd = pytest.importorskip("pandas")


def _rows() -> tuple[list[str], list[list[str]], list[str]]:
    with data_path("wage1").open(newline="", encoding="utf-8") as f:
        lines = f.read().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.reader(line for line in lines if not line.startswith("#")))
    return rows[0], rows[1:], comments


def test_matches_the_file_read_with_the_csv_module() -> None:
    header, rows, _ = _rows()
    frame = load_wage1()
    assert list(frame.columns) == header and len(frame) == len(rows) == 526
    for j, name in enumerate(header):
        cells = [r[j] for r in rows]
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            assert [str(v) for v in frame[name]] == cells
        else:
            np.testing.assert_array_equal(frame[name].to_numpy(), np.array(cells, dtype=float))


def test_dtypes_and_levels() -> None:
    frame = load_wage1()
    for name in ("lwage", "wage", "educ", "exper", "tenure"):
        assert frame[name].dtype == np.float64
    for name in ("female", "married", "nonwhite", "smsa"):
        assert isinstance(frame[name].dtype, pd.CategoricalDtype)
        assert not frame[name].cat.ordered and len(frame[name].cat.categories) == 2
    assert frame["numdep"].cat.ordered
    assert list(frame["numdep"].cat.categories) == list(range(7))
    assert not frame.isna().any().any()


def test_lwage_is_the_log_of_wage() -> None:
    frame = load_wage1()
    # wage is stored to cents; lwage to float32 precision
    slack = 0.005 / frame["wage"] + 1e-6
    assert (np.abs(np.exp(frame["lwage"]) / frame["wage"] - 1) <= slack + 1e-7).all()


def test_source_and_licence_are_stated() -> None:
    _, _, comments = _rows()
    text = " ".join(comments)
    assert "Wooldridge" in text and "MIT licence" in text and "public domain" in text
    frame = load_wage1()
    assert "Wooldridge" in frame.attrs["DESCR"] and frame.attrs["filename"].endswith(".csv")
    assert "MIT licence" in (load_wage1.__doc__ or "")


def test_return_X_y_is_the_np_example() -> None:
    X, y = load_wage1(return_X_y=True)
    assert list(X.columns) == WAGE1_FEATURES and y.name == "lwage"
    assert X.shape == (526, 5) and y.shape == (526,)
    assert not math.isnan(float(y.mean()))


@pytest.mark.slow
def test_local_linear_aicc_reproduces_np() -> None:
    """np's published fit of this data (Racine 2008, Table 4.1 and Section 4.3).

    R: ``npregbw(lwage ~ factor(female) + factor(married) + educ + exper + tenure,
    regtype = "ll", bwmethod = "cv.aic", data = wage1)``: bandwidths 0.01978275,
    0.15228887, 7.84663015, 8.43548175, 41.60546059; R^2 51.5 %.
    """
    pytest.importorskip("formulaic")
    from nadaraya.estimators import LocalPolynomialRegressor, from_formula

    wages = load_wage1()
    model = from_formula("lwage ~ C(female) + C(married) + educ + exper + tenure", wages,
                         LocalPolynomialRegressor(bandwidth="aicc"))
    np.testing.assert_allclose(model.bandwidth_, [0.01978275, 0.15228887, 7.84663015,
                                                  8.43548175, 41.60546059], rtol=2e-3)
    y = wages["lwage"].to_numpy()
    fitted = model.predict(model.formula_.features(wages))
    r2 = np.corrcoef(y, fitted)[0, 1] ** 2
    assert abs(r2 - 0.515) < 0.001
