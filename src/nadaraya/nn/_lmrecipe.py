"""The training recipe of the language model: settings, learning-rate schedule, optimiser."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError

__all__ = ["CLOCKS", "Recipe", "cosine_schedule", "make_optimizer"]

#: Clocks a time budget can be measured on: wall seconds, or CPU seconds of this process
#: (all its threads together, ``time.process_time``).
CLOCKS = ("wall", "cpu")


@dataclass(frozen=True)
class Recipe:
    """How a :class:`~nadaraya.nn.lm.TransformerLM` is trained.

    The run ends after ``steps`` optimisation steps or ``time_budget``
    seconds of training on ``clock``, whichever comes first; its progress
    ``p`` in [0, 1] is the larger of the two fractions, and the learning rate
    follows :func:`cosine_schedule` of ``p``, so a time-budgeted run ends its
    schedule when its time is up.

    Attributes
    ----------
    steps : int or None, default 1000
        Most optimisation steps (None: the time budget alone ends the run).
    time_budget : float or None
        Most seconds of training (evaluations and checkpoints not counted).
    clock : {"wall", "cpu"}, default "wall"
        What ``time_budget`` measures.
    batch : int, default 32
        Windows per step.
    lr : float, default 3e-3
        Peak learning rate.
    warmup : float, default 0.05
        Fraction of the run spent raising the rate linearly from 0.
    min_lr : float, default 0.1
        The rate at the end, as a fraction of ``lr``.
    weight_decay : float, default 0.1
        AdamW's decoupled decay on matrices (not on biases, norms or scales).
    clip : float or None, default 1.0
        Largest gradient norm (None: no clipping).
    seed : int, default 0
        Seeds the windows drawn and dropout.

    Examples
    --------
    >>> from nadaraya.nn.lm import Recipe
    >>> Recipe(time_budget=60.0, steps=None).progress(step=10, seconds=30.0)
    0.5
    """

    steps: int | None = 1000
    time_budget: float | None = None
    clock: str = "wall"
    batch: int = 32
    lr: float = 3e-3
    warmup: float = 0.05
    min_lr: float = 0.1
    weight_decay: float = 0.1
    clip: float | None = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        def positive(name: str, value: Any, kind: type, allow_none: bool = False) -> None:
            if value is None and allow_none:
                return
            ok = (not isinstance(value, bool) and isinstance(value, (int, float) if kind is float
                                                             else int)
                  and math.isfinite(value) and value > 0)
            if not ok:
                noun = "an integer" if kind is int else "a finite number"
                raise NadarayaError(f"{name} must be {noun} > 0"
                                    f"{' or None' if allow_none else ''}; got {value!r}.")

        positive("steps", self.steps, int, allow_none=True)
        positive("time_budget", self.time_budget, float, allow_none=True)
        if self.steps is None and self.time_budget is None:
            raise NadarayaError("give steps, time_budget or both: with neither, training "
                                "never ends.")
        if self.clock not in CLOCKS:
            raise NadarayaError(f"clock must be one of {CLOCKS}; got {self.clock!r}.")
        positive("batch", self.batch, int)
        positive("lr", self.lr, float)
        positive("clip", self.clip, float, allow_none=True)
        for name, low, high in (("warmup", 0.0, 1.0), ("min_lr", 0.0, 1.0),
                                ("weight_decay", 0.0, math.inf)):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not low <= value <= high or (name == "warmup" and value == 1.0)):
                raise NadarayaError(f"{name} must be a number in [{low}, {high}"
                                    f"{')' if name == 'warmup' else ']'}; got {value!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise NadarayaError(f"seed must be an integer >= 0; got {self.seed!r}.")

    def progress(self, step: int, seconds: float) -> float:
        """Fraction of the run done after ``step`` steps and ``seconds`` on the clock."""
        done = 0.0
        if self.steps is not None:
            done = step / self.steps
        if self.time_budget is not None:
            done = max(done, seconds / self.time_budget)
        return min(done, 1.0)

    def rate(self, step: int, seconds: float) -> float:
        """The learning rate of step ``step + 1``, which starts after ``seconds`` of training.

        The step counts as done (so the first step of a step budget moves the
        weights), the seconds as they stand when it starts.
        """
        return cosine_schedule(self.progress(step + 1, seconds), lr=self.lr,
                               warmup=self.warmup, min_lr=self.min_lr)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Recipe:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise NadarayaError(f"unknown recipe settings {unknown}; the settings are "
                                f"{sorted(names)}.")
        return cls(**values)


def cosine_schedule(progress: float, *, lr: float, warmup: float = 0.05,
                    min_lr: float = 0.1) -> float:
    """Linear warmup, then a cosine decay to a floor.

    Parameters
    ----------
    progress : float
        Fraction of the run done, in [0, 1] (values outside are clipped).
    lr : float
        Peak rate, reached when ``progress == warmup``.
    warmup : float, default 0.05
        Fraction of the run spent rising linearly from 0 to ``lr``.
    min_lr : float, default 0.1
        The final rate, as a fraction of ``lr``.

    Returns
    -------
    float
        ``lr * progress / warmup`` during the warmup, then
        ``floor + (lr - floor) (1 + cos(pi s)) / 2`` with ``floor = min_lr lr``
        and ``s = (progress - warmup) / (1 - warmup)``.

    Examples
    --------
    >>> from nadaraya.nn.lm import cosine_schedule
    >>> cosine_schedule(1.0, lr=1e-3, warmup=0.1, min_lr=0.1)
    0.0001
    """
    p = min(max(float(progress), 0.0), 1.0)
    if p < warmup:
        return lr * p / warmup
    floor = min_lr * lr
    s = (p - warmup) / (1.0 - warmup)
    return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * s))


def make_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (biases, norms and kernel scales excluded).

    Parameters are listed once even when tied (the embedding that is also the head).
    """
    decay, keep = [], []
    for p in model.parameters():  # parameters() yields a tied tensor once
        if p.requires_grad:
            (decay if p.dim() >= 2 else keep).append(p)
    groups = [{"params": decay, "weight_decay": recipe.weight_decay},
              {"params": keep, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=recipe.rate(0, 0.0), betas=(0.9, 0.99))
