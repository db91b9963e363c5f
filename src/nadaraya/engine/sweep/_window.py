"""Compact polynomial kernels in one dimension: window sums over sorted keys.

With a polynomial kernel ``P(x - k)`` of unit support (uniform ``1``,
Epanechnikov ``1 - t^2``, tricube ``(1 - |t|^3)^3``), a query's sums are sums
of moments ``sum_k (k - c)^i v_k`` over the keys in its window, and the
windows of sorted queries slide to the right. The usual way, differences of
global prefix sums ``sum_{k < hi} k^i v_k - sum_{k < lo} k^i v_k``, loses to
cancellation everything below ``eps`` times the prefix sums: keys far from
the origin (``k^2`` at ``10^12``), a window of three keys among millions, or
values of mixed sign and magnitude (a window of values near ``1e-9`` after
a million values near 1) lose digits there, or all of them.

So ``window.c`` never subtracts: a two-stack sliding window (a *front* of
suffix sums made when the window last flipped, a *back* running sum of the
keys that entered since) holds every window sum as a sum over keys of that
window alone, each stack centred on one of its own keys, in compensated
(TwoSum) arithmetic. Each key enters the back once and is flipped into the
front once (the tricube's back, also when it spans more than 1/4), so the
cost is O(n + m) after sorting. The windows use the dense engine's test
(the difference ``x - k`` rounded to the job's dtype, compared with 1). Keys
and queries are read through their sorted orders and each query's sums are
written to its own row, so no sorted copy exists.

Error bound (derived here; the tests check it). With ``u = 2^-53``, a query's
window of ``count`` keys and ``P(t) = sum_j p_j t^j`` its polynomial, each
moment ``sum (k - c)^i v`` is the compensated sum of terms rounded ``2 i + 1``
times, and the query's sum ``sum_i g_i(x - c) S_i`` adds at most ``2 deg + 4``
roundings, each relative to ``sum_k |v_k| sum_j |p_j| (|x - c| + |k - c|)^j``.
Every key lies within 1 of the query (within 2 of the centre) and the
tricube's terms are bounded by its centres (front: no cancellation, at most
``sum_j |p_j| = 8``; back: spanning at most 1/4, at most ``sum_j |p_j|
1.25^j < 26``), so with ``gamma`` = 4 (uniform), 100 (Epanechnikov: ``8 (1 +
3^2)`` with room) or 640 (tricube, each half window: ``24 * 26``):

    |total' - total| <= gamma u count,   |acc'_c - acc_c| <= gamma u sum_k |v_kc|

over the window's keys only, and the weighted mean moves by at most
``gamma u (sum_k |v_kc| + |mean_c| count) / total``. That is each weight to
about ``u`` of the kernel's scale, as the dense engine's ``1 - r^2`` (the
tricube's dense weights are relatively exact, so near the edge of its
support the dense engine is the more accurate). A query whose weight sum is
below ``count / 16`` (its keys near the edge) is summed directly, key by key,
so the bound above never exceeds ``32 gamma u max |v|``, and no sum comes out
near zero or negative through cancellation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from ..._config import get_config
from ..._errors import NadarayaError
from ._native import load, pointer
from ._order import Groups, rows_between, search

__all__ = ["GAMMA", "WINDOW_KERNELS", "to_means", "window_sums"]

# Kernel codes of window.c and the degree of each kernel's polynomial.
WINDOW_KERNELS = {"uniform": (0, 0), "epanechnikov": (1, 2), "tricube": (2, 9)}
# The constants of the error bound above.
GAMMA = {"uniform": 4.0, "epanechnikov": 100.0, "tricube": 640.0}
# The tricube's back is flipped once its keys span more than this.
_SPAN = 0.25
# Suffix sums are kept at every key of the front, or every G-th where memory is short:
# the fronts of all threads hold at most this share of the working memory (the keys
# between two kept sums are summed directly, kernel by kernel).
_MIN_STRIDE = 1
FRONT_SHARE = 1 / 64


def _widest(keys: np.ndarray, key_order: np.ndarray | None, queries: np.ndarray,
            query_order: np.ndarray | None, step: int = 64) -> int:
    """An upper bound of the number of keys in one window (for the front's storage).

    Queries between two sampled ones (every ``step``-th of the sorted queries and
    the last) have windows within the first one's left end and the second one's
    right end, widened for rounding.
    """
    m = queries.shape[0] if query_order is None else query_order.shape[0]
    if m == 0:
        return 0
    ranks = np.unique(np.append(np.arange(0, m, step), m - 1))
    sample = queries[ranks if query_order is None else query_order[ranks]]
    margin = 2.0**-20 + 2.0**-50 * np.abs(sample)
    lo = search(keys, key_order, sample - 1.0 - margin, "left")
    hi = search(keys, key_order, sample + 1.0 + margin, "right")
    return int((hi[1:] - lo[:-1]).max()) if sample.size > 1 else int(hi[0] - lo[0])


def window_sums(name: str, keys: np.ndarray, values: np.ndarray, queries: np.ndarray,
                query_groups: Groups, single: bool, run: Callable[..., list], parts: int,
                total: np.ndarray, acc: np.ndarray) -> int:
    """Add the weight sums and weighted value sums of the queries to their rows.

    The queries go a group at a time, each with the keys within reach of it
    (support 1, widened for rounding), sorted.

    Parameters
    ----------
    name : {"uniform", "epanechnikov", "tricube"}
    keys : numpy.ndarray of shape (n,)
        Key positions (prepared: unit support), float64, in any order.
    values : numpy.ndarray of shape (n, p)
        The keys' values in the keys' order, float64, contiguous.
    queries : numpy.ndarray of shape (m,)
        Query positions, float64, in any order.
    query_groups : Groups
        The queries in groups by position.
    single : bool
        Round differences to float32 before comparing them with the support
        (the dense engine's test for a float32 job).
    run : callable
        ``run(fn, blocks)`` gives ``[fn(b) for b in blocks]``, in threads or in turn
        (:func:`~nadaraya.engine._threads.map_blocks`).
    parts : int
        How many ranges of a group's sorted queries to split the work into (threads).
    total, acc : numpy.ndarray of shapes (m,), (m, p)
        Zero where nothing was added yet; each query's sums are added to its row
        (nothing where its window holds no key).

    Returns
    -------
    int
        Queries (half windows, for the tricube) summed directly.
    """
    direct = 0
    for g in range(len(query_groups)):
        rows = query_groups.order(g)
        if rows.shape[0] == 0:
            continue
        ends = queries[rows[[0, -1]]]
        margin = 2.0**-20 + 2.0**-50 * np.abs(ends)
        reach = rows_between(keys, float(ends[0] - 1.0 - margin[0]),
                             float(np.nextafter(ends[1] + 1.0 + margin[1], np.inf)),
                             query_groups.wide)
        if reach.shape[0]:
            direct += _group_sums(name, keys, reach, values, queries, rows, single, run, parts,
                                  total, acc)
        del rows, reach
    return direct


def _group_sums(name: str, keys: np.ndarray, key_order: np.ndarray, values: np.ndarray,
                queries: np.ndarray, query_order: np.ndarray, single: bool,
                run: Callable[..., list], parts: int, total: np.ndarray,
                acc: np.ndarray) -> int:
    """:func:`window_sums` of the queries ``query_order`` over the keys ``key_order`` (both
    sorted rows; every key within reach of those queries among them)."""
    lib = load("window")
    assert lib is not None  # the engine refuses jobs without native code
    code, deg = WINDOW_KERNELS[name]
    n, p, m = key_order.shape[0], values.shape[1], query_order.shape[0]
    width = (deg + 1) * (p + 1)
    widest = _widest(keys, key_order, queries, query_order)
    pieces = max(1, min(parts, m))
    # every running piece keeps its front's suffix sums: FRONT_SHARE of the working memory
    budget = (get_config().working_memory * 2**20 * FRONT_SHARE / 8
              / max(1, min(pieces, parts)))
    stride = max(_MIN_STRIDE, -(-widest * width // int(max(budget, 1))))
    cap = widest // stride + 2
    halves = (1, 2) if name == "tricube" else (0,)
    span = _SPAN if name == "tricube" else 0.0
    bounds = np.linspace(0, m, pieces + 1).round().astype(np.int64)
    wide = int(key_order.dtype == np.int64)
    kp, ko, vp = pointer(keys), pointer(key_order), pointer(values)
    qp, qo = pointer(queries), pointer(query_order)

    def piece(rows: tuple[int, int]) -> int:
        slots = np.empty(cap * width)
        direct = 0
        for half in halves:
            q0, q1 = rows if half != 2 else (m - rows[1], m - rows[0])
            got = lib.nadaraya_window(n, m, p, code, half, int(single), kp, vp, ko, qp, qo,
                                      wide, q0, q1, stride, span, pointer(slots), cap,
                                      pointer(total), pointer(acc))
            if got < 0:
                raise NadarayaError(
                    f"the {name} window sums could not allocate their memory ({cap} slots of "
                    f"{width} numbers). Free memory or smooth fewer value columns at a time."
                )
            direct += got
        return direct

    ranges = [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]
    return sum(run(piece, ranges))


def to_means(total: np.ndarray, acc: np.ndarray) -> int:
    """Turn sums into log-sums and means in place; returns how many windows were empty.

    ``total`` becomes ``log total`` (``-inf`` where a window is empty) and ``acc`` the
    weighted means ``acc / total`` (0 where empty).
    """
    lib = load("window")
    assert lib is not None
    return int(lib.nadaraya_window_means(total.shape[0], acc.shape[1], pointer(total),
                                         pointer(acc)))
