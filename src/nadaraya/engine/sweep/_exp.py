"""Kernels ``poly(t) exp(-t)`` in one dimension by Hofmeyr's recursions over sorted keys.

For ``K(t) = exp(-t) sum_a c_a t^a``, ``t = s |x - k|`` (Laplacian: ``c = [1]``,
``s = 1``; Matern 3/2: ``[1, 1]``, ``s = sqrt 3``; Matern 5/2: ``[1, 1, 1/3]``,
``s = sqrt 5``), the sum over the keys left of a query ``x`` is
``sum_a c_a M_a(x)`` with the moments ``M_a(x) = sum_{k <= x} t^a e^{-t} v_k``,
and from one key ``k'`` to the next point ``x`` at distance ``g``

    M_a(x) = e^{-g} sum_b C(a, b) g^(a-b) M_b(k')

(Hofmeyr, "Fast exact evaluation of univariate kernel sums", 2019); the keys
right of ``x`` likewise, sweeping the other way. The sweeps are O(n + m) after
sorting (``expsweep.c``: three passes over blocks of keys, two of them run
side by side in threads). Keys and queries are read through their sorted
orders (the queries' a group at a time), and each query's result is written
to its own row; the memory beyond the inputs is the two outputs, the orders
and the blocks' carries.

Stability. Every factor is positive (``e^{-g}``, ``g^(a-b)``, the binomials),
so no step cancels: rounding errors stay relative to ``sum_k K |v_k|``, as in
the dense sum itself. The recursion is written from each key's own position
(a state at a key holds that key with weight 1), not from a global origin, so
nothing overflows (``e^{+k}``) or underflows: a query at distance ``d`` from
its nearest key gets the log-offset ``-d + deg log max(1, d)`` and only ratios
to that key's weight are exponentiated. A query ``1e4`` bandwidths from every
key gets its nearest keys' weighted mean, as the dense engine does.

Error bound (derived here; the tests check it). Let ``u = 2^-53``. A key's
weight reaches a query through at most ``L = B + nb + 1`` steps (the keys of
its block, ``B`` per block; the ``nb`` blocks' carries; one final move), each
with at most ``deg + 5`` roundings of positive numbers (the sweeps' own
vectorized ``exp``, within 2 ulp; the product; the binomial terms; the sum),
and the distances it moves are rounded once per step, ``3 u`` of the distance
in all. So every weight, and the sums ``total`` and ``acc_c`` (relative to
``sum_k K_k |v_kc|``), are within

    eps = ((deg + 5) (L + 2) + 3 d) u

of exact, ``d = s |x - k|`` for the farthest key that matters (the nearest
key's distance plus 40: farther weights are below ``e^-40`` of it), and the
weighted mean within ``2 eps max |v|``. With ``B = max(64, ceil(sqrt n))``,
``L <= 2 sqrt(n) + 66``: at ``n = 10^6`` about ``10 000 u = 2e-12`` (deg 0),
a worst case; the roundings' signs vary, and the errors measured are 10^-4
to 10^-6 of the bound (``benchmarks/bench_sweep.py`` prints them).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from ..._errors import NadarayaError
from . import _order
from ._native import load, pointer
from ._order import Groups, rows_between, search

__all__ = ["ExpKernel", "ExpSweep", "block_size", "chain_length"]

# The fewest keys per block (see block_size).
MIN_BLOCK = 64
# Queries of a block are swept at most this many at a time (each thread's scratch holds one
# chunk); a block's right-to-left sweep starts again for each chunk.
QUERY_CHUNK = 4096


class ExpKernel:
    """``K(t) = exp(-t) sum_a coef[a] t^a`` with ``t = scale |x - k|``."""

    def __init__(self, coef: tuple[float, ...], scale: float) -> None:
        self.coef, self.scale = coef, scale

    @property
    def degree(self) -> int:
        return len(self.coef) - 1


def block_size(n: int) -> int:
    """Keys per block: ``max(MIN_BLOCK, ceil(sqrt n))`` balances the two chains of the error
    bound."""
    return max(MIN_BLOCK, math.isqrt(max(n - 1, 0)) + 1)


def chain_length(n: int) -> int:
    """``L``: the most steps one weight takes from its key to a query (see the bound above).

    The blocks number at most ``ceil(n / B)`` plus one per group of keys (each group's
    last block may be short).
    """
    b = block_size(n)
    return b + -(-n // b) + -(-n // max(1, _order.GROUP)) + 1


def _pieces(work: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split blocks of the given work into at most ``parts`` contiguous ranges of similar work."""
    nb = work.shape[0]
    if parts <= 1 or nb <= 1:
        return [(0, nb)]
    ends = np.cumsum(work)
    cuts = np.searchsorted(ends, ends[-1] * np.arange(1, parts) / parts, side="left") + 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, nb), [nb]]))
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


class ExpSweep:
    """The keys' side of the sweeps, once: blocks of sorted keys and their carries.

    The keys go a group at a time (:class:`~._order.Groups`): each group's sorted
    keys in blocks of :func:`block_size` (its last block may be shorter), the
    blocks of all groups chained along the line. :meth:`evaluate` then sums the
    queries, those of one group of keys at a time, writing each query's log-sum
    of weights and weighted means to its own row.

    Parameters
    ----------
    kernel : ExpKernel
    keys : numpy.ndarray of shape (n,)
        Key positions (prepared: unit bandwidth), float64, in any order.
    key_groups : Groups
        The keys in groups by position.
    values : numpy.ndarray of shape (n, p)
        The keys' values in the keys' order, float64, contiguous.
    run : callable
        ``run(fn, blocks)`` gives ``[fn(b) for b in blocks]``, in threads or in turn
        (:func:`~nadaraya.engine._threads.map_blocks`).
    parts : int
        How many pieces to split the blocks into (threads).
    """

    def __init__(self, kernel: ExpKernel, keys: np.ndarray, key_groups: Groups,
                 values: np.ndarray, run: Callable[..., list], parts: int) -> None:
        lib = load("expsweep")
        assert lib is not None  # the engine refuses jobs without native code
        self.lib, self.kernel, self.run, self.parts = lib, kernel, run, parts
        self.keys, self.key_groups, self.values = keys, key_groups, values
        n, p, deg = keys.shape[0], values.shape[1], kernel.degree
        self.size = size = block_size(n)
        self.width = width = (deg + 1) * (p + 1)
        self.wide = int(key_groups.wide)
        # per group: its index, its first block among all and its blocks; each block's
        # first and last key; the blocks' own states (left to right, right to left)
        self.spans: list[tuple[int, int, int]] = []
        firsts, lasts, lfs, rfs = [], [], [], []
        self.kept: np.ndarray | None = None
        blocks = 0
        for g in range(len(key_groups)):
            order = key_groups.order(g)
            count = order.shape[0]
            if count == 0:
                continue
            nb = -(-count // size)
            lf, rf = np.empty((nb, width)), np.empty((nb, width))

            def finals(piece: tuple[int, int], order: np.ndarray = order, count: int = count,
                       lf: np.ndarray = lf, rf: np.ndarray = rf) -> int:
                return lib.nadaraya_exp_finals(count, p, deg, kernel.scale, pointer(keys),
                                               pointer(values), pointer(order), self.wide,
                                               size, piece[0], piece[1], pointer(lf),
                                               pointer(rf))

            work = np.minimum(size, count - size * np.arange(nb))
            if any(code != 0 for code in run(finals, _pieces(work, parts))):
                self._no_memory(0)
            firsts.append(keys[order[::size]])
            lasts.append(keys[order[np.minimum(np.arange(1, nb + 1) * size, count) - 1]])
            lfs.append(lf)
            rfs.append(rf)
            self.spans.append((g, blocks, nb))
            blocks += nb
            if len(key_groups) == 1:
                self.kept = order  # one group: its order serves pass 3 as well
            del order
        self.first, self.last = np.concatenate(firsts), np.concatenate(lasts)
        lf, rf = np.concatenate(lfs), np.concatenate(rfs)
        del lfs, rfs
        self.cl, self.cr = np.empty((blocks, width)), np.empty((blocks, width))
        lib.nadaraya_exp_carries(p, deg, kernel.scale, pointer(self.first), pointer(self.last),
                                 blocks, pointer(lf), pointer(rf), pointer(self.cl),
                                 pointer(self.cr))

    def evaluate(self, queries: np.ndarray, lse: np.ndarray, mean: np.ndarray) -> None:
        """Sum every query, the queries of one group of keys at a time.

        Parameters
        ----------
        queries : numpy.ndarray of shape (m,)
            Query positions, float64, in any order.
        lse, mean : numpy.ndarray of shapes (m,), (m, p)
            Where ``log sum_k K`` and ``sum_k K v_k / sum_k K`` go, at each query's row
            (every query has weight: its nearest key's, at least, relative to its
            log-offset).
        """
        keys, values, kernel, size = self.keys, self.values, self.kernel, self.size
        p, nb_all = values.shape[1], self.first.shape[0]
        chunk = max(1, QUERY_CHUNK)
        wide = self.wide
        for i, (g, g0, nb) in enumerate(self.spans):
            # the keys of the group, and the queries whose last key <= x is among them
            order = self.kept if self.kept is not None else self.key_groups.order(g)
            count = order.shape[0]
            lo = -np.inf if i == 0 else float(self.first[g0])
            hi = None if i + 1 == len(self.spans) else float(self.first[g0 + nb])
            rows = rows_between(queries, lo, hi, bool(wide))
            qs = np.empty(nb + 1, dtype=np.int64)
            qs[0], qs[nb] = 0, rows.shape[0]
            qs[1:nb] = search(queries, rows, self.first[g0 + 1:g0 + nb], "left")
            have = np.diff(qs)
            work = np.where(have > 0, np.minimum(size, count - size * np.arange(nb)), 0) + have

            def evaluate(piece: tuple[int, int], order: np.ndarray = order,
                         rows: np.ndarray = rows, qs: np.ndarray = qs, g0: int = g0,
                         count: int = count) -> int:
                return self.lib.nadaraya_exp_eval(
                    count, p, kernel.degree, kernel.scale, pointer(self.coef), pointer(keys),
                    pointer(values), pointer(order), pointer(queries), pointer(rows), wide,
                    pointer(qs), size, g0, nb_all, piece[0], piece[1], chunk,
                    pointer(self.first), pointer(self.last), pointer(self.cl),
                    pointer(self.cr), pointer(lse), pointer(mean))

            if any(code != 0 for code in self.run(evaluate, _pieces(work, self.parts))):
                self._no_memory(chunk)
            del order, rows

    @property
    def coef(self) -> np.ndarray:
        return np.array(self.kernel.coef, dtype=np.float64)

    def _no_memory(self, chunk: int) -> None:
        p = self.values.shape[1]
        per_thread = 8 * (self.size * (p + 4) + chunk * (2 * p + 6) + 2 * self.width)
        raise NadarayaError(
            f"the sweep over {self.keys.shape[0]} keys could not allocate its scratch memory "
            f"(about {per_thread} bytes per thread). Free memory or smooth fewer value columns "
            "at a time."
        )
