"""``nadaraya lm train``: progress, time budget, checkpoints, Ctrl-C and --resume."""

from __future__ import annotations

import csv
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from nadaraya.nn import _lmtrain
from nadaraya.nn.lm import load_training, save_checkpoint
from nadaraya.nn.text import CharVocab

TINY = ["lm", "train", "--batch", "2", "--d-model", "8", "--heads", "2", "--layers", "1",
        "--context", "8", "--eval-chars", "100"]


@pytest.fixture(autouse=True)
def tiny_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Train on a few hundred characters instead of the plays."""
    from nadaraya.nn import text

    vocab = CharVocab("ab c")
    rng = np.random.default_rng(0)
    train, valid = rng.integers(0, 4, 400), rng.integers(0, 4, 200)

    def load_corpus(path=None, *, limit=None):
        return text.Corpus(vocab, train, valid, [], [])

    monkeypatch.setattr(text, "load_corpus", load_corpus)


def _main(argv: list[str]) -> int:
    from nadaraya.cli import main

    return main(argv)


def test_time_budget_shows_progress_and_writes_the_curve(tmp_path: Path, capsys,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    out, curve = tmp_path / "m.safetensors", tmp_path / "curve.csv"
    assert _main([*TINY, "--time-budget", "0.01", "--eval-every", "2", "--curve", str(curve),
                  "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "elapsed" in captured.err and "left" in captured.err and "loss" in captured.err
    assert "validation:" in captured.out and f"learning curve in {curve}" in captured.out
    rows = list(csv.DictReader(curve.open()))
    assert list(rows[0]) == ["step", "seconds", "cpu_seconds", "lr", "train_bits",
                             "valid_bits"]
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps) and all(float(r["valid_bits"]) > 0 for r in rows)
    _, state = load_training(out)
    assert state.finished and state.recipe.time_budget == pytest.approx(0.6)
    assert state.recipe.steps is None and state.step == steps[-1]


def test_quiet_and_no_terminal_show_no_progress(tmp_path: Path, capsys) -> None:
    assert _main([*TINY, "--steps", "2", "--out", str(tmp_path / "m.st")]) == 0
    assert "left" not in capsys.readouterr().err


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    original, calls = _lmtrain.batch_windows, [0]

    def draw(*args, **kw):
        calls[0] += 1
        if calls[0] == call:
            os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kw)

    monkeypatch.setattr(_lmtrain, "batch_windows", draw)


def test_ctrl_c_saves_a_checkpoint_that_resumes(tmp_path: Path, capsys,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "m.safetensors"
    with monkeypatch.context() as patch:
        _interrupt_at(patch, 3)
        assert _main([*TINY, "--steps", "6", "--seed", "3", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted (SIGINT) at step 3" in err and f"--resume {out}" in err
    _, state = load_training(out)
    assert state.step == 3 and not state.finished
    assert _main(["lm", "train", "--resume", str(out), "--out", str(out),
                  "--eval-chars", "100"]) == 0
    assert "continuing softmax attention" in capsys.readouterr().out
    _, state = load_training(out)
    assert state.step == 6 and state.finished and state.recipe.seed == 3


def test_checkpoint_every_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "m.safetensors"
    seen: list[int] = []
    real = save_checkpoint

    def spy(model, path, *, training=None):
        seen.append(training.step)
        real(model, path, training=training)

    monkeypatch.setattr("nadaraya.nn.lm.save_checkpoint", spy)
    assert _main([*TINY, "--steps", "5", "--checkpoint-every", "2", "--quiet",
                  "--out", str(out)]) == 0
    assert seen == [2, 4, 5]


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    out = tmp_path / "done.safetensors"
    assert _main([*TINY, "--steps", "2", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("extra, message", [
    (["--d-model", "16"], "--d-model 16 (the checkpoint has 8)"),
    (["--kernel", "rbf", "--lr", "0.5"], "--kernel rbf (the checkpoint has softmax); --lr 0.5 "
                                         "(the checkpoint has 0.003)"),
])
def test_resume_refuses_other_settings(tmp_path: Path, capsys, monkeypatch, extra: list[str],
                                       message: str) -> None:
    out = tmp_path / "m.safetensors"
    with monkeypatch.context() as patch:
        _interrupt_at(patch, 2)
        assert _main([*TINY, "--steps", "4", "--out", str(out)]) == 130
    capsys.readouterr()
    assert _main(["lm", "train", "--resume", str(out), *extra, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert message in err and "without --resume" in err and err.count("\n") == 1


def test_resume_refuses_what_cannot_continue(tmp_path: Path, capsys, finished: Path) -> None:
    capsys.readouterr()
    text = tmp_path / "notes.txt"
    text.write_text("ROMEO.\n")
    plain = tmp_path / "plain.safetensors"
    from nadaraya.nn.lm import load_checkpoint

    save_checkpoint(load_checkpoint(finished), plain)
    cases = {text: "is not a nadaraya language-model checkpoint",
             tmp_path / "missing.st": "does not exist",
             plain: "no training state",
             finished: "already reached its budget"}
    for path, message in cases.items():
        assert _main(["lm", "train", "--resume", str(path), "--out",
                      str(tmp_path / "new.st")]) == 1
        err = capsys.readouterr().err
        assert err.startswith("nadaraya lm: error: --resume") and message in err, err
    assert not (tmp_path / "new.st").exists()


@pytest.mark.parametrize("option, value", [("--checkpoint-every", "soon"),
                                           ("--checkpoint-every", "0"),
                                           ("--checkpoint-every", "-2m"),
                                           ("--eval-every", "nanm"),
                                           ("--time-budget", "0"), ("--time-budget", "inf"),
                                           ("--warmup", "1"), ("--weight-decay", "-1")])
def test_bad_values_are_usage_errors(tmp_path: Path, capsys, option: str, value: str) -> None:
    with pytest.raises(SystemExit) as info:
        _main([*TINY, option, value, "--out", str(tmp_path / "m.st")])
    assert info.value.code == 2 and f"argument {option}" in capsys.readouterr().err
