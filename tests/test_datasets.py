"""The shipped data sets: shape, content, metadata, and the loader's options."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.datasets import Bunch, data_path, load_mcycle
from nadaraya.datasets._base import load_csv


def _read_with_csv_module(name: str) -> tuple[list[str], np.ndarray]:
    with data_path(name).open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    return rows[0], np.array(rows[1:], dtype=np.float64)


def test_mcycle_shape_and_dtype() -> None:
    X, y = load_mcycle(return_X_y=True)
    assert X.shape == (133, 1) and y.shape == (133,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.flags.c_contiguous and y.flags.c_contiguous


def test_mcycle_published_summary() -> None:
    # Ranges and means as printed by summary(MASS::mcycle) in R.
    X, y = load_mcycle(return_X_y=True)
    times = X[:, 0]
    assert (times.min(), times.max()) == (2.4, 57.6)
    assert (y.min(), y.max()) == (-134.0, 75.0)
    assert times.mean() == pytest.approx(25.18, abs=0.005)
    assert y.mean() == pytest.approx(-25.55, abs=0.005)
    assert np.all(np.diff(times) >= 0), "the measurements are listed in time order"
    assert len(np.unique(times)) < len(times), "several measurements share one time"


def test_mcycle_matches_an_independent_csv_reader() -> None:
    header, table = _read_with_csv_module("mcycle")
    X, y = load_mcycle(return_X_y=True)
    assert header == ["times", "accel"]
    np.testing.assert_array_equal(X[:, 0], table[:, 0])
    np.testing.assert_array_equal(y, table[:, 1])


def test_mcycle_bunch_metadata() -> None:
    b = load_mcycle()
    assert isinstance(b, Bunch)
    assert b.feature_names == ["times"] and b.target_names == ["accel"]
    assert b.frame is None
    assert b.data.shape == (133, 1) and b.target.shape == (133,)
    assert "Silverman" in b.DESCR and "licence" in b.DESCR.lower()
    assert b.filename == str(data_path("mcycle"))
    assert b["data"] is b.data


def test_mcycle_as_frame() -> None:
    pd = pytest.importorskip("pandas")
    b = load_mcycle(as_frame=True)
    assert isinstance(b.frame, pd.DataFrame) and list(b.frame.columns) == ["times", "accel"]
    X, y = load_mcycle(return_X_y=True, as_frame=True)
    assert list(X.columns) == ["times"] and y.name == "accel"
    np.testing.assert_array_equal(X.to_numpy(), load_mcycle(return_X_y=True)[0])


def test_load_csv_skips_comments_and_reads_header() -> None:
    columns, table, description, path = load_csv("mcycle")
    assert columns == ["times", "accel"] and table.shape == (133, 2)
    first_comment = path.read_text(encoding="utf-8").splitlines()[0]
    assert first_comment.startswith("# ") and description.startswith(first_comment[2:])


def test_unknown_data_set_names_the_shipped_ones() -> None:
    with pytest.raises(NadarayaError, match="mcycle"):
        data_path("no-such-data")


def test_bunch_attribute_access() -> None:
    b = Bunch(a=1)
    b.c = 2
    assert b.a == 1 and b["c"] == 2 and "c" in dir(b)
    with pytest.raises(AttributeError):
        _ = b.missing
