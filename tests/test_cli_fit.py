"""``nadaraya fit``: a CSV in, the bandwidth and predictions out, clear errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from nadaraya.cli import main
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def _write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def data(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray, np.ndarray]:
    x = np.round(rng.uniform(0, 6, 60), 4)
    z = np.round(rng.uniform(-1, 1, 60), 4)
    y = np.round(2 * np.sin(x) + 0.3 * z + 0.5 * rng.normal(size=60), 4)
    path = _write(tmp_path / "data.csv", ["x", "z", "y"],
                  [[a, b, c] for a, b, c in zip(x, z, y, strict=True)])
    return path, np.c_[x, z], y


def _read(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def test_fit_prints_bandwidth_score_and_dof(data, capsys) -> None:
    path, X, y = data
    assert main(["fit", str(path), "--x", "x", "--y", "y"]) == 0
    out = capsys.readouterr().out
    model = LocalPolynomialRegressor().fit(X[:, :1], y)
    assert f"x {model.bandwidth_:.6g}" in out
    assert f"{model.cv_score_:.6g}" in out
    assert f"{model.effective_dof_:.4g}" in out
    assert "local linear" in out and "60 rows" in out


def test_fit_writes_predictions_at_the_data(data, tmp_path, capsys) -> None:
    path, X, y = data
    out = tmp_path / "pred.csv"
    assert main(["fit", str(path), "--x", "x", "--x", "z", "--y", "y", "--degree", "0",
                 "--bandwidth", "0.5,2", "--out", str(out), "--level", "0.9"]) == 0
    header, table = _read(out)
    assert header == ["x", "z", "y_pred", "std_error", "lower_90", "upper_90"]
    model = NadarayaWatsonRegressor(bandwidth=[0.5, 2.0]).fit(X, y)
    mean, std = model.predict(X, return_std=True)
    lo, hi = model.predict_interval(X, level=0.9)
    np.testing.assert_array_equal(table[:, :2], X)
    np.testing.assert_allclose(table[:, 2:], np.c_[mean, std, lo, hi], rtol=1e-15)
    assert "bandwidth (given): x 0.5, z 2" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "pred.csv"]


def test_fit_predicts_at_a_grid(data, tmp_path) -> None:
    path, X, y = data
    grid = _write(tmp_path / "grid.csv", ["x"], [[v] for v in (0.5, 3.0, 5.5)])
    out = tmp_path / "pred.csv"
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "silverman",
                 "--predict", str(grid), "--out", str(out)]) == 0
    _, table = _read(out)
    model = LocalPolynomialRegressor(bandwidth="silverman").fit(X[:, :1], y)
    np.testing.assert_allclose(table[:, 1], model.predict(table[:, :1]), rtol=1e-15)


def test_fit_draws_the_figure(data, tmp_path) -> None:
    path, _, _ = data
    fig = tmp_path / "fit.png"
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "0.4",
                 "--plot", str(fig)]) == 0
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_goes_to_standard_error(data, capsys) -> None:
    path, _, _ = data
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "searching the bandwidth" in err and "evaluations" in err


def _error(argv: list[str], capsys) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("nadaraya fit: error: ")
    return err


def test_missing_column(data, capsys) -> None:
    path, _, _ = data
    err = _error(["fit", str(path), "--x", "time", "--y", "y"], capsys)
    assert "'time'" in err and "x, z, y" in err


def test_non_numeric_values_name_the_lines(tmp_path, capsys) -> None:
    path = _write(tmp_path / "d.csv", ["x", "y"],
                  [[1, 2], [2, "abc"], [3, 4], [4, "inf"], [5, 1]])
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "1"], capsys)
    assert "2 value(s)" in err and "3 ('abc')" in err and "5 ('inf')" in err


def test_missing_values_name_the_lines_or_are_dropped(tmp_path, capsys) -> None:
    rows = [[i, np.sin(i)] for i in range(12)]
    rows[3][1], rows[7][0] = "", "NA"
    path = _write(tmp_path / "d.csv", ["x", "y"], rows)
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "1"], capsys)
    assert "column 'x'" in err and "1 missing value(s)" in err and "line 9" in err
    assert "--drop-missing" in err
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "1",
                 "--drop-missing"]) == 0
    assert "10 rows (2 with missing values dropped)" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["", "# only a comment\n", "x,y\n"])
def test_empty_file(tmp_path, capsys, content: str) -> None:
    path = tmp_path / "d.csv"
    path.write_text(content)
    err = _error(["fit", str(path), "--x", "x", "--y", "y"], capsys)
    assert "empty" in err or "no data rows" in err


def test_never_writes_over_an_input(data, tmp_path, capsys) -> None:
    path, _, _ = data
    before = path.read_bytes()
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--out", str(path)], capsys)
    assert "input file" in err
    grid = _write(tmp_path / "grid.csv", ["x"], [[1.0]])
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--predict", str(grid),
                  "--out", str(grid)], capsys)
    assert "input file" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize(("extra", "message"), [
    (["--x", "z", "--plot", "f.png"], "one --x column"),
    (["--plot", "f.gif"], ".png"),
    (["--bandwidth", "1,2,3"], "3 values"),
    (["--x", "y"], "cannot be a feature"),
    (["--kernel", "gausian"], "kernel"),
])
def test_bad_options(data, tmp_path, capsys, extra: list[str], message: str) -> None:
    path, _, _ = data
    argv = ["fit", str(path), "--x", "x", "--y", "y", *extra]
    argv = [str(tmp_path / a) if a.startswith("f.") else a for a in argv]
    assert message in _error(argv, capsys)


def test_usage_errors_exit_2(data) -> None:
    path, _, _ = data
    for argv in (["fit", str(path), "--y", "y"], ["fit", str(path), "--x", "x", "--y", "y",
                                                  "--bandwidth", "-1"],
                 ["fit", str(path), "--x", "x", "--y", "y", "--degree", "5"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
