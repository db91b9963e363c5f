"""Training :class:`~nadaraya.nn.lm.TransformerLM`: the loop, its clocks, curve and checkpoints."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from .._errors import NadarayaError
from ._lmcheckpoint import TrainingState
from ._lmmodel import TransformerLM, batch_windows, evaluate
from ._lmprogress import Progress
from ._lmrecipe import Recipe, make_optimizer

__all__ = ["train"]


class _Clocks:
    """Wall and CPU seconds of training, paused around evaluations and checkpoints."""

    def __init__(self, seconds: float, cpu_seconds: float) -> None:
        self.seconds, self.cpu_seconds = seconds, cpu_seconds
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def tick(self) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.seconds += wall - self._wall
        self.cpu_seconds += cpu - self._cpu
        self._wall, self._cpu = wall, cpu

    def skip(self) -> None:
        """Forget the time since the last tick (spent outside training)."""
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def on(self, clock: str) -> float:
        return self.seconds if clock == "wall" else self.cpu_seconds


@contextlib.contextmanager
def _deferred_interrupts() -> Iterator[list[str]]:
    """Ctrl-C (SIGINT) and SIGTERM end the current step first; a second one stops at once.

    Yields a list that receives the signal's name; the loop checks it after
    each step. Only the main thread can install signal handlers; elsewhere the
    signals keep their usual behaviour.
    """
    caught: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: Any) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signal.Signals(signum).name)

    numbers = [signal.SIGINT] + ([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])
    saved = {n: signal.signal(n, handler) for n in numbers}
    try:
        yield caught
    finally:
        for number, previous in saved.items():
            signal.signal(number, previous)


def train(model: TransformerLM, train_data: np.ndarray, valid_data: np.ndarray | None = None,
          *, resume: TrainingState | None = None, eval_every: int = 0,
          eval_seconds: float | None = None, eval_chars: int | None = 200_000,
          progress: bool | None = True,
          callback: Callable[[int, float], None] | None = None,
          checkpoint: Callable[[TrainingState], None] | None = None,
          checkpoint_every: tuple[float, str] | None = None,
          **recipe: Any) -> dict[str, Any]:
    """Train on random windows with AdamW, warmup and a cosine decay, within a step or time budget.

    Parameters
    ----------
    model : TransformerLM
    train_data, valid_data : ndarray of int64, shapes (n_train,) and (n_valid,)
        Encoded text.
    resume : TrainingState, optional
        Continue the run saved in it (:func:`~nadaraya.nn.lm.load_training`):
        optimiser, random generators, step, clocks, curve and recipe. Recipe
        settings given as keywords must then equal the saved ones.
    eval_every : int, default 0
        Evaluate validation bits per character every this many steps.
    eval_seconds : float, optional
        Evaluate every this many seconds of training (on the recipe's clock).
    eval_chars : int, optional
        Characters of validation text used per evaluation (None: all).
    progress : bool or None, default True
        Show a progress line on standard error (step, loss, validation bits,
        elapsed and time left); None shows it only when standard error is a
        terminal.
    callback : callable, optional
        ``callback(step, train_bits)`` after every step.
    checkpoint : callable, optional
        ``checkpoint(state)`` is called with the :class:`TrainingState` every
        ``checkpoint_every`` and when a signal stops training.
    checkpoint_every : (value, unit), optional
        ``(200, "steps")`` or ``(300.0, "seconds")`` (seconds on the recipe's clock).
    **recipe
        The fields of :class:`~nadaraya.nn.lm.Recipe`: ``steps``,
        ``time_budget``, ``clock``, ``batch``, ``lr``, ``warmup``, ``min_lr``,
        ``weight_decay``, ``clip``, ``seed``.

    Returns
    -------
    dict
        ``losses`` (training bits per character per step), ``valid`` (list of
        ``(step, bits)``), ``curve`` (the evaluation rows of
        :class:`TrainingState`), ``seconds`` and ``cpu_seconds`` of training,
        ``steps``, ``diverged`` (a non-finite loss stopped training),
        ``interrupted`` (the signal's name, or None), ``state`` (the final
        :class:`TrainingState`).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.nn.lm import TransformerLM, train
    >>> lm = TransformerLM(vocab_size=4, d_model=8, n_heads=2, context=8)
    >>> out = train(lm, np.arange(200) % 4, steps=3, batch=2, progress=False)
    >>> len(out["losses"])
    3
    """
    plan = _recipe(recipe, resume)
    if checkpoint_every is not None and (
            len(checkpoint_every) != 2 or checkpoint_every[1] not in ("steps", "seconds")
            or not checkpoint_every[0] > 0):
        raise NadarayaError(f"checkpoint_every must be (value > 0, 'steps' or 'seconds'); "
                            f"got {checkpoint_every!r}.")
    device = next(model.parameters()).device
    context = model.config.context
    if train_data.size <= context + 1:
        raise NadarayaError(f"train_data has {train_data.size} characters; windows of the "
                            f"model's context need more than {context + 1}.")
    opt = make_optimizer(model, plan)
    rng = np.random.default_rng(plan.seed)
    if resume is None:
        torch.manual_seed(plan.seed)
        state = TrainingState(plan, 0, 0.0, 0.0, {}, {}, torch.get_rng_state())
    else:
        state = resume
        opt.load_state_dict(_optimizer_state(resume.optimizer, device))
        rng.bit_generator.state = resume.numpy_rng
        torch.set_rng_state(resume.torch_rng)
    clocks = _Clocks(state.seconds, state.cpu_seconds)
    marks = {"eval_step": state.step, "eval_time": clocks.on(plan.clock),
             "ckpt_step": state.step, "ckpt_time": clocks.on(plan.clock),
             "since": len(state.losses)}
    history: dict[str, Any] = {"diverged": False, "interrupted": None}
    bar = Progress(plan, show=progress)

    def snapshot() -> TrainingState:
        state.step, state.seconds, state.cpu_seconds = (len(state.losses), clocks.seconds,
                                                        clocks.cpu_seconds)
        state.optimizer = opt.state_dict()
        state.numpy_rng = rng.bit_generator.state
        state.torch_rng = torch.get_rng_state()
        state.finished = _done(plan, state.step, clocks)
        return state

    def record() -> None:
        assert valid_data is not None
        recent = state.losses[marks["since"]:]
        bits = evaluate(model, valid_data, max_chars=eval_chars)
        state.curve.append({"step": len(state.losses), "seconds": clocks.seconds,
                            "cpu_seconds": clocks.cpu_seconds,
                            "lr": opt.param_groups[0]["lr"],
                            "train_bits": float(np.mean(recent)) if recent else math.nan,
                            "valid_bits": bits})
        marks["since"] = len(state.losses)
        bar.validated(bits)

    model.train()
    with _deferred_interrupts() as caught:
        while not _done(plan, len(state.losses), clocks):
            step = len(state.losses)
            rate = plan.rate(step, clocks.on(plan.clock))
            for group in opt.param_groups:
                group["lr"] = rate
            x, y = batch_windows(train_data, plan.batch, context, rng, device)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            if not torch.isfinite(loss):
                history["diverged"] = True
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if plan.clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), plan.clip)
            opt.step()
            bits = loss.item() / math.log(2)
            state.losses.append(bits)
            clocks.tick()
            step += 1
            if callback is not None:
                callback(step, bits)
            bar.step(step, bits, clocks)
            now = clocks.on(plan.clock)
            finished = _done(plan, step, clocks)
            if valid_data is not None and not finished and (
                    (eval_every and step - marks["eval_step"] >= eval_every)
                    or (eval_seconds and now - marks["eval_time"] >= eval_seconds)):
                record()
                marks["eval_step"], marks["eval_time"] = step, now
            if caught:
                history["interrupted"] = caught[0]
                if checkpoint is not None:
                    checkpoint(snapshot())
                break
            if checkpoint is not None and checkpoint_every is not None and not finished and (
                    (checkpoint_every[1] == "steps"
                     and step - marks["ckpt_step"] >= checkpoint_every[0])
                    or (checkpoint_every[1] == "seconds"
                        and now - marks["ckpt_time"] >= checkpoint_every[0])):
                checkpoint(snapshot())
                marks["ckpt_step"], marks["ckpt_time"] = step, now
            clocks.skip()
    bar.close()
    if (valid_data is not None and not history["diverged"] and not history["interrupted"]
            and (not state.curve or state.curve[-1]["step"] != len(state.losses))):
        record()
    final = snapshot()
    history.update(losses=list(state.losses), curve=list(state.curve),
                   valid=[(row["step"], row["valid_bits"]) for row in state.curve],
                   seconds=clocks.seconds, cpu_seconds=clocks.cpu_seconds,
                   steps=len(state.losses), state=final)
    return history


def _done(plan: Recipe, step: int, clocks: _Clocks) -> bool:
    return plan.progress(step, clocks.on(plan.clock)) >= 1.0


def _recipe(options: dict[str, Any], resume: TrainingState | None) -> Recipe:
    """The run's recipe: the keywords, or the saved one (keywords given must then agree)."""
    if resume is None:
        try:
            return Recipe(**options)
        except TypeError as exc:
            raise NadarayaError(f"train: {exc}; the recipe settings are those of Recipe.") \
                from None
    saved = resume.recipe.to_dict()
    unknown = sorted(set(options) - set(saved))
    if unknown:
        raise NadarayaError(f"train: unknown recipe settings {unknown}; the settings are "
                            f"{sorted(saved)}.")
    differ = [f"{k}={v!r} (saved: {saved[k]!r})" for k, v in options.items() if saved[k] != v]
    if differ:
        raise NadarayaError(f"resume: the run was saved with another recipe: "
                            f"{', '.join(differ)}; leave those settings out to continue it, "
                            "or train anew without resume.")
    return resume.recipe


def _optimizer_state(saved: dict[str, Any], device: torch.device) -> dict[str, Any]:
    state = {int(i): {k: (v.to(device) if k != "step" else v.cpu()) for k, v in values.items()}
             for i, values in saved["state"].items()}
    groups = [{**g, "betas": tuple(g["betas"])} for g in saved["param_groups"]]
    return {"state": state, "param_groups": groups}
