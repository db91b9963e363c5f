"""The command line under hostile arguments and outputs: every command keeps its contract.

Whatever it is given, a command exits 0; or 1 with one line on standard error
naming the option or file at fault; or 2 for a usage error. It never prints a
traceback, never changes an input (the guard of ``tests/cli/_inputs.py``
hashes them around every run), never leaves a partial output under the final
name nor a temporary file beside it.

The options are found by walking ``nadaraya.cli.build_parser()``
(``tests/cli/_walk.py``), so a new option or command is covered without
editing this file; a new command needs one valid invocation in ``BASE``
there, a new output a file name in ``OUTPUTS`` here (tests check both).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nadaraya import _files
from nadaraya.nn.text import load_corpus

from ..cli._inputs import guard_inputs
from ..cli._walk import (
    BASE,
    HEAVY,
    WORK,
    Command,
    action_for,
    argv_for,
    declared,
    is_flag,
    label,
    leaf_commands,
    options,
    workdir,
)
from ._inputs import TRACEBACK as TRACEBACK_TEXT
from ._inputs import CliRun, check_cli_contract, run_cli, temporaries


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse asks the terminal's width for every option
    yield from guard_inputs(monkeypatch)


#: Defects outside the command line's files (reported to their owners), by command, option and
#: value: the suite skips these examples and keeps one strict xfail case for each.
KNOWN: list[tuple[Command, str, Any, str]] = []


def known(command: Command, dest: str, value: str) -> str | None:
    """Why ``value`` of ``dest`` meets a known defect outside the command line, if it does."""
    return next((why for c, d, hit, why in KNOWN if c == command and d == dest and hit(value)),
                None)


def test_every_command_has_a_base_invocation() -> None:
    leaves = {command for command, _ in leaf_commands()}
    assert leaves == set(BASE), f"add a quick valid invocation to BASE for {leaves - set(BASE)}"
    assert len(leaves) >= 7


# -- files the commands read ----------------------------------------------------------------
@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of small valid inputs: a CSV, a grid, a noisy and a clean image, a checkpoint."""
    import torch
    from PIL import Image

    from nadaraya.nn.lm import TransformerLM, save_checkpoint

    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 30))
    y = np.sin(x) + rng.normal(0, 0.1, 30)
    rows = "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(x, y, strict=True))
    clean = np.tile(np.linspace(0, 255, 16), (16, 1)).astype(np.uint8)
    noisy = np.clip(clean + rng.normal(0, 20, clean.shape), 0, 255).astype(np.uint8)
    folder = tmp_path_factory.mktemp("assets")
    for name, arr in (("noisy.png", noisy), ("clean.png", clean)):
        Image.fromarray(arr).save(folder / name)
    torch.manual_seed(0)
    alphabet = "\n !,.?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    model = TransformerLM(vocab_size=len(alphabet), alphabet=alphabet, d_model=8, n_heads=2,
                          n_layers=1, context=8)
    save_checkpoint(model, folder / "model.safetensors")
    (folder / "data.csv").write_text("x,y\n" + rows)
    (folder / "grid.csv").write_text("x\n1\n2.5\n7\n")
    return folder


@functools.cache
def _small_corpus() -> Any:
    return load_corpus(limit=3_000)


@pytest.fixture
def small_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lm train`` and ``lm ngram`` read the first 3 000 characters of each part, once."""
    from nadaraya.nn import text

    monkeypatch.setattr(text, "load_corpus", lambda *a, **k: _small_corpus())


@pytest.fixture
def loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``attention`` loads MiniLM once per test instead of once per run."""
    from nadaraya.nn import minilm

    monkeypatch.setattr(minilm, "load", functools.lru_cache(maxsize=2)(minilm.load))


# -- hostile values -------------------------------------------------------------------------
NUMBERS = ["-1", "0", "-0", "1", "0.5", "nan", "NaN", "inf", "-inf", "+inf", "1e308", "1e-320",
           "1e400", "-1e400", "1e-300", str(2**31), str(2**63 - 1), str(2**63), str(2**64),
           str(-2**63), str(10**30), "0x10", "1_0", "\u0663", "1e", ".", "--1", "9" * 400]
TEXTS = ["", " ", "\t", "\n", "-", "--", "é", "日本語", "\u202e", "\ufeff", "\x00", "a,b",
         "%s%n", "'", '"', "x" * 5000, "é" * 300, "ROMEO."]
PATHS = ["", ".", "..", "/", "-", "/dev/null", "/dev/full", "/dev/stdout", "missing/x.csv",
         "data.csv", "noisy.png", "model.safetensors", "out.png", "new.csv", "new.png",
         "folder", "folder/", "loop", "dangling", "x" * 300, "a\x00b", "data.csv/x",
         os.fsdecode(b"caf\xe9.csv")]


def hostile(*, bounded: bool = False) -> st.SearchStrategy[str]:
    """A value for any option: numbers at the edges, odd text, odd paths, raw argv bytes.

    Integers are small or far beyond any machine (2**31 and up), never in
    between, where a size would be a legal but long job; ``bounded`` leaves out
    the large ones too (for counts of work, where any huge value is a long job
    the user asked for rather than an error).
    """
    numbers = [n for n in NUMBERS if not (bounded and re.fullmatch(r"-?\d+", n)
                                          and abs(int(n)) > 50)]
    return st.one_of(
        st.sampled_from(numbers), st.sampled_from(TEXTS), st.sampled_from(PATHS),
        st.integers(-5, 50).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=20), st.binary(max_size=20).map(os.fsdecode),
    )


def names_of(action: argparse.Action, value: str) -> tuple[str, ...]:
    """Words an error about ``action`` may use to name it."""
    words = [*action.option_strings, action.dest, action.dest.replace("_", "-")]
    if action.metavar:
        words.append(str(action.metavar))
    if value.strip() and "\x00" not in value and len(value) < 100:
        words.append(value.strip())
    return tuple(words)


def _examples(share: int) -> Any:
    """Hypothesis settings with 1/share of the profile's examples (at least 10)."""
    return settings(max_examples=max(10, settings.default.max_examples // share),
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _commands(heavy: bool) -> list[Any]:
    params = []
    for command, _ in leaf_commands():
        if (command in HEAVY) == heavy:
            marks = [pytest.mark.slow] if heavy else []
            params.append(pytest.param(command, id=" ".join(command), marks=marks))
    return params


def _hostile_run(assets: Path, command: Command, data: st.DataObject) -> None:
    parser = dict(leaf_commands())[command]
    actions = options(parser)
    values = dict(BASE[command])
    how = data.draw(st.sampled_from(["value", "value", "value", "repeat", "unknown"]), "how")
    names: tuple[str, ...] = ()
    if how == "unknown":
        extra = data.draw(st.sampled_from(["--no-such-option", "-Z", "--", "--x=", "-"]))
        argv = [*argv_for(command, parser, values), extra]
    else:
        action = data.draw(st.sampled_from(actions), "action")
        if is_flag(action):
            values[action.dest] = (data.draw(st.booleans())
                                   if isinstance(action, argparse.BooleanOptionalAction)
                                   else data.draw(st.integers(1, 3)))
            argv = argv_for(command, parser, values)
        else:
            bounded = action.dest in WORK.get(command, set())
            choices = [str(c) for c in action.choices or ()]
            value = data.draw(st.sampled_from(choices) if choices and data.draw(st.booleans())
                              else hostile(bounded=bounded), "value")
            assume(known(command, action.dest, value) is None)
            if how == "repeat":
                first = data.draw(hostile(bounded=bounded), "first")
                values[action.dest] = [first, value]
            else:
                values[action.dest] = [value] if action.nargs in ("+", "*") or isinstance(
                    action, argparse._AppendAction) else value
            argv = argv_for(command, parser, values)
            names = names_of(action, value)
    with workdir(assets) as folder:
        result = run_cli(argv)
        check_cli_contract(result, names=names)
        assert temporaries(folder) == [], argv


@pytest.mark.parametrize("command", _commands(heavy=False))
@_examples(4)
@given(data=st.data())
def test_any_option_value_keeps_the_contract(assets, small_corpus, command: Command,
                                            data) -> None:
    _hostile_run(assets, command, data)


@pytest.mark.parametrize("command", _commands(heavy=True))
@_examples(10)
@given(data=st.data())
def test_any_option_value_keeps_the_contract_heavy(assets, small_corpus, loaded_once,
                                                   command: Command, data) -> None:
    _hostile_run(assets, command, data)


# -- every numeric option at its edges --------------------------------------------------------
EDGES = ["-1", "0", "-0", "nan", "inf", "-inf", "1e308", "1e400", "1e-320", str(2**64), "",
         "x"]


def is_numeric(action: argparse.Action) -> bool:
    """Whether the option parses numbers (found by parsing "2" with its type)."""
    if is_flag(action) or action.type in (None, str, Path):
        return False
    try:
        value = action.type("2")
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        return False
    values = value if isinstance(value, list) else [value]
    return all(isinstance(v, (int, float)) for v in values)


def _edge_cases() -> list[Any]:
    cases = []
    for command, parser in leaf_commands():
        for action in filter(is_numeric, options(parser)):
            for value in EDGES:
                if action.dest in WORK.get(command, set()) and value in (str(2**64), "1e308"):
                    continue  # a long job, not an error
                marks = [pytest.mark.slow] if command in HEAVY else []
                why = known(command, action.dest, value)
                if why is not None:
                    marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                                   reason=why))
                cases.append(pytest.param(command, action.dest, value, marks=marks,
                                          id=f"{' '.join(command)} {label(action)} {value!r}"))
    return cases


@pytest.mark.parametrize(("command", "dest", "value"), _edge_cases())
def test_numeric_options_at_their_edges(assets: Path, small_corpus, loaded_once,
                                        command: Command, dest: str, value: str) -> None:
    parser = dict(leaf_commands())[command]
    action = next(a for a in options(parser) if a.dest == dest)
    values = {**BASE[command], dest: [value] if action.nargs in ("+", "*") else value}
    with workdir(assets) as folder:
        result = run_cli(argv_for(command, parser, values))
        check_cli_contract(result, names=names_of(action, value))
        assert temporaries(folder) == []


@pytest.mark.parametrize("command", [pytest.param(c, id=" ".join(c), marks=[pytest.mark.slow]
                                                  if c in HEAVY else [])
                                     for c, _ in leaf_commands()])
@pytest.mark.parametrize("extra", [["--no-such-option"], ["--no-such-option=1"], ["-Z"],
                                   ["extra-positional"]])
def test_unknown_options_are_usage_errors(assets: Path, command: Command,
                                          extra: list[str]) -> None:
    parser = dict(leaf_commands())[command]
    with workdir(assets):
        result = run_cli([*argv_for(command, parser, BASE[command]), *extra])
    check_cli_contract(result)
    assert result.status == 2


# -- outputs --------------------------------------------------------------------------------
#: Every output option (``files()`` names them) with a file name its writer takes.
OUTPUTS: dict[tuple[Command, str], str] = {
    (("demo",), "--out"): "demo.csv",
    (("fit",), "--out"): "pred.csv",
    (("fit",), "--plot"): "fit.png",
    (("denoise",), "OUT"): "den.png",
    (("denoise",), "--compare"): "cmp.png",
    (("lm", "train"), "--out"): "lm2.safetensors",
    (("lm", "train"), "--curve"): "curve.csv",
    (("attention",), "--out"): "map.png",
}
#: The first bytes each kind of output starts with.
MAGIC = {".csv": b"", ".png": b"\x89PNG", ".safetensors": b""}


def test_every_output_option_is_listed() -> None:
    found = {(command, option) for command, _ in leaf_commands()
             for option in declared(command)[1]}
    assert found == set(OUTPUTS), f"add these outputs to OUTPUTS: {found - set(OUTPUTS)}"


def output_argv(command: Command, option: str, target: str) -> list[str]:
    parser = dict(leaf_commands())[command]
    return argv_for(command, parser, {**BASE[command], action_for(parser, option).dest: target})


def _output_cases(targets: list[str]) -> list[Any]:
    return [pytest.param(command, option, target,
                         marks=[pytest.mark.slow] if command in HEAVY else [],
                         id=f"{' '.join(command)} {option} {target}")
            for (command, option) in OUTPUTS for target in targets]


def _makes_folders(command: Command, option: str) -> bool:
    import importlib

    from nadaraya import cli

    module = importlib.import_module(f"nadaraya.cli.{cli.COMMANDS[command[0]]}")
    return option in getattr(module, "MAKES_FOLDERS", ())


def _same_as_input(folder: Path, command: Command, how: str) -> str | None:
    """An output name that is an input of ``command`` (itself, a symlink or a hard link)."""
    inputs, _ = declared(command)
    if not inputs:
        return None
    source = Path(inputs[0]).resolve() if Path(inputs[0]).is_absolute() else folder / inputs[0]
    if how == "itself":
        return str(source)
    link = folder / f"link{source.suffix}"
    if how == "symlink":
        link.symlink_to(source)
    else:
        try:
            os.link(source, link)
        except OSError:  # another file system (a shipped data file)
            return None
    return link.name


@pytest.mark.parametrize(("command", "option", "target"), _output_cases(
    ["folder", "missing/{name}", "loop", "dangling", "itself", "symlink", "hardlink",
     "nul\x00{name}", "/dev/full", "-", "/dev/null"]))
def test_every_output_refuses_or_streams_what_it_must(
        assets: Path, small_corpus, loaded_once, command: Command, option: str,
        target: str) -> None:
    name = OUTPUTS[command, option]
    with workdir(assets) as folder:
        if target in ("itself", "symlink", "hardlink"):
            path = _same_as_input(folder, command, target)
            if path is None:
                pytest.skip(f"nadaraya {' '.join(command)} has no input to link to here")
        else:
            path = target.format(name=name)
        before = sorted(p.name for p in folder.iterdir())
        result = run_cli(output_argv(command, option, path))
        check_cli_contract(result, names=(option, path))
        if target in ("-", "/dev/null"):
            assert result.status == 0, result.err
            if target == "-":
                assert result.out.startswith(MAGIC[Path(name).suffix]) and result.out
        elif target == "missing/{name}" and _makes_folders(command, option):
            assert result.status == 0 and (folder / path).is_file(), result.err
        elif target == "dangling" and _makes_folders(command, option):
            assert result.status == 0, result.err
        else:
            assert result.status == 1, f"{path}: {result.status} {result.err}"
            if target == "/dev/full":
                assert "No space left" in result.err
            else:
                new = sorted(p.name for p in folder.iterdir())
                assert new == before, "a refused output created a file"
        assert temporaries(folder) == []
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize(("command", "option", "target"), _output_cases(["fifo"]))
def test_every_output_streams_into_a_fifo(assets: Path, small_corpus, loaded_once,
                                          command: Command, option: str, target: str) -> None:
    name = OUTPUTS[command, option]
    with workdir(assets) as folder:
        fifo = folder / f"pipe{Path(name).suffix}"
        os.mkfifo(fifo)
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()),
                                  daemon=True)
        reader.start()
        result = run_cli(output_argv(command, option, fifo.name))
        if result.status != 0:  # nobody opened the FIFO for writing: release the reader
            with open(fifo, "wb"):
                pass
        reader.join(timeout=60)
        check_cli_contract(result, names=(option, fifo.name))
        assert result.status == 0, result.err
        assert received and received[0].startswith(MAGIC[Path(name).suffix]) and received[0]
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
        assert temporaries(folder) == []


@pytest.mark.parametrize(("command", "option", "target"), _output_cases(["read-only folder"]))
def test_every_output_refuses_a_read_only_folder(assets: Path, small_corpus, loaded_once,
                                                 command: Command, option: str,
                                                 target: str) -> None:
    name = OUTPUTS[command, option]
    with workdir(assets) as folder:
        locked = folder / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            if os.access(locked, os.W_OK):
                pytest.skip("this user (root) can write in a read-only folder")
            result = run_cli(output_argv(command, option, f"locked/{name}"))
            check_cli_contract(result, names=(option,))
            assert result.status == 1 and list(locked.iterdir()) == []
        finally:
            locked.chmod(0o700)


class _FullDisk:
    """A file object whose writes fail with ENOSPC once ``room`` bytes went through."""

    def __init__(self, f: Any, room: int) -> None:
        self._f, self._room = f, room

    @classmethod
    def for_name(cls, name: str, room: int) -> Any:
        """``os.fdopen`` whose files fail so when their name holds ``name``."""
        real = os.fdopen

        def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
            f = real(fd, *args, **kwargs)
            return cls(f, room) if name in os.readlink(f"/proc/self/fd/{fd}") else f
        return fdopen

    def write(self, data: Any) -> int:
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._f.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


@pytest.mark.parametrize(("command", "option", "target"), _output_cases(["full disk"]))
def test_a_full_disk_keeps_the_old_output_and_leaves_no_temporary(
        assets: Path, small_corpus, loaded_once, monkeypatch: pytest.MonkeyPatch,
        command: Command, option: str, target: str) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell which file is written")
    name = OUTPUTS[command, option]
    monkeypatch.setattr(_files.os, "fdopen", _FullDisk.for_name(name, 20))
    with workdir(assets) as folder:
        old = folder / name
        old.write_bytes(b"the previous result\n")
        result = run_cli(output_argv(command, option, name))
        check_cli_contract(result, names=(option, name))
        assert result.status == 1 and "No space left" in result.err
        assert old.read_bytes() == b"the previous result\n"
        assert temporaries(folder) == []
        for rescued in folder.glob("*.rescued-*"):  # a long job's result saved elsewhere
            assert rescued.name in result.err and rescued.stat().st_size > 0


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only, where the system lets this process mount one)."""
    mount = shutil.which("mount")
    folder = tmp_path / "tiny"
    folder.mkdir()
    if os.geteuid() != 0 or mount is None or subprocess.run(
            [mount, "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and a system that allows it)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_really_full_disk_keeps_the_old_output(assets: Path, tiny_filesystem: Path) -> None:
    old = tiny_filesystem / "pred.csv"
    old.write_bytes(b"old predictions\n")
    filler = tiny_filesystem / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:  # fill the rest, so that the new file cannot be written
            f.write(b"x" * 512)
    with workdir(assets):
        result = run_cli(["fit", "data.csv", "--x", "x", "--y", "y", "--bandwidth", "2",
                          "--out", str(old)])
    check_cli_contract(result, names=("--out",))
    assert result.status == 1 and "No space left" in result.err
    assert old.read_bytes() == b"old predictions\n"
    assert sorted(p.name for p in tiny_filesystem.iterdir()) == ["filler", "pred.csv"]


# -- two commands, one output ----------------------------------------------------------------
RACES = {
    "fit": [["fit", "data.csv", "--x", "x", "--y", "y", "--bandwidth", h, "--out", "same.csv"]
            for h in ("0.5", "3")],
    "denoise": [["denoise", "noisy.png", "same.png", "--method", m, "--sigma", "20"]
                for m in ("bilateral", "kr")],
}


@pytest.mark.parametrize("command", sorted(RACES))
def test_two_commands_writing_one_output_end_with_one_complete_file(
        assets: Path, command: str) -> None:
    from nadaraya.cli import main

    argvs = RACES[command]
    with workdir(assets) as folder:
        target = folder / argvs[0][-1 if command == "fit" else 2]
        complete = []
        for argv in argvs:  # each command's complete file, written alone
            assert main(argv) == 0
            complete.append(target.read_bytes())
            target.unlink()
        assert complete[0] != complete[1]
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda a=argv: statuses.append(main(a)))
                   for argv in argvs * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert statuses == [0] * len(threads)
        assert target.read_bytes() in complete, "one command's complete file, never a mix"
        assert temporaries(folder) == []


# -- end to end, as a user runs it (a new Python each: several seconds, so marked slow) -----------
def _nadaraya(*args: str | bytes, cwd: Path,
              stdin: Any = None) -> subprocess.CompletedProcess[bytes]:
    """``python -m nadaraya ARGS`` with strict UTF-8 streams, as under a UTF-8 desktop locale."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUTF8",)}
    env.update(PYTHONIOENCODING="utf-8:strict", COLUMNS="100")
    return subprocess.run([sys.executable, "-m", "nadaraya", *args], cwd=cwd, env=env,
                          capture_output=True, stdin=stdin, timeout=300)


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_read_written_and_printed(assets: Path) -> None:
    with workdir(assets) as folder:
        data = os.fsencode(folder) + b"/donn\xe9es.csv"  # latin-1 bytes: not UTF-8
        shutil.copyfile(folder / "data.csv", data)
        out = b"pr\xe9dictions.csv"
        run = _nadaraya("fit", data, "--x", "x", "--y", "y", "--bandwidth", "2", "--out", out,
                        cwd=folder)
        assert TRACEBACK_TEXT not in run.stderr.decode(errors="replace")
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        assert rb"donn\udce9es.csv" in run.stdout, "undecodable bytes are shown escaped"
        assert (folder / os.fsdecode(out)).read_text().startswith("x,y_pred,")
        assert temporaries(folder) == []


@pytest.mark.slow
def test_a_fifo_as_data_in_a_real_process(assets: Path) -> None:
    with workdir(assets) as folder:
        fifo = folder / "data.pipe"
        os.mkfifo(fifo)
        feeder = threading.Thread(target=lambda: fifo.write_bytes(
            (folder / "data.csv").read_bytes()), daemon=True)
        feeder.start()
        run = _nadaraya("fit", fifo.name, "--x", "x", "--y", "y", "--bandwidth", "2", cwd=folder)
        feeder.join(timeout=60)
        assert run.returncode == 0, run.stderr.decode()
        alone = _nadaraya("fit", "data.csv", "--x", "x", "--y", "y", "--bandwidth", "2",
                          cwd=folder)
        assert run.stdout.replace(b"data.pipe", b"data.csv") == alone.stdout


@pytest.mark.slow
def test_an_image_written_to_standard_output_is_the_image_written_to_a_file(
        assets: Path) -> None:
    from nadaraya.image._io import read_image

    with workdir(assets) as folder:
        piped = _nadaraya("denoise", "noisy.png", "-", "--method", "bilateral", "--sigma", "20",
                          cwd=folder)
        assert piped.returncode == 0, piped.stderr.decode()
        assert b"-> standard output" in piped.stderr, "messages go to standard error"
        saved = _nadaraya("denoise", "noisy.png", "saved.png", "--method", "bilateral",
                          "--sigma", "20", cwd=folder)
        assert saved.returncode == 0, saved.stderr.decode()
        (folder / "piped.png").write_bytes(piped.stdout)
        np.testing.assert_array_equal(read_image(folder / "piped.png"),
                                      read_image(folder / "saved.png"))


@pytest.mark.slow
def test_an_argument_that_is_not_utf8_fails_with_one_line(assets: Path) -> None:
    with workdir(assets) as folder:
        run = _nadaraya("fit", "data.csv", "--x", b"\xff", "--y", "y", cwd=folder)
    err = run.stderr.decode(errors="replace")
    assert run.returncode == 1 and TRACEBACK_TEXT not in err
    assert len(err.splitlines()) == 1 and "column" in err, err


def test_a_file_name_that_is_not_utf8_is_printed_escaped_in_process(assets: Path) -> None:
    with workdir(assets) as folder:
        name = os.fsdecode(b"donn\xe9es.csv")  # what Python makes of latin-1 bytes in argv
        shutil.copyfile(folder / "data.csv", folder / name)
        out = os.fsdecode(b"pr\xe9dictions.csv")
        result = run_cli(["fit", name, "--x", "x", "--y", "y", "--bandwidth", "2", "--out", out])
        check_cli_contract(result)
        assert result.status == 0, result.err
        assert rb"donn\udce9es.csv" in result.out
        assert (folder / out).read_text().startswith("x,y_pred,")


# -- what main makes of a command's warnings and failures ----------------------------------------
@pytest.fixture
def fake_command(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Register ``nadaraya fake``, which runs the function given to the fixture."""
    import types

    from nadaraya import cli

    def register(run: Any, hint: str | None = None) -> None:
        module = types.ModuleType("nadaraya.cli.fake")
        module.__doc__ = "A command of the tests."
        module.add_arguments = lambda parser: None
        module.run = run
        if hint is not None:
            module.MEMORY_HINT = hint
        monkeypatch.setitem(sys.modules, "nadaraya.cli.fake", module)
        monkeypatch.setitem(cli.COMMANDS, "fake", "fake")
    return register


def _warns_then(outcome: BaseException | None) -> Any:
    def run(args: argparse.Namespace) -> int:
        warnings.warn("overflow encountered in square\n  out = z ** 2", RuntimeWarning,
                      stacklevel=1)
        np.float64(1e308) * np.float64(10)  # numpy's own RuntimeWarning
        if outcome is not None:
            raise outcome
        return 0
    return run


@pytest.fixture
def python_shows_warnings() -> Iterator[None]:
    """Warnings shown on standard error as Python shows them outside pytest (which records them)."""
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def test_warnings_of_a_failed_command_leave_its_error_alone(fake_command: Any,
                                                            python_shows_warnings: None) -> None:
    from nadaraya import NadarayaError

    fake_command(_warns_then(NadarayaError("--thing 3 is wrong; give 2.")))
    result = run_cli(["fake"])
    check_cli_contract(result, names=("--thing",))
    assert result.status == 1


def test_warnings_of_a_command_that_succeeds_are_one_line_each(
        fake_command: Any, python_shows_warnings: None) -> None:
    fake_command(_warns_then(None))
    result = run_cli(["fake"])
    assert result.status == 0
    assert result.lines == ["nadaraya fake: warning: overflow encountered in square out = z ** 2",
                            "nadaraya fake: warning: overflow encountered in scalar multiply"]


@pytest.mark.parametrize("error", [
    MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000000000,) and "
                "data type float64"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                 "allocate memory: you tried to allocate 365037860421632 bytes. Error code 12 "
                 "(Cannot allocate memory)"),
], ids=["numpy", "torch"])
def test_running_out_of_memory_is_one_line_naming_the_options(fake_command: Any,
                                                              error: BaseException) -> None:
    def run(args: argparse.Namespace) -> int:
        raise error

    fake_command(run, hint="give a smaller --size")
    result = run_cli(["fake"])
    check_cli_contract(result, names=("--size",))
    assert result.status == 1 and "not enough memory" in result.err
    assert "it asked for" in result.err


def test_other_runtime_errors_are_not_taken_for_memory(fake_command: Any) -> None:
    def run(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    fake_command(run)
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli(["fake"])


def test_training_that_diverges_fails_with_one_line_and_writes_nothing(
        assets: Path, small_corpus: None) -> None:
    with workdir(assets) as folder:
        result = run_cli(["lm", "train", "--steps", "4", "--batch", "2", "--d-model", "8",
                          "--heads", "2", "--layers", "1", "--context", "8", "--eval-chars",
                          "100", "--lr", "1e30", "--out", "lm.safetensors"])
        check_cli_contract(result, names=("--lr",))
        assert result.status == 1 and "diverged" in result.err
        assert not (folder / "lm.safetensors").exists() and temporaries(folder) == []


def test_text_that_is_not_utf8_is_refused_before_the_model_loads(monkeypatch) -> None:
    from nadaraya.nn import minilm

    def load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded for a TEXT that cannot be read")

    monkeypatch.setattr(minilm, "load", load)
    result = run_cli(["attention", os.fsdecode(b"caf\xe9 au lait")])
    check_cli_contract(result, names=("TEXT",))
    assert result.status == 1


def test_an_input_name_no_file_can_have_beside_an_output(assets: Path) -> None:
    with workdir(assets) as folder:
        result = run_cli(["fit", "da\x00ta.csv", "--x", "x", "--y", "y", "--out", "pred.csv"])
        check_cli_contract(result, names=("DATA.csv",))
        assert result.status == 1 and not (folder / "pred.csv").exists()


def test_bytes_for_a_standard_output_that_takes_only_text(assets: Path) -> None:
    import contextlib
    import io

    from nadaraya.cli import main

    with workdir(assets), contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()) as err:
        status = main(["denoise", "noisy.png", "-", "--method", "bilateral", "--sigma", "20"])
    result = CliRun(["denoise"], status, out.getvalue().encode(), err.getvalue())
    check_cli_contract(result, names=("OUT",))
    assert status == 1


@pytest.mark.parametrize("folder_name", ["x" * 300, "a\x00b", "\ud800", "loop", "data.csv"],
                         ids=["too long", "a zero byte", "a lone surrogate", "a link loop",
                              "a file"])
def test_a_figures_folder_that_cannot_be_one_is_refused_before_the_work(
        assets: Path, folder_name: str) -> None:
    with workdir(assets) as folder:
        before = sorted(p.name for p in folder.iterdir())
        result = run_cli(["demo", "--repeat", "1", "--bandwidth", "2", "--figures", folder_name])
        check_cli_contract(result, names=("--figures",))
        assert result.status == 1 and sorted(p.name for p in folder.iterdir()) == before
