"""Masks defined by the positions of queries and keys: causal, window, leave-one-out."""

from __future__ import annotations

import torch

from .._errors import NadarayaError
from ._base import BoundMask, IndexMask, Visibility

__all__ = ["Causal", "LeaveOneOut", "Window"]


def _span(rows: slice, cols: slice) -> tuple[int, int, int, int]:
    return rows.start, rows.stop - 1, cols.start, cols.stop - 1


class Causal(IndexMask):
    """Query ``i`` sees keys ``j <= i + offset`` (SDPA's ``is_causal`` when offset is 0).

    Parameters
    ----------
    offset : int, default 0
        Shift of the diagonal; ``n_keys - n_queries`` aligns the last query
        with the last key (decoding with a cache).
    """

    name = "causal"

    def __init__(self, offset: int = 0) -> None:
        if not isinstance(offset, int):
            raise NadarayaError(f"offset must be an integer; got {offset!r}.")
        self.offset = offset

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return j <= i + self.offset

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        i0, i1, j0, j1 = _span(rows, cols)
        if j1 <= i0 + self.offset:
            return Visibility.FULL
        if j0 > i1 + self.offset:
            return Visibility.EMPTY
        return Visibility.PARTIAL

    def _params(self) -> str:
        return "" if self.offset == 0 else f"offset={self.offset}"


class Window(IndexMask):
    """Query ``i`` sees keys with ``|i - j| <= radius`` (a sliding window)."""

    name = "window"

    def __init__(self, radius: int) -> None:
        if not isinstance(radius, int) or radius < 0:
            raise NadarayaError(f"window radius must be an integer >= 0; got {radius!r}.")
        self.radius = radius

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return (i - j).abs() <= self.radius

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        i0, i1, j0, j1 = _span(rows, cols)
        if max(abs(i0 - j1), abs(i1 - j0)) <= self.radius:
            return Visibility.FULL
        if max(0, j0 - i1, i0 - j1) > self.radius:
            return Visibility.EMPTY
        return Visibility.PARTIAL

    def _params(self) -> str:
        return str(self.radius)


class LeaveOneOut(IndexMask):
    """Key ``i`` is hidden from query ``i``: exact leave-one-out in one pass.

    Used with queries equal to the keys it gives the leave-one-out fit that
    cross-validation needs, without refitting n times.
    """

    name = "leave-one-out"

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return i != j

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        i0, i1, j0, j1 = _span(rows, cols)
        if i1 < j0 or j1 < i0:
            return Visibility.FULL
        if i0 == i1 == j0 == j1:
            return Visibility.EMPTY
        return Visibility.PARTIAL
