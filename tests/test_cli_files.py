"""The command line as a whole: help for every option, outputs checked first, signals, streams."""

from __future__ import annotations

import argparse
import os
import signal
import stat
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nadaraya import cli
from nadaraya.cli import build_parser, main
from nadaraya.datasets import load_mcycle

from .cli._inputs import guard_inputs


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


def _parsers(parser: argparse.ArgumentParser,
             name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_of_every_command_has_help() -> None:
    missing = []
    seen = 0
    for name, parser in _parsers(build_parser(), "nadaraya"):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    seen += 1
                    if not choice.help:
                        missing.append(f"{name} {choice.dest}")
                continue
            seen += 1
            if not (action.help and action.help.strip()):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 50
    assert missing == [], f"options without help: {missing}"


def _fake_command(monkeypatch: pytest.MonkeyPatch, run, files=None) -> None:
    module = types.ModuleType("nadaraya.cli.fake")
    module.__doc__ = "A command of the tests."
    module.add_arguments = lambda parser: (parser.add_argument("input"),
                                           parser.add_argument("--out"))
    module.run = run
    if files is not None:
        module.files = files
    monkeypatch.setitem(sys.modules, "nadaraya.cli.fake", module)
    monkeypatch.setitem(cli.COMMANDS, "fake", "fake")


def test_the_input_guard_catches_a_command_that_changes_its_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "in.txt"
    source.write_text("input")

    def run(args: argparse.Namespace) -> int:
        Path(args.input).write_text("changed")
        return 0

    _fake_command(monkeypatch, run)
    with pytest.raises(AssertionError, match="changed its input"):
        main(["fake", str(source)])


def test_outputs_are_checked_before_the_command_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran = []
    source = tmp_path / "in.txt"
    source.write_text("input")
    _fake_command(monkeypatch, lambda args: ran.append(args) or 0,
                  files=lambda args: ([args.input], {"--out": args.out}))
    assert main(["fake", str(source), "--out", str(tmp_path / "nowhere" / "o.txt")]) == 1
    assert main(["fake", str(source), "--out", str(source)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("nadaraya fake: error: --out") for line in err)
    assert ran == []


def test_ctrl_c_leaves_no_partial_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old")

    def run(args: argparse.Namespace) -> int:
        with args.outputs["--out"].open("wb") as f:
            f.write(b"partial")
            raise KeyboardInterrupt

    _fake_command(monkeypatch, run, files=lambda args: ([], {"--out": args.out}))
    assert main(["fake", "x", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


_SLOW_WRITER = """
import sys, time, types
from nadaraya import cli

module = types.ModuleType("nadaraya.cli.slow")
module.__doc__ = "Write slowly."
module.add_arguments = lambda parser: parser.add_argument("--out")
module.files = lambda args: ([], {"--out": args.out})

def run(args):
    with args.outputs["--out"].open("wb") as f:
        f.write(b"partial " * 1000)
        f.flush()
        print("writing", flush=True)
        time.sleep(120)
    return 0

module.run = run
sys.modules["nadaraya.cli.slow"] = module
cli.COMMANDS["slow"] = "slow"
raise SystemExit(cli.main(["slow", "--out", sys.argv[1]]))
"""


def test_sigterm_during_a_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        assert len(list(tmp_path.iterdir())) == 2, "the temporary file exists while writing"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_demo_streams_its_csv_into_a_fifo(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "fit.pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    status = main(["demo", "--repeat", "1", "--no-figures", "--bandwidth", "2", "--out",
                   str(fifo)])
    reader.join(timeout=60)
    assert status == 0, capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was not replaced by a file"
    lines = received[0].splitlines()
    assert lines[0] == "times,accel,fit" and len(lines) == 134
    X, _ = load_mcycle(return_X_y=True)
    np.testing.assert_array_equal([float(line.split(",")[0]) for line in lines[1:]], X[:, 0])


def test_fit_writes_to_dev_stdout(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout on this system")
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i % 3}\n" for i in range(20)))
    assert main(["fit", str(data), "--x", "x", "--y", "y", "--bandwidth", "2", "--out",
                 "/dev/stdout"]) == 0
    captured = capfd.readouterr()
    assert captured.out.startswith("x,y_pred,std_error") and len(captured.out.splitlines()) == 21
    assert "bandwidth (given)" in captured.err
    assert Path("/dev/stdout").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "d.csv"]


@pytest.mark.parametrize("command, option", [("denoise", "--compare"), ("fit", "--plot")])
def test_a_figure_format_matplotlib_cannot_write_is_refused_before_the_work(
        command: str, option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran = []
    module = __import__(f"nadaraya.cli.{command}", fromlist=["run"])
    monkeypatch.setattr(module, "run", lambda args: ran.append(args) or 0)
    source = tmp_path / ("in.png" if command == "denoise" else "d.csv")
    source.write_bytes(b"input")
    args = ([str(source), str(tmp_path / "out.png")] if command == "denoise"
            else [str(source), "--x", "x", "--y", "y"])
    assert main([command, *args, option, str(tmp_path / "figure.xyz")]) == 1
    err = capsys.readouterr().err
    assert option in err and "'xyz'" in err and ".png" in err
    assert ran == []
    assert main([command, *args, option, str(tmp_path / "figure.svg")]) == 0
    assert len(ran) == 1
