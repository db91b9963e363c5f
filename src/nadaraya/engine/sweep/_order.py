"""Points in sorted order, and the way back.

The sweeps visit keys and queries in ascending order of their one prepared
coordinate. Points that arrive sorted (a grid, a time series) are used as
they are; others are sorted by the radix argsort of ``order.c`` (several
times faster than a comparison sort at a million points).
"""

from __future__ import annotations

import numpy as np

from ..._errors import NadarayaError
from ._native import load, pointer

__all__ = ["Sorted", "sort_points"]


class Sorted:
    """Points in ascending order.

    Attributes
    ----------
    points : numpy.ndarray of shape (n,), float64
        The points, sorted.
    order : numpy.ndarray of shape (n,), int64, or None
        ``points = original[order]``; None when the points came sorted.
    """

    def __init__(self, points: np.ndarray, order: np.ndarray | None) -> None:
        self.points, self.order = points, order

    def take(self, rows: np.ndarray) -> np.ndarray:
        """``rows (n, ...)`` in the sorted order, contiguous."""
        return np.ascontiguousarray(rows if self.order is None else rows[self.order])

    def restore(self, rows: np.ndarray) -> np.ndarray:
        """Rows given in the sorted order, put back in the original order."""
        if self.order is None:
            return rows
        out = np.empty_like(rows)
        out[self.order] = rows
        return out


def sort_points(x: np.ndarray) -> Sorted:
    """Sort ``x (n,)``, float64 and contiguous, keeping the permutation."""
    lib = load("order")
    assert lib is not None  # the engine refuses jobs without native code
    n = x.shape[0]
    if lib.nadaraya_is_sorted(n, pointer(x)):
        return Sorted(x, None)
    points = np.empty(n, dtype=np.float64)
    order = np.empty(n, dtype=np.int64)
    if lib.nadaraya_argsort(n, pointer(x), pointer(points), pointer(order)) != 0:
        raise NadarayaError(
            f"sorting {n} points needs about {32 * n / 2**20:.0f} MiB of scratch memory, which "
            "could not be allocated. Free memory or smooth fewer points at a time."
        )
    return Sorted(points, order)
