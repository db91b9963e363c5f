"""``nadaraya demo``: the engines table, the bandwidth choice and the --out file."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nadaraya
from nadaraya.cli import COMMANDS, build_parser, main
from nadaraya.cli import demo as demo_module
from nadaraya.datasets import data_path, load_mcycle
from nadaraya.engine import ENGINES

from .cli._inputs import digest, guard_inputs


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


def _naive_nw(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, h: float,
              leave_one_out: bool = False) -> np.ndarray:
    out = np.empty(len(queries))
    for i, q in enumerate(queries):
        w = np.exp(-0.5 * ((q - keys) / h) ** 2)
        if leave_one_out:
            w[i] = 0.0
        out[i] = np.sum(w * values) / np.sum(w)
    return out


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["demo", "--repeat", "1", "--no-figures", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _engine_rows(out: str) -> dict[str, str]:
    """The rows of the engines table (the explain() text below it is indented)."""
    return {line.split()[0]: line for line in out.splitlines()
            if line[:1].strip() and line.split()[0] in ENGINES}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_and_a_runner(name: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as info:
        parser.parse_args([name, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: nadaraya {name}")
    module = importlib.import_module(f"nadaraya.cli.{COMMANDS[name]}")
    assert callable(module.run) and callable(module.add_arguments)


def test_demo_reports_every_engine(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, "--bandwidth", "2")
    assert status == 0, err
    X, y = load_mcycle(return_X_y=True)
    auto = nadaraya.explain(X[:, 0], X[:, 0], y, "gaussian", bandwidth=2.0)
    rows = _engine_rows(out)
    assert set(rows) == set(ENGINES)
    for name, line in rows.items():
        assert (line.split()[1] == "yes") == (name == auto.engine)
        if auto.reasons[name].startswith("cannot run"):
            assert auto.reasons[name] in line
        else:
            diff = float(line.split()[-1])
            assert diff < 1e-12, f"{name} differs from the float64 dense result: {line}"
    assert f"automatic choice, {auto.engine!r}" in out
    assert str(auto) in out


def test_demo_float32_stays_close_to_float64(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, "--bandwidth", "2", "--dtype", "float32")
    assert status == 0, err
    diffs = [float(line.split()[-1]) for line in _engine_rows(out).values() if " ms " in line]
    assert diffs and max(diffs) < 1e-5
    assert all(d > 0 for d in diffs), "float32 results cannot equal float64 ones exactly"


def test_out_csv_matches_a_naive_formula(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "sub" / "fit.csv"
    status, out, err = _run(capsys, "--bandwidth", "2", "--out", str(out_file))
    assert status == 0, err
    assert str(out_file) in out
    table = np.genfromtxt(out_file, delimiter=",", names=True)
    assert table.dtype.names == ("times", "accel", "fit")
    X, y = load_mcycle(return_X_y=True)
    np.testing.assert_array_equal(table["times"], X[:, 0])
    np.testing.assert_array_equal(table["accel"], y)
    np.testing.assert_allclose(table["fit"], _naive_nw(X[:, 0], X[:, 0], y, 2.0), rtol=1e-12,
                               atol=1e-12)
    assert [p.name for p in out_file.parent.iterdir()] == ["fit.csv"], "no temporary file left"


def test_out_on_a_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "grid.csv"
    status, _, err = _run(capsys, "--bandwidth", "3", "--grid", "7", "--out", str(out_file))
    assert status == 0, err
    table = np.genfromtxt(out_file, delimiter=",", names=True)
    assert table.dtype.names == ("times", "fit") and len(table) == 7
    X, y = load_mcycle(return_X_y=True)
    np.testing.assert_allclose(table["fit"], _naive_nw(table["times"], X[:, 0], y, 3.0),
                               rtol=1e-12, atol=1e-12)


def test_out_replaces_an_existing_file_whole(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "fit.csv"
    out_file.write_text("old contents that are longer than one line\n" * 1000)
    status, _, err = _run(capsys, "--bandwidth", "2", "--grid", "3", "--out", str(out_file))
    assert status == 0, err
    lines = out_file.read_text().splitlines()
    assert lines[0] == "times,fit" and len(lines) == 4


def test_out_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "fit.csv"
    out_file.write_text("keep me\n")

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    status, _, err = _run(capsys, "--bandwidth", "2", "--out", str(out_file))
    assert status == 1 and "disk full" in err
    assert out_file.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["fit.csv"], "the temporary file is removed"


def test_out_refuses_the_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = data_path("mcycle")
    before = source.read_bytes()
    status, _, err = _run(capsys, "--out", str(source))
    assert status == 1 and "--out" in err and "input" in err
    assert source.read_bytes() == before
    link = tmp_path / "link.csv"
    os.symlink(source, link)
    status, _, err = _run(capsys, "--out", str(link))
    assert status == 1 and "input" in err
    assert source.read_bytes() == before


def test_out_refuses_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "--out", str(tmp_path))
    assert status == 1 and "is a folder" in err


def test_out_folder_that_cannot_be_made_is_refused_before_the_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    status, out, err = _run(capsys, "--out", str(tmp_path / "file" / "sub" / "fit.csv"))
    assert status == 1 and "goes through a file as if it were a folder" in err and "--out" in err
    assert out == "", "nothing ran"


def test_out_dash_writes_only_the_csv_to_standard_output(
        capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, "--bandwidth", "2", "--grid", "5", "--out", "-")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "times,fit" and len(lines) == 6, "standard output holds the CSV alone"
    X, y = load_mcycle(return_X_y=True)
    table = np.array([line.split(",") for line in lines[1:]], dtype=float)
    np.testing.assert_allclose(table[:, 1], _naive_nw(table[:, 0], X[:, 0], y, 2.0),
                               rtol=1e-12)
    assert "engine" in err and "to standard output" in err, "messages moved to stderr"
    assert not Path("-").exists()


def test_figures_folder_that_is_a_file_is_refused_before_the_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "figs").write_text("a file")
    status = main(["demo", "--repeat", "1", "--figures", str(tmp_path / "figs")])
    captured = capsys.readouterr()
    assert status == 1 and "--figures" in captured.err and "not a folder" in captured.err
    assert captured.out == ""


def test_loo_bandwidth_minimizes_the_naive_leave_one_out_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    X, y = load_mcycle(return_X_y=True)
    t = X[:, 0]
    h, _ = demo_module._loo_bandwidth(t, y, "gaussian")
    grid = np.geomspace(np.ptp(t) / 100, np.ptp(t) / 4, 25)
    errors = [np.mean((_naive_nw(t, t, y, g, leave_one_out=True) - y) ** 2) for g in grid]
    assert h == pytest.approx(grid[int(np.argmin(errors))], rel=1e-12)
    status, out, err = _run(capsys)
    assert status == 0, err
    assert f"bandwidth {h:.4g} ms" in out and "leave-one-out" in out


def test_rule_bandwidth_is_stated(capsys: pytest.CaptureFixture[str]) -> None:
    from nadaraya.bandwidth import silverman

    torch = pytest.importorskip("torch")
    X, _ = load_mcycle(return_X_y=True)
    h = float(silverman(torch.from_numpy(X))[0])
    status, out, err = _run(capsys, "--bandwidth", "silverman")
    assert status == 0, err
    assert f"bandwidth {h:.4g} ms: Silverman's rule" in out


@pytest.mark.parametrize("args, message", [
    (["--kernel", "no-such-kernel"], "kernel"),
    (["--kernel", "uniform", "--bandwidth", "0.01", "--grid", "500"], "empty"),
])
def test_bad_input_fails_with_a_message(args: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, *args)
    assert status == 1
    assert err.startswith("nadaraya demo: error:") and message in err


@pytest.mark.parametrize("args", [["--bandwidth", "wide"], ["--bandwidth", "-1"],
                                  ["--bandwidth", "nan"], ["--bandwidth", "inf"],
                                  ["--repeat", "0"], ["--grid", "x"]])
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", *args])
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_empty_policy_nan_lets_gaps_through(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "fit.csv"
    status, out, err = _run(capsys, "--kernel", "uniform", "--bandwidth", "0.01", "--grid",
                            "500", "--empty", "nan", "--out", str(out_file))
    assert status == 0, err
    fit = np.genfromtxt(out_file, delimiter=",", names=True)["fit"]
    assert np.isnan(fit).any() and np.isfinite(fit).any()
    diffs = [float(line.split()[-1]) for line in _engine_rows(out).values() if " ms " in line]
    assert diffs and max(diffs) < 1e-12, out


def _console_script() -> Path:
    script = Path(sys.executable).with_name("nadaraya")
    if not script.exists():
        pytest.skip("the nadaraya console script is not installed beside this Python")
    return script


def test_console_script_runs_the_demo(tmp_path: Path) -> None:
    out_file = tmp_path / "fit.csv"
    before = digest(data_path("mcycle"))
    proc = subprocess.run([str(_console_script()), "demo", "--repeat", "1", "--no-figures",
                           "--out", str(out_file)], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert digest(data_path("mcycle")) == before
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^engine\s+auto", proc.stdout, re.MULTILINE)
    assert set(_engine_rows(proc.stdout)) == set(ENGINES)
    assert out_file.read_text().startswith("times,accel,fit\n")


def test_python_dash_m_and_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "nadaraya", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"nadaraya {nadaraya.__version__}"
    proc = subprocess.run([sys.executable, "-m", "nadaraya"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "demo" in proc.stderr


@pytest.mark.slow
def test_demo_writes_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures = tmp_path / "figs" / "new"
    assert main(["demo", "--repeat", "1", "--figures", str(figures)]) == 0
    assert f"figures in {figures}" in capsys.readouterr().out
    names = sorted(p.name for p in figures.iterdir())
    assert names == ["knn_vs_kernel.png", "mcycle_cv.png", "mcycle_fit.png",
                     "mcycle_weights.png"], "the four figures and no temporary file"
    assert all((figures / n).read_bytes().startswith(b"\x89PNG") for n in names)
