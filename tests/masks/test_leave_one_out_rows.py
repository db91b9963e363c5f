"""``LeaveOneOut(rows=...)``: query ``i`` hides key ``rows[i]``, for a few rows of a fit."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError
from nadaraya.masks import LeaveOneOut, MatrixMask


@pytest.mark.parametrize("engine", ["dense", "streamed", "pruned", "auto"])
def test_rows_hide_the_named_keys(rng: np.random.Generator, engine: str) -> None:
    x = rng.uniform(0, 6, 700)
    y = np.c_[np.sin(x), x]
    rows = np.array([699, 3, 350, 3, 0])
    visible = np.arange(x.size)[None, :] != rows[:, None]
    try:
        got = nadaraya.smooth(x[rows], x, y, "gaussian", LeaveOneOut(rows=rows),
                              bandwidth=0.2, engine=engine)
    except NadarayaError as exc:  # an engine may not run this problem at all
        assert engine == "pruned" and "cannot run" in str(exc)
        return
    ref = nadaraya.smooth(x[rows], x, y, "gaussian", MatrixMask(visible), bandwidth=0.2,
                          engine="dense")
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


def test_default_is_the_diagonal(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 1, 50)
    a = nadaraya.smooth(x, x, x, "gaussian", LeaveOneOut(), bandwidth=0.1, engine="dense")
    b = nadaraya.smooth(x, x, x, "gaussian", LeaveOneOut(rows=np.arange(50)), bandwidth=0.1,
                        engine="dense")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rows, match", [
    (np.array([0.5, 1.0]), "key indices"),
    (np.zeros((2, 1), int), "key indices"),
    (np.array([True, False]), "key indices"),
    (np.array([0, 1, 2]), "one key per query"),
    (np.array([0, 10]), r"\[0, 5\)"),
    (np.array([-1, 0]), r"\[0, 5\)"),
])
def test_bad_rows_are_refused(rows: np.ndarray, match: str) -> None:
    x = np.linspace(0, 1, 5)
    with pytest.raises(NadarayaError, match=match):
        nadaraya.smooth(x[:2], x, x, "gaussian", LeaveOneOut(rows=rows), bandwidth=0.1)
