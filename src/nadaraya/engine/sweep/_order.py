"""Points in sorted order, without a sorted copy: their order, and searches through it.

The sweeps visit keys and queries in ascending order of their one prepared
coordinate, reading each point through its order (``points[order[i]]`` is
the ``i``-th smallest) and writing each query's result to its own row, so
neither sorted copies of the points nor outputs in sorted order exist.
Points that arrive sorted (a grid, a time series) have no order (None: the
identity). Others are sorted by ``order.c`` in scratch of about 12.5 bytes
per point (buckets of the points' range, sorted one at a time). Orders hold
int32 entries while every index fits (half the memory of int64), int64
beyond. Queries are sorted in groups by position (:func:`groups`), each
swept before the next is sorted, so the full order is never held.
"""

from __future__ import annotations

import numpy as np

from ..._errors import NadarayaError
from ._native import load, pointer

__all__ = ["GROUP", "Groups", "is_wide", "rows_between", "search", "sort_order"]

# Orders of more points than this hold int64 entries (every index of fewer fits in int32).
INT32_POINTS = 2**31
# Buckets of at most this many points are sorted by insertion (order.c caps it at 64).
LEAF = 32
# Keys and queries are sorted and swept in groups of about this many points (by position),
# so that one group's order (4 bytes a point) exists at a time.
GROUP = 2**20


def is_wide(*counts: int) -> bool:
    """Whether orders of this many points (each count) need int64 entries."""
    return max(counts, default=0) > INT32_POINTS


def sort_order(x: np.ndarray, wide: bool) -> np.ndarray | None:
    """A stable argsort of ``x (n,)``, float64 and contiguous; None when ``x`` is sorted.

    Parameters
    ----------
    x : numpy.ndarray of shape (n,)
    wide : bool
        int64 entries (else int32; see :func:`is_wide`).

    Returns
    -------
    numpy.ndarray of shape (n,), int32 or int64, or None
        ``x[order]`` is ascending.
    """
    lib = load("order")
    assert lib is not None  # the engine refuses jobs without native code
    if lib.nadaraya_is_sorted(x.shape[0], pointer(x)):
        return None
    return _sorted_rows(x, np.arange(x.shape[0], dtype=np.int64 if wide else np.int32), x)


def _sorted_rows(x: np.ndarray, rows: np.ndarray, at: np.ndarray | None) -> np.ndarray:
    """``rows`` (indices into ``x``) reordered in place so that ``x[rows]`` ascends, stably;
    ``at = x[rows]``, contiguous, is read instead of ``x`` where given."""
    lib = load("order")
    assert lib is not None
    wide = int(rows.dtype == np.int64)
    if lib.nadaraya_sort_rows(rows.shape[0], pointer(x), pointer(rows), wide, LEAF,
                              pointer(at)) != 0:
        raise NadarayaError(
            f"sorting {rows.shape[0]} points needs about "
            f"{(rows.itemsize + 8.5) * rows.shape[0] / 2**20:.0f} MiB of scratch memory, which "
            "could not be allocated. Free memory or smooth fewer points at a time."
        )
    return rows


def rows_between(x: np.ndarray, lo: float, hi: float | None, wide: bool) -> np.ndarray:
    """The rows ``i`` of ``x`` with ``lo <= x[i] < hi`` (``hi`` None: no upper end), sorted.

    Returns
    -------
    numpy.ndarray of shape (k,), int32 or int64
        The rows in ascending order of position (stable: ties in ascending row).
    """
    lib = load("order")
    assert lib is not None
    last, top = (1, np.inf) if hi is None else (0, hi)
    count = lib.nadaraya_select(x.shape[0], pointer(x), lo, top, last, int(wide), None, 0,
                                None)
    rows = np.empty(count, dtype=np.int64 if wide else np.int32)
    # the positions gathered beside the rows sort faster (read in order, not through the
    # rows), for 8 bytes a point more: up to a group's worth
    at = np.empty(count) if count <= GROUP else None
    lib.nadaraya_select(x.shape[0], pointer(x), lo, top, last, int(wide), pointer(rows), count,
                        pointer(at))
    return _sorted_rows(x, rows, at)


class Groups:
    """The points ``x (m,)`` in groups of about ``size`` by position, each sorted on request.

    Group ``g`` holds the points between two quantiles of a sample of ``x`` (of
    sorted points: ``size`` consecutive ones), so the groups follow one another
    along the line and each is a contiguous range of the sorted points: sweeping
    them one after another sweeps ``x`` in order, and only one group's order
    (``4 size`` bytes) need exist at a time. Many equal points stay in one group,
    however large.

    Parameters
    ----------
    x : numpy.ndarray of shape (m,), float64
    wide : bool
        int64 entries (else int32; see :func:`is_wide`).
    size : int
    """

    def __init__(self, x: np.ndarray, wide: bool, size: int) -> None:
        lib = load("order")
        assert lib is not None
        self.x, self.wide = x, wide
        m, size = x.shape[0], max(1, size)
        self.sorted = bool(lib.nadaraya_is_sorted(m, pointer(x)))
        count = max(1, -(-m // size))
        if self.sorted:
            self.edges = [i * size for i in range(count)]  # first rows
        else:
            sample = np.sort(x[:: max(1, m // (64 * count))]) if count > 1 else x[:0]
            cuts = np.unique(sample[(np.arange(1, count) * sample.size) // count])
            self.edges = [-np.inf, *cuts.tolist()]  # lowest positions

    def __len__(self) -> int:
        return len(self.edges)

    def order(self, g: int) -> np.ndarray:
        """Group ``g``'s rows of ``x``, in ascending order of position."""
        dtype = np.int64 if self.wide else np.int32
        last = g + 1 == len(self.edges)
        if self.sorted:
            stop = self.x.shape[0] if last else self.edges[g + 1]
            return np.arange(self.edges[g], stop, dtype=dtype)
        return rows_between(self.x, self.edges[g], None if last else self.edges[g + 1],
                            self.wide)


def search(x: np.ndarray, order: np.ndarray | None, targets: np.ndarray,
           side: str = "left") -> np.ndarray:
    """``numpy.searchsorted(x[order], targets, side)`` without forming ``x[order]``.

    Parameters
    ----------
    x : numpy.ndarray of shape (n,), float64
    order : numpy.ndarray of shape (k,), int32 or int64, or None
        Rows of ``x`` in ascending order of ``x`` (None: all of ``x``, which is sorted).
    targets : numpy.ndarray of shape (t,)
    side : {"left", "right"}

    Returns
    -------
    numpy.ndarray of shape (t,), int64
    """
    lib = load("order")
    assert lib is not None
    targets = np.ascontiguousarray(targets, dtype=np.float64)
    out = np.empty(targets.shape[0], dtype=np.int64)
    wide = order is not None and order.dtype == np.int64
    n = x.shape[0] if order is None else order.shape[0]
    lib.nadaraya_search(n, pointer(x), pointer(order), int(wide), targets.shape[0],
                        pointer(targets), int(side == "right"), pointer(out))
    return out
