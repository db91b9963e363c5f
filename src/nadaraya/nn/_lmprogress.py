"""The progress line of language-model training: step, loss, validation, elapsed, time left."""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol

from ._lmrecipe import Recipe

__all__ = ["Progress", "clock_text"]


class _Clocks(Protocol):
    seconds: float
    cpu_seconds: float

    def on(self, clock: str) -> float: ...


def clock_text(seconds: float) -> str:
    """``seconds`` as ``m:ss`` or ``h:mm:ss``.

    Examples
    --------
    >>> clock_text(3725.2)
    '1:02:05'
    """
    total = max(round(seconds), 0)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """A progress line on standard error, redrawn at most a few times a second.

    Parameters
    ----------
    recipe : Recipe
        Its step and time budgets give the fraction done and the time left.
    show : bool or None
        True: always; False: never; None: when standard error is a terminal.
    """

    def __init__(self, recipe: Recipe, *, show: bool | None) -> None:
        stream = sys.stderr
        if show is None:
            isatty = getattr(stream, "isatty", None)
            show = bool(isatty and isatty())
        self.recipe, self.show, self.stream = recipe, show, stream
        self.valid: float | None = None
        self._last = -1.0
        self._bar: Any = None
        self._line = ""
        if show:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=100, file=stream, dynamic_ncols=True, leave=True,
                                 bar_format="{percentage:3.0f}%|{bar:20}| {postfix}")

    def text(self, step: int, bits: float, clocks: _Clocks) -> str:
        """The line: step, training bits, last validation bits, elapsed, time left."""
        used = clocks.on(self.recipe.clock)
        done = self.recipe.progress(step, used)
        if self.recipe.time_budget is not None and (
                self.recipe.steps is None
                or used / self.recipe.time_budget >= step / self.recipe.steps):
            left = self.recipe.time_budget - used
        else:
            left = used / max(done, 1e-12) * (1.0 - done) if done > 0 else float("nan")
        total = f"/{self.recipe.steps}" if self.recipe.steps is not None else ""
        valid = f"  valid {self.valid:.3f} bpc" if self.valid is not None else ""
        cpu = f" ({clock_text(clocks.cpu_seconds)} cpu)" if self.recipe.clock == "cpu" else ""
        left_text = clock_text(left) if left == left else "?"
        return (f"step {step}{total}  loss {bits:.3f} bpc{valid}  elapsed "
                f"{clock_text(clocks.seconds)}{cpu}  left {left_text}")

    def step(self, step: int, bits: float, clocks: _Clocks) -> None:
        if not self.show:
            return
        now = time.monotonic()
        self._line = self.text(step, bits, clocks)
        done = self.recipe.progress(step, clocks.on(self.recipe.clock))
        if now - self._last < 0.25 and done < 1.0:
            return
        self._last = now
        if self._bar is not None:
            self._bar.n = round(100 * done, 1)
            self._bar.set_postfix_str(self._line, refresh=False)
            self._bar.refresh()
        else:
            print(f"\r{self._line}", end="", file=self.stream, flush=True)

    def validated(self, bits: float) -> None:
        self.valid = bits

    def close(self) -> None:
        if not self.show:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(self._line, refresh=True)
            self._bar.close()
        elif self._line:
            print(file=self.stream, flush=True)
