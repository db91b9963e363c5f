"""``nadaraya fit``: a CSV in, the bandwidth and predictions out, clear errors."""

from __future__ import annotations

import codecs
import csv
import errno
import os
from pathlib import Path

import numpy as np
import pytest

from nadaraya.cli import main
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

from .cli._inputs import guard_inputs


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


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
    mean = model.predict(X)
    lo, hi = model.predict_interval(X, level=0.9)
    # the band's own standard error: heteroscedasticity-consistent, sum_j S_xj^2 e_j^2
    S = model.smoother_matrix(X)
    e = (y - S @ y) / np.sqrt(1.0 - np.diag(S))
    std = np.sqrt((S**2) @ e**2)
    np.testing.assert_array_equal(table[:, :2], X)
    np.testing.assert_allclose(table[:, 2:], np.c_[mean, std, lo, hi], rtol=1e-9)
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
    assert "never writes over an input" in err
    grid = _write(tmp_path / "grid.csv", ["x"], [[1.0]])
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--predict", str(grid),
                  "--out", str(grid)], capsys)
    assert "never writes over an input" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("option", ["--out", "--plot"])
def test_never_writes_through_a_hard_link_to_an_input(data, tmp_path, capsys,
                                                      option: str) -> None:
    path, _, _ = data
    link = tmp_path / ("linked.png" if option == "--plot" else "linked.csv")
    os.link(path, link)
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "1", option,
                  str(link)], capsys)
    assert f"{option} {link} is a hard link to the input {path}" in err


def test_out_and_plot_to_standard_output(data, capsys) -> None:
    path, X, y = data
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "0.5", "--out",
                 "-"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.reader(captured.out.splitlines()))
    assert rows[0] == ["x", "y_pred", "std_error", "lower_95", "upper_95"]
    model = LocalPolynomialRegressor(bandwidth=0.5).fit(X[:, :1], y)
    np.testing.assert_allclose(np.array(rows[1:], dtype=float)[:, 1], model.predict(X[:, :1]),
                               rtol=1e-15)
    assert "bandwidth (given)" in captured.err and "standard output" in captured.err


def test_disk_full_keeps_the_old_output(data, tmp_path, capsys, monkeypatch) -> None:
    path, _, _ = data
    out = tmp_path / "pred.csv"
    out.write_text("previous predictions\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "1", "--out",
                  str(out)], capsys)
    assert "No space left on device" in err and err.count("\n") == 1
    assert out.read_text() == "previous predictions\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "pred.csv"]


def test_plot_format_follows_the_suffix(data, tmp_path) -> None:
    path, _, _ = data
    for suffix, magic in ((".svg", b"<?xml"), (".pdf", b"%PDF")):
        fig = tmp_path / f"fit{suffix}"
        assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "0.4",
                     "--plot", str(fig)]) == 0
        assert fig.read_bytes().startswith(magic)


# -- encodings: the same table saved in several encodings reads the same ------------------
def _encoded_copies(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, bytes]]:
    x = np.round(rng.uniform(0, 6, 40), 3)
    y = np.round(np.sin(x) + 0.2 * rng.normal(size=40), 3)
    text = "# mesures de température\ntempérature,débit\n" + "".join(
        f"{a},{b}\n" for a, b in zip(x, y, strict=True))
    reference = tmp_path / "utf8.csv"
    reference.write_bytes(text.encode("utf-8"))
    copies = {
        "cp1252": text.encode("cp1252"),
        "utf-8-sig": codecs.BOM_UTF8 + text.encode("utf-8"),
        "utf-16": text.encode("utf-16"),  # with its byte-order mark
        "utf-16-le": text.encode("utf-16-le"),  # without one
        "utf-32": text.encode("utf-32"),
    }
    return reference, copies


def _fit_output(path: Path, capsys, *extra: str) -> str:
    assert main(["fit", str(path), "--x", "température", "--y", "débit", "--bandwidth", "0.5",
                 *extra]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _results(out: str) -> list[str]:
    """The printed results, without the line naming the file and the one naming its encoding."""
    return [line for line in out.splitlines()[1:] if not line.startswith("read ")]


@pytest.mark.parametrize("encoding", ["cp1252", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"])
def test_non_utf8_csv_is_read_and_the_encoding_named(tmp_path, capsys, rng,
                                                     encoding: str) -> None:
    reference, copies = _encoded_copies(tmp_path, rng)
    expected = _fit_output(reference, capsys)
    path = tmp_path / f"{encoding}.csv"
    path.write_bytes(copies[encoding])
    out = _fit_output(path, capsys)
    assert _results(out) == _results(expected) and len(_results(out)) == 3, "the same fit"
    named = {"utf-8-sig": None, "utf-16": "utf-16", "utf-16-le": "utf-16-le",
             "utf-32": "utf-32", "cp1252": "cp1252"}[encoding]
    if named is None:
        assert "read " not in out
    else:
        assert f"read {path} as {named}" in out


def test_encoding_option(tmp_path, capsys, rng) -> None:
    reference, copies = _encoded_copies(tmp_path, rng)
    path = tmp_path / "latin.csv"
    path.write_bytes(copies["cp1252"])
    expected = _fit_output(reference, capsys)
    out = _fit_output(path, capsys, "--encoding", "latin-1")
    assert f"read {path} as latin-1" in out
    assert _results(out) == _results(expected)
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--encoding", "klingon"], capsys)
    assert "--encoding 'klingon' is not an encoding" in err
    err = _error(["fit", str(path), "--x", "x", "--y", "y", "--encoding", "utf-8"], capsys)
    assert "is not valid utf-8" in err and "byte 0xe9" in err and "--encoding" in err


def test_binary_file_is_refused(tmp_path, capsys) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(bytes(range(256)) * 4)
    err = _error(["fit", str(path), "--x", "x", "--y", "y"], capsys)
    assert "binary file" in err and err.count("\n") == 1


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


def test_fit_takes_the_direct_plug_in_bandwidth(tmp_path, capsys) -> None:
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 6, 80))
    y = np.sin(x) + 0.3 * rng.normal(size=80)
    path = _write(tmp_path / "d.csv", ["x", "y"], np.c_[x, y].tolist())
    assert main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "dpi"]) == 0
    model = LocalPolynomialRegressor(bandwidth="dpi").fit(x[:, None], y)
    assert f"{float(model.bandwidth_):.6g}" in capsys.readouterr().out
