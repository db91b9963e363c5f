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

__all__ = ["Boxes", "bin_points", "grid_of", "linear_keys", "unique_rows"]


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
