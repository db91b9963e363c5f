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

    Parameters
    ----------
    rows : array-like of int of shape (m,), optional
        The key hidden from each query: query ``i`` does not see key
        ``rows[i]``. Default: key ``i`` (queries are the keys). Given, it
        leaves out the training points ``rows`` for the queries
        ``X[rows]`` (a few rows of a leave-one-out fit, recomputed).
    """

    name = "leave-one-out"

    def __init__(self, rows: object = None) -> None:
        self.rows = None
        if rows is not None:
            t = torch.as_tensor(rows)
            if t.ndim != 1 or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
                raise NadarayaError(
                    "LeaveOneOut rows must be a 1-D array of key indices (one per query); "
                    f"got {rows!r}."
                )
            self.rows = t.to(torch.int64)

    def _prepare(self, bound: BoundMask) -> None:
        if self.rows is None:
            return
        m, n = bound.problem.n_queries, bound.problem.n_keys
        if self.rows.numel() != m:
            raise NadarayaError(
                f"LeaveOneOut rows must name one key per query ({m}); got {self.rows.numel()}."
            )
        if m and not bool(((self.rows >= 0) & (self.rows < n)).all()):
            raise NadarayaError(
                f"LeaveOneOut rows must be key indices in [0, {n}); "
                f"got values from {int(self.rows.min())} to {int(self.rows.max())}."
            )

    def _hidden(self, bound: BoundMask, i: torch.Tensor) -> torch.Tensor:
        if self.rows is None:
            return i
        return self.rows.to(i.device)[i]

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return self._hidden(bound, i) != j

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        i0, i1, j0, j1 = _span(rows, cols)
        if self.rows is not None:
            hidden = self.rows[rows]
            if not bool(((hidden >= j0) & (hidden <= j1)).any()):
                return Visibility.FULL
            return Visibility.EMPTY if (i0 == i1 and j0 == j1) else Visibility.PARTIAL
        if i1 < j0 or j1 < i0:
            return Visibility.FULL
        if i0 == i1 == j0 == j1:
            return Visibility.EMPTY
        return Visibility.PARTIAL

    def _params(self) -> str:
        return "" if self.rows is None else f"rows=<{self.rows.numel()} rows>"
