"""``nadaraya fit`` on tables with levels: CSV, TSV, Parquet, encodings, formulas, missing rows."""

from __future__ import annotations

import csv
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from nadaraya.cli import main
from nadaraya.estimators import NadarayaWatsonRegressor, from_formula

from .cli._inputs import guard_inputs

pd = pytest.importorskip("pandas")
pytest.importorskip("formulaic")

BW = "0.6,0.2,0.3"  # x, then the lambdas of g and k


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


@pytest.fixture
def frame(rng: np.random.Generator):
    n = 70
    df = pd.DataFrame({
        "x": np.round(rng.uniform(0, 4, n), 4),
        "g": rng.choice(["été", "hiver", "printemps"], n),
        "k": rng.integers(1, 5, n),
    })
    df["y"] = np.round(np.sin(df.x) + (df.g == "hiver") + 0.2 * df.k
                       + 0.2 * rng.normal(size=n), 4)
    return df


def _expected(df, x=("x", "g", "k")):
    """The same fit through the Python API (the CLI's oracle)."""
    X = pd.DataFrame({"x": df.x, "g": df.g.astype("category"),
                      "k": pd.Categorical(df.k, ordered=True)})[list(x)]
    return NadarayaWatsonRegressor(bandwidth=[float(v) for v in BW.split(",")]).fit(X, df.y)


def _read_out(path: Path):
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def _run(args, capsys):
    status = main(["fit", *map(str, args), "--degree", "0", "--bandwidth", BW])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("suffix, sep, encoding", [
    (".csv", ",", "utf-8"), (".tsv", "\t", "utf-8"), (".txt", ";", "latin-1"),
    (".csv", "|", "utf-8-sig"), (".csv", ",", "cp1252"),
])
def test_text_tables_detected_delimiter_and_encoding(frame, tmp_path, capsys, suffix, sep,
                                                     encoding) -> None:
    path = tmp_path / f"data{suffix}"
    frame.to_csv(path, sep=sep, index=False, encoding=encoding)
    out_path = tmp_path / "out.csv"
    status, out, err = _run([path, "--x", "x", "--x", "g", "--x", "k", "--y", "y",
                             "--categorical", "g", "--ordered", "k", "--out", out_path], capsys)
    assert status == 0, err
    assert "g lambda 0.2, k lambda 0.3" in out
    model = _expected(frame)
    header, rows = _read_out(out_path)
    assert header[:4] == ["x", "g", "k", "y_pred"]
    assert [r[1] for r in rows] == frame.g.tolist()  # levels written as their labels
    np.testing.assert_allclose([float(r[3]) for r in rows],
                               model.predict(_expected_frame(frame)), rtol=1e-12)
    if encoding in ("latin-1", "cp1252"):  # not UTF-8: read as cp1252, which includes é
        assert "as cp1252" in out


def _expected_frame(df):
    return pd.DataFrame({"x": df.x, "g": df.g.astype("category"),
                         "k": pd.Categorical(df.k, ordered=True)})


def test_given_separator_and_encoding(frame, tmp_path, capsys) -> None:
    path = tmp_path / "data.dat"
    frame.to_csv(path, sep=" ", index=False, encoding="latin-1")
    status, out, err = _run([path, "--x", "x", "--x", "g", "--x", "k", "--y", "y",
                             "--categorical", "g", "--ordered", "k", "--sep", "space",
                             "--encoding", "latin-1"], capsys)
    assert status == 0, err
    assert f"on {len(frame)} rows" in out and "as latin-1" in out
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(path), "--x", "x", "--y", "y", "--sep", "ab"])
    assert exc.value.code == 2 and "must be one character" in capsys.readouterr().err


def test_parquet_round_trip(frame, tmp_path, capsys) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "data.parquet"
    typed = frame.assign(g=frame.g.astype("category"))
    typed.to_parquet(path)
    out_path = tmp_path / "out.csv"
    # g keeps its category dtype in the file; k is made ordered on the command line
    status, out, err = _run([path, "--x", "x", "--x", "g", "--x", "k", "--y", "y",
                             "--ordered", "k", "--out", out_path], capsys)
    assert status == 0, err
    assert "g lambda 0.2, k lambda 0.3" in out
    _, rows = _read_out(out_path)
    np.testing.assert_allclose([float(r[3]) for r in rows],
                               _expected(frame).predict(_expected_frame(frame)), rtol=1e-12)


def test_formula_matches_the_api(frame, tmp_path, capsys) -> None:
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    out_path = tmp_path / "out.csv"
    status, out, err = _run([path, "--formula", "y ~ np.log1p(x) + C(g) + O(k)",
                             "--out", out_path], capsys)
    assert status == 0, err
    assert "y ~ np.log1p(x) + g + k" in out
    model = from_formula("y ~ np.log1p(x) + C(g) + O(k)", frame,
                         NadarayaWatsonRegressor(bandwidth=[0.6, 0.2, 0.3]))
    header, rows = _read_out(out_path)
    assert header[:4] == ["np.log1p(x)", "g", "k", "y_pred"]
    np.testing.assert_allclose([float(r[3]) for r in rows],
                               model.predict(model.formula_.features(frame)), rtol=1e-12)


def test_missing_values_are_counted(frame, tmp_path, capsys) -> None:
    df = frame.astype(object)
    df.loc[[1, 4], "x"] = ""
    df.loc[4, "g"] = "NA"
    df.loc[6, "k"] = "."
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    args = [path, "--x", "x", "--x", "g", "--x", "k", "--y", "y", "--categorical", "g",
            "--ordered", "k"]
    status, _, err = _run(args, capsys)
    assert status == 1
    assert "3 row(s)" in err and "x (2), g (1), k (1)" in err and "--drop-missing" in err
    status, out, err = _run([*args, "--drop-missing"], capsys)
    assert status == 0
    assert "dropped 3 row(s) with missing values in columns x (2), g (1), k (1)" in err
    assert f"{len(frame) - 3} rows (3 with missing values dropped)" in out


def test_numeric_tables_report_dropped_rows_too(frame, tmp_path, capsys) -> None:
    df = frame.astype(object)
    df.loc[[2, 3], "x"] = "NA"
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    status = main(["fit", str(path), "--x", "x", "--y", "y", "--bandwidth", "0.5",
                   "--drop-missing"])
    err = capsys.readouterr().err
    assert status == 0 and "dropped 2 row(s) with missing values in columns x (2)" in err


@pytest.mark.parametrize("extra, message", [
    (["--x", "nothere", "--y", "y"], "column 'nothere' is not in DATA"),
    (["--x", "x", "--y", "y", "--categorical", "g"], "is not an --x column"),
    (["--x", "g", "--y", "y", "--categorical", "g", "--ordered", "g"], "both --categorical"),
    (["--x", "x", "--x", "g", "--y", "y", "--sep", ","], "holds values that are not numbers"),
    (["--x", "x", "--y", "g", "--categorical", "g"], "must be numeric"),
    (["--formula", "y ~ x", "--y", "y"], "leave out --y"),
    (["--formula", "y ~ x:k"], "interaction"),
    (["--formula", "y ~ C(nothere)"], "column 'nothere' is not in DATA"),
    (["--x", "x"], "--x needs --y"),
])
def test_clear_errors(frame, tmp_path, capsys, extra, message) -> None:
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    status = main(["fit", str(path), *extra, "--bandwidth", "0.5"])
    err = capsys.readouterr().err
    assert status == 1 and message in err, err


def test_unseen_level_in_the_grid(frame, tmp_path, capsys) -> None:
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    grid = tmp_path / "grid.csv"
    pd.DataFrame({"x": [1.0], "g": ["automne"], "k": [2]}).to_csv(grid, index=False)
    status, _, err = _run([path, "--formula", "y ~ x + C(g) + O(k)", "--predict", grid,
                           "--out", tmp_path / "o.csv"], capsys)
    assert status == 1 and "'automne'" in err and "did not have at fit" in err


def test_usage_needs_x_or_formula(frame, tmp_path) -> None:
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    for argv in (["fit", str(path), "--y", "y"],
                 ["fit", str(path), "--x", "x", "--formula", "y ~ x"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need POSIX")
def test_fifo_input(frame, tmp_path, capsys) -> None:
    text = frame.to_csv(index=False, sep="\t")
    fifo = tmp_path / "data.tsv"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        status, out, err = _run([fifo, "--x", "x", "--x", "g", "--x", "k", "--y", "y",
                                 "--categorical", "g", "--ordered", "k"], capsys)
    finally:
        writer.join(timeout=10)
    assert status == 0, err
    assert f"on {len(frame)} rows" in out
