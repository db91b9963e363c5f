"""The training recipe of the language model: tying, schedule, budgets, checkpoints, resume."""

from __future__ import annotations

import errno
import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.nn import _lmtrain
from nadaraya.nn.lm import (
    LMConfig,
    Recipe,
    TransformerLM,
    cosine_schedule,
    load_checkpoint,
    load_training,
    save_checkpoint,
    train,
)

DATA = np.random.default_rng(1).integers(0, 5, 600)


def _tiny(**kw):
    torch.manual_seed(0)
    options = {"vocab_size": 5, "d_model": 16, "n_layers": 1, "n_heads": 2, "context": 12, **kw}
    return TransformerLM(LMConfig(**options))


def _naive_rate(p, lr, warmup, floor):
    """Warmup then cosine, written out: the oracle of the schedule."""
    if p < warmup:
        return lr * p / warmup
    s = (p - warmup) / (1 - warmup)
    return floor * lr + (lr - floor * lr) * (1 + math.cos(math.pi * s)) / 2


# -- weight tying -----------------------------------------------------------------------------
def test_tied_embeddings_share_one_tensor(tmp_path: Path) -> None:
    model = _tiny(tie_embeddings=True)
    assert model.head.weight is model.embed.weight
    n_untied = sum(p.numel() for p in _tiny().parameters())
    assert sum(p.numel() for p in model.parameters()) == n_untied - 5 * 16
    train(model, DATA, steps=2, batch=2, progress=False)
    assert model.head.weight is model.embed.weight
    save_checkpoint(model, tmp_path / "tied.safetensors")
    loaded = load_checkpoint(tmp_path / "tied.safetensors")
    assert loaded.head.weight is loaded.embed.weight
    ids = torch.as_tensor(DATA[:12])[None]
    torch.testing.assert_close(loaded(ids), model.eval()(ids), rtol=0, atol=0)


def test_weight_decay_spares_biases_and_norms() -> None:
    from nadaraya.nn._lmrecipe import make_optimizer

    model = _tiny(tie_embeddings=True)
    opt = make_optimizer(model, Recipe(weight_decay=0.3))
    decayed, kept = opt.param_groups
    assert decayed["weight_decay"] == 0.3 and kept["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() < 2
                                                                for p in kept["params"])
    assert any(p is model.norm.weight for p in kept["params"])
    assert len(decayed["params"]) + len(kept["params"]) == len(list(model.parameters()))


# -- the schedule -------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.01, 0.05, 0.1, 0.37, 0.5, 0.9, 1.0])
def test_cosine_schedule_matches_the_formula(p: float) -> None:
    got = cosine_schedule(p, lr=2e-3, warmup=0.1, min_lr=0.05)
    assert got == pytest.approx(_naive_rate(p, 2e-3, 0.1, 0.05), rel=1e-12, abs=1e-18)
    assert cosine_schedule(-1.0, lr=1.0) == 0.0 and cosine_schedule(2.0, lr=1.0) == 0.1


def test_time_budget_schedule_follows_the_clock() -> None:
    recipe = Recipe(steps=None, time_budget=600.0, lr=1e-3, warmup=0.1, min_lr=0.1)
    for seconds in (0.0, 30.0, 60.0, 300.0, 540.0, 600.0):
        expected = _naive_rate(seconds / 600.0, 1e-3, 0.1, 0.1)
        assert recipe.rate(step=12345, seconds=seconds) == pytest.approx(expected, rel=1e-12)
    both = Recipe(steps=100, time_budget=600.0)
    assert both.progress(50, 60.0) == 0.5 and both.progress(10, 450.0) == 0.75
    assert Recipe(steps=10, warmup=0.0).rate(9, 0.0) == pytest.approx(3e-4)  # the last step


class _FakeTime:
    """perf_counter and process_time advancing 5 s (wall) and 10 s (cpu) at each reading.

    The loop reads each clock once when a step ends and once when the next
    starts (the time between is not training), so a step lasts 5 s or 10 s.
    """

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def perf_counter(self) -> float:
        self.wall += 5.0
        return self.wall

    def process_time(self) -> float:
        self.cpu += 10.0
        return self.cpu


@pytest.mark.parametrize("clock, per_step", [("wall", 5.0), ("cpu", 10.0)])
def test_time_budget_stops_and_paces_the_schedule(monkeypatch: pytest.MonkeyPatch,
                                                  clock: str, per_step: float) -> None:
    monkeypatch.setattr(_lmtrain, "time", _FakeTime())
    rates: list[float] = []
    model = _tiny()
    original = _lmtrain.batch_windows

    def spy(*args, **kw):
        rates.append(opt_rate[0]())
        return original(*args, **kw)

    opt_rate: list = []
    real_make = _lmtrain.make_optimizer

    def make(model, recipe):
        opt = real_make(model, recipe)
        opt_rate.append(lambda: opt.param_groups[0]["lr"])
        return opt

    monkeypatch.setattr(_lmtrain, "batch_windows", spy)
    monkeypatch.setattr(_lmtrain, "make_optimizer", make)
    out = train(model, DATA, steps=None, time_budget=95.0, clock=clock, warmup=0.2, lr=1e-2,
                progress=False)
    assert out["steps"] == math.ceil(95.0 / per_step)
    used = out["seconds"] if clock == "wall" else out["cpu_seconds"]
    assert used == pytest.approx(out["steps"] * per_step)
    expected = [_naive_rate(min(k * per_step / 95.0, 1.0), 1e-2, 0.2, 0.1)
                for k in range(out["steps"])]
    np.testing.assert_allclose(rates, expected, rtol=1e-12)


def test_step_budget_evaluates_on_schedule() -> None:
    out = train(_tiny(), DATA, DATA[:100], steps=7, batch=2, eval_every=3, eval_chars=60,
                progress=False)
    assert [row["step"] for row in out["curve"]] == [3, 6, 7]
    assert out["valid"][-1][0] == 7 and all(np.isfinite(r["valid_bits"]) for r in out["curve"])
    assert out["curve"][1]["train_bits"] == pytest.approx(np.mean(out["losses"][3:6]))


@pytest.mark.parametrize("options, message", [
    ({"steps": None}, "give steps, time_budget or both"),
    ({"time_budget": float("nan")}, "time_budget must be a finite number > 0"),
    ({"time_budget": -1.0}, "time_budget must be"),
    ({"steps": 0}, "steps must be an integer > 0"),
    ({"clock": "sundial"}, "clock must be one of"),
    ({"warmup": 1.0}, "warmup must be a number in"),
    ({"min_lr": float("inf")}, "min_lr must be"),
    ({"lr": 0.0}, "lr must be"),
    ({"batch": True}, "batch must be an integer"),
    ({"seed": -3}, "seed must be"),
    ({"momentum": 0.9}, "recipe settings"),
])
def test_recipe_refuses_bad_settings(options: dict, message: str) -> None:
    with pytest.raises(NadarayaError, match=message):
        train(_tiny(), DATA, progress=False, **options)


def test_train_refuses_too_little_text() -> None:
    with pytest.raises(NadarayaError, match="train_data has 10 characters"):
        train(_tiny(), DATA[:10], steps=1, progress=False)
    with pytest.raises(NadarayaError, match="checkpoint_every"):
        train(_tiny(), DATA, steps=1, checkpoint_every=(3, "hours"), progress=False)


# -- checkpoints and exact continuation -----------------------------------------------------
def _interrupt_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """Send SIGINT while the ``call``-th batch is drawn (inside a step)."""
    original, calls = _lmtrain.batch_windows, [0]

    def draw(*args, **kw):
        calls[0] += 1
        if calls[0] == call:
            os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kw)

    monkeypatch.setattr(_lmtrain, "batch_windows", draw)


def test_interrupted_run_resumes_bit_identically(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"steps": 8, "batch": 3, "lr": 1e-2, "warmup": 0.25, "seed": 5}
    whole = _tiny(dropout=0.1)
    full = train(whole, DATA, progress=False, **settings)

    path = tmp_path / "run.safetensors"
    _interrupt_at(monkeypatch, 3)
    model = _tiny(dropout=0.1)
    part = train(model, DATA, progress=False,
                 checkpoint=lambda state: save_checkpoint(model, path, training=state),
                 **settings)
    assert part["interrupted"] == "SIGINT" and part["steps"] == 3
    monkeypatch.undo()

    resumed_model, state = load_training(path)
    assert state.step == 3 and not state.finished and state.recipe == Recipe(**settings)
    rest = train(resumed_model, DATA, resume=state, progress=False)
    assert rest["steps"] == 8 and rest["state"].finished
    assert rest["losses"] == full["losses"]
    for (name, a), b in zip(whole.state_dict().items(), resumed_model.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name


def test_resume_refuses_another_recipe(tmp_path: Path) -> None:
    model = _tiny()
    out = train(model, DATA, steps=2, batch=2, progress=False)
    with pytest.raises(NadarayaError, match=r"lr=0.5 \(saved: 0.003\)"):
        train(model, DATA, resume=out["state"], lr=0.5, progress=False)
    save_checkpoint(model, tmp_path / "plain.safetensors")
    with pytest.raises(NadarayaError, match="no training state"):
        load_training(tmp_path / "plain.safetensors")


def test_periodic_checkpoints_and_a_failed_write_keeps_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.safetensors"
    model = _tiny()
    written: list[int] = []

    def checkpoint(state):
        if written:  # every write after the first fails as the disk fills up
            def full(fd: int) -> None:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            monkeypatch.setattr(os, "fsync", full)
        try:
            save_checkpoint(model, path, training=state)
        except OSError:
            pass
        written.append(state.step)

    out = train(model, DATA, steps=7, batch=2, checkpoint=checkpoint,
                checkpoint_every=(2, "steps"), progress=False)
    monkeypatch.undo()
    assert written == [2, 4, 6] and out["steps"] == 7
    _, state = load_training(path)
    assert state.step == 2 and len(state.losses) == 2
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file is left"


def test_progress_line_shows_time_left(capsys) -> None:
    train(_tiny(), DATA, DATA[:100], steps=None, time_budget=0.5, batch=2, eval_chars=60,
          progress=True)
    err = capsys.readouterr().err
    assert "elapsed" in err and "left" in err and "loss" in err and "bpc" in err
    train(_tiny(), DATA, steps=2, batch=2, progress=None)  # stderr is not a terminal
    assert capsys.readouterr().err == ""
