"""Points sorted into boxes: a uniform grid over the occupied cells only.

Box ``i = floor(u / side)`` (per coordinate) holds the points ``u`` of the
half-open cell ``[i side, (i + 1) side)``; its centre is ``(i + 1/2) side``.
Only occupied boxes exist (their integer coordinates, sorted
lexicographically), so memory is ``O(n)`` however far apart the points lie.

The bookkeeping runs in NumPy (one thread, no synchronization between
operations) and hands torch tensors that share its memory to the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import _native

__all__ = ["BoxIndex", "Boxes", "bin_points", "count_boxes", "grid_of", "linear_keys", "sort_keys",
           "unique_rows"]


@dataclass
class Boxes:
    """Points grouped by box.

    Attributes
    ----------
    coords : torch.Tensor of shape (nb, d), int64
        Integer coordinates of the occupied boxes, in lexicographic order.
    start : torch.Tensor of shape (nb + 1,), int64
        Box ``b`` holds sorted points ``start[b] .. start[b + 1] - 1``.
    order : torch.Tensor of shape (n,), int64
        ``order[j]`` is the row, in the caller's points, of sorted point ``j``.
    side : float
        Box side (kernel coordinates).
    """

    coords: torch.Tensor
    start: torch.Tensor
    order: torch.Tensor
    side: float

    @property
    def count(self) -> torch.Tensor:
        """Points per box, shape ``(nb,)``."""
        return self.start[1:] - self.start[:-1]

    @property
    def n_boxes(self) -> int:
        return self.coords.shape[0]


def _np(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else x


def _spans(coords: np.ndarray) -> tuple[np.ndarray, list[int]]:
    lo = coords.min(axis=0)
    return lo, (coords.max(axis=0) - lo + 1).tolist()


def _linear(coords: np.ndarray, lo: np.ndarray, span: list[int]) -> np.ndarray:
    key = coords[:, 0] - lo[0]
    for i in range(1, coords.shape[1]):
        key = key * span[i] + (coords[:, i] - lo[i])
    return np.ascontiguousarray(key)


def _unlinear(key: np.ndarray, lo: np.ndarray, span: list[int]) -> np.ndarray:
    out = np.empty((key.shape[0], len(span)), dtype=np.int64)
    for i in reversed(range(len(span))):
        out[:, i] = key % span[i] + lo[i]
        key = key // span[i]
    return out


def linear_keys(coords: torch.Tensor | np.ndarray) -> torch.Tensor | None:
    """Int64 keys ordering integer rows ``(N, d)`` lexicographically, or None if they overflow."""
    c = _np(coords)
    if c.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64)
    lo, span = _spans(c)
    if math.prod(span) >= 2**62:
        return None
    return torch.from_numpy(_linear(c, lo, span))


def _lexsort(coords: np.ndarray) -> np.ndarray:
    """Permutation sorting integer rows ``(N, d)`` lexicographically (stable)."""
    return np.lexsort(coords.T[::-1])


def unique_rows(coords: torch.Tensor | np.ndarray) -> torch.Tensor:
    """The distinct rows of an integer array ``(N, d)``, in lexicographic order."""
    c = _np(coords)
    if c.shape[0] == 0:
        return torch.from_numpy(np.ascontiguousarray(c))
    lo, span = _spans(c)
    if math.prod(span) < 2**62:
        return torch.from_numpy(_unlinear(np.unique(_linear(c, lo, span)), lo, span))
    rows = c[_lexsort(c)]
    new = np.ones(rows.shape[0], dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    return torch.from_numpy(np.ascontiguousarray(rows[new]))


def grid_of(points: torch.Tensor, side: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Lowest box coordinates ``lo (d,)`` and box counts ``span (d,)`` covering the points."""
    low, high = _native.value_range(points)
    lo = np.floor(low / side).astype(np.int64)
    hi = np.floor(high / side).astype(np.int64)
    return torch.from_numpy(lo), torch.from_numpy(hi - lo + 1)


def bin_points(points: torch.Tensor, side: float) -> Boxes:
    """Sort points ``(n, d)`` (float64, ``|u| / side < 2^45``) into boxes of side ``side``.

    A counting sort on the box keys when the grid over the points has at most
    ``4 n`` boxes; a comparison sort of the occupied boxes' coordinates otherwise.
    """
    n = points.shape[0]
    lo, span_t = grid_of(points, side)
    span = span_t.tolist()
    total = math.prod(span)
    if total <= 4 * n + 4096:
        key = _native.box_keys(points, side, lo, span_t)
        hist = torch.from_numpy(np.zeros(total + 1, dtype=np.int64))
        order = torch.from_numpy(np.empty(n, dtype=np.int64))
        _native.counting_sort(key, total, hist, order)
        counts = hist.numpy()[:total]
        occupied = np.flatnonzero(counts)
        start = np.zeros(occupied.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts[occupied], out=start[1:])
        coords = _unlinear(occupied, lo.numpy(), span)
        return Boxes(torch.from_numpy(coords), torch.from_numpy(start), order, side)
    cells = np.floor(_np(points) / side).astype(np.int64)
    order = _lexsort(cells)
    cells = cells[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (cells[1:] != cells[:-1]).any(axis=1)
    first = np.flatnonzero(new)
    start = np.append(first, n).astype(np.int64)
    return Boxes(torch.from_numpy(np.ascontiguousarray(cells[first])), torch.from_numpy(start),
                 torch.from_numpy(order.astype(np.int64)), side)


def sort_keys(points: torch.Tensor, values: torch.Tensor,
              side: float) -> tuple[Boxes, dict[str, torch.Tensor]]:
    """Keys and values sorted into boxes, as :func:`bin_points` and ``_native.gather`` give them.

    On a grid of at most ``4 n`` boxes the points are scattered to their rows
    directly (no permutation or box keys held: memory is the sorted copy);
    otherwise they are sorted as by :func:`bin_points`.

    Parameters
    ----------
    points : torch.Tensor of shape (n, d), float64, contiguous
    values : torch.Tensor of shape (n, nv), float64, contiguous
    side : float

    Returns
    -------
    boxes : Boxes
        With an empty ``order``: the keys are in box order.
    sorted : dict
        ``{"points_t": (d, n), "values_t": (nv, n), "mass": (nb, 1 + nv)}``.
    """
    n = points.shape[0]
    lo, span_t = grid_of(points, side)
    span = span_t.tolist()
    total = math.prod(span)
    if total > 4 * n + 4096:
        boxes = bin_points(points, side)
        found = _native.gather(boxes.start, boxes.order, points, values)
        boxes.order = boxes.order[:0]
        return boxes, found
    ends, points_t, values_t = _native.scatter(points, values, side, lo, span_t, total)
    occupied = np.flatnonzero(np.diff(ends, prepend=0))
    start = np.zeros(occupied.shape[0] + 1, dtype=np.int64)
    start[1:] = ends[occupied]
    coords = _unlinear(occupied, lo.numpy(), span)
    boxes = Boxes(torch.from_numpy(coords), torch.from_numpy(start),
                  torch.zeros(0, dtype=torch.int64), side)
    mass = _native.mass(boxes.start, values_t)
    return boxes, {"points_t": points_t, "values_t": values_t, "mass": mass}


def count_boxes(points: torch.Tensor, side: float, rows: int) -> Boxes:
    """The occupied boxes of points ``(m, d)`` and their counts.

    The points are not sorted (the result's ``order`` is empty; ``start`` gives
    the counts), so memory stays ``O(rows)`` beyond the boxes themselves: points
    other than float64 and contiguous are converted ``rows`` at a time.
    """
    m = points.shape[0]
    ready = points.dtype == torch.float64 and points.is_contiguous()
    rows = m if ready else max(1, rows)  # float64 points are read in place, all at once

    def block(a: int) -> torch.Tensor:
        return points[a:a + rows].detach().to(torch.float64).contiguous()

    lows, highs = zip(*(_native.value_range(block(a)) for a in range(0, m, rows)), strict=True)
    low, high = np.min(lows, axis=0), np.max(highs, axis=0)
    lo = np.floor(low / side).astype(np.int64)
    span = (np.floor(high / side).astype(np.int64) - lo + 1).tolist()
    total = math.prod(span)
    if total <= 4 * m + 4096:
        lo_t, span_t = torch.from_numpy(lo), torch.tensor(span, dtype=torch.int64)
        hist = torch.zeros(total, dtype=torch.int64)
        for a in range(0, m, rows):
            _native.box_count(block(a), side, lo_t, span_t, hist)
        counts = hist.numpy()
        occupied = np.flatnonzero(counts)
        coords, count = _unlinear(occupied, lo, span), counts[occupied]
    else:
        parts = [bin_points(block(a), side) for a in range(0, m, rows)]
        cells = np.concatenate([b.coords.numpy() for b in parts])
        each = np.concatenate([b.count.numpy() for b in parts])
        order = _lexsort(cells)
        cells, each = cells[order], each[order]
        new = np.ones(cells.shape[0], dtype=bool)
        new[1:] = (cells[1:] != cells[:-1]).any(axis=1)
        first = np.flatnonzero(new)
        coords, count = np.ascontiguousarray(cells[first]), np.add.reduceat(each, first)
    start = np.zeros(coords.shape[0] + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    return Boxes(torch.from_numpy(coords), torch.from_numpy(start),
                 torch.zeros(0, dtype=torch.int64), side)


class BoxIndex:
    """Rows of integer box coordinates ``(nb, d)`` (lexicographic order), found by value."""

    def __init__(self, coords: np.ndarray) -> None:
        self.keys: np.ndarray | None = None
        self.lo, self.span = np.zeros(coords.shape[1], dtype=np.int64), [1] * coords.shape[1]
        if coords.shape[0]:
            self.lo, self.span = _spans(coords)
            if math.prod(self.span) < 2**62:
                self.keys = _linear(coords, self.lo, self.span)
        self.rows = None if self.keys is not None else {
            tuple(c): i for i, c in enumerate(coords.tolist())}

    def find(self, coords: np.ndarray) -> np.ndarray:
        """The row of each of ``coords`` ``(k, d)`` (every one must be present)."""
        if self.keys is not None:
            return np.searchsorted(self.keys, _linear(coords, self.lo, self.span))
        assert self.rows is not None
        return np.array([self.rows[tuple(c)] for c in coords.tolist()], dtype=np.int64)
