"""Number parsers for command-line options: a one-line error that says what was expected."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["count", "non_negative", "number", "positive"]


def number(kind: type, text: str) -> int | float:
    """``kind(text)`` (int or float), or the parser's one-line error."""
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {noun}; got {text!r}") from None


def positive(text: str) -> float:
    """A finite number > 0."""
    return _finite(text, zero=False)


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    return _finite(text, zero=True)


def _finite(text: str, zero: bool) -> float:
    value = float(number(float, text))
    if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
        raise argparse.ArgumentTypeError(
            f"must be a finite number {'>=' if zero else '>'} 0; got {text}")
    return value


def count(least: int, most: int | None = None, *, odd: bool = False) -> Callable[[str], int]:
    """A parser of integers in ``[least, most]`` (no upper end for None), odd ones if asked."""

    def parse(text: str) -> int:
        value = int(number(int, text))
        if value < least or (most is not None and value > most) or (odd and value % 2 == 0):
            kind = "an odd integer" if odd else "an integer"
            span = f"from {least} to {most}" if most is not None else f">= {least}"
            raise argparse.ArgumentTypeError(f"must be {kind} {span}; got {value}")
        return value

    return parse
