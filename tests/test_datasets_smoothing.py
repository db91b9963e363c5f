"""The classic smoothing data sets shipped beside mcycle: faithful, ethanol, cps71."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from nadaraya.datasets import Bunch, data_path, load_cps71, load_ethanol, load_faithful

# name, loader, rows, feature names, target name, published summary (feature means, target
# mean, target range) as printed by summary() in R
CASES = [
    ("faithful", load_faithful, 272, ["eruptions"], "waiting", [3.488], 70.90, (43, 96)),
    ("ethanol", load_ethanol, 88, ["C", "E"], "NOx", [12.03, 0.9265], 1.957, (0.370, 4.028)),
    ("cps71", load_cps71, 205, ["age"], "logwage", [38.85], 13.49, (11.16, 15.06)),
]


def _independent(name: str) -> tuple[list[str], np.ndarray]:
    with data_path(name).open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    return rows[0], np.array(rows[1:], dtype=np.float64)


@pytest.mark.parametrize(("name", "load", "rows", "features", "target", "means", "ymean",
                          "yrange"), CASES)
def test_shape_content_and_metadata(name, load, rows, features, target, means, ymean,
                                    yrange) -> None:
    b = load()
    assert isinstance(b, Bunch)
    assert b.data.shape == (rows, len(features)) and b.target.shape == (rows,)
    assert b.data.dtype == np.float64 and b.data.flags.c_contiguous
    assert b.feature_names == features and b.target_names == [target]
    np.testing.assert_allclose(b.data.mean(axis=0), means, rtol=2e-3)
    assert b.target.mean() == pytest.approx(ymean, rel=1e-3)
    assert (b.target.min(), b.target.max()) == pytest.approx(yrange, abs=6e-3)
    assert "licence" in b.DESCR.lower() and "source" in b.DESCR.lower()
    header, table = _independent(name)
    X, y = load(return_X_y=True)
    np.testing.assert_array_equal(X, table[:, [header.index(f) for f in features]])
    np.testing.assert_array_equal(y, table[:, header.index(target)])


def test_as_frame() -> None:
    pytest.importorskip("pandas")
    X, y = load_ethanol(return_X_y=True, as_frame=True)
    assert list(X.columns) == ["C", "E"] and y.name == "NOx"
