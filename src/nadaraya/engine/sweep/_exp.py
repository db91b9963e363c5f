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
from ._native import load, pointer
from ._order import search

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
    """``L``: the most steps one weight takes from its key to a query (see the bound above)."""
    b = block_size(n)
    return b + -(-n // b) + 1


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

    :meth:`evaluate` then sums any queries, a group at a time, writing each
    query's log-sum of weights and weighted means to its own row.

    Parameters
    ----------
    kernel : ExpKernel
    keys : numpy.ndarray of shape (n,)
        Key positions (prepared: unit bandwidth), float64, in any order.
    key_order : numpy.ndarray of shape (n,), int32 or int64, or None
        Their sorted order (:func:`~._order.sort_order`; None: sorted).
    values : numpy.ndarray of shape (n, p)
        The keys' values in the keys' order, float64, contiguous.
    run : callable
        ``run(fn, blocks)`` gives ``[fn(b) for b in blocks]``, in threads or in turn
        (:func:`~nadaraya.engine._threads.map_blocks`).
    parts : int
        How many pieces to split the blocks into (threads).
    """

    def __init__(self, kernel: ExpKernel, keys: np.ndarray, key_order: np.ndarray | None,
                 values: np.ndarray, run: Callable[..., list], parts: int) -> None:
        lib = load("expsweep")
        assert lib is not None  # the engine refuses jobs without native code
        self.lib, self.kernel, self.run, self.parts = lib, kernel, run, parts
        self.keys, self.key_order, self.values = keys, key_order, values
        n, p = keys.shape[0], values.shape[1]
        self.size = size = block_size(n)
        self.nb = nb = -(-n // size)
        width = (kernel.degree + 1) * (p + 1)
        self.coef = np.array(kernel.coef, dtype=np.float64)
        # the first key of blocks 1 .. nb - 1
        starts = np.arange(size, n, size)[: nb - 1]
        self.starts = keys[starts if key_order is None else key_order[starts]]
        lf, rf = np.empty((nb, width)), np.empty((nb, width))
        self.cl, self.cr = np.empty((nb, width)), np.empty((nb, width))
        wide = int(key_order is not None and key_order.dtype == np.int64)

        def finals(piece: tuple[int, int]) -> int:
            return lib.nadaraya_exp_finals(n, p, kernel.degree, kernel.scale, pointer(keys),
                                           pointer(values), pointer(key_order), wide, size,
                                           piece[0], piece[1], pointer(lf), pointer(rf))

        work = np.minimum(size, n - size * np.arange(nb))
        if any(code != 0 for code in run(finals, _pieces(work, parts))):
            self._no_memory(0)
        lib.nadaraya_exp_carries(n, p, kernel.degree, kernel.scale, pointer(keys),
                                 pointer(key_order), wide, size, nb, pointer(lf), pointer(rf),
                                 pointer(self.cl), pointer(self.cr))

    def evaluate(self, queries: np.ndarray, order: np.ndarray | None, lse: np.ndarray,
                 mean: np.ndarray) -> None:
        """Sum the queries ``queries[order]`` (every query when None: sorted queries).

        Parameters
        ----------
        queries : numpy.ndarray of shape (m,)
            Query positions, float64, in any order.
        order : numpy.ndarray of shape (m_g,), or None
            The rows to sum, in ascending order of position, with entries of the keys'
            order's width where both exist.
        lse, mean : numpy.ndarray of shapes (m,), (m, p)
            Where ``log sum_k K`` and ``sum_k K v_k / sum_k K`` go, at each summed
            query's row (every query has weight: its nearest key's, at least,
            relative to its log-offset).
        """
        keys, key_order, values, kernel = self.keys, self.key_order, self.values, self.kernel
        n, p, nb, size = keys.shape[0], values.shape[1], self.nb, self.size
        count = queries.shape[0] if order is None else order.shape[0]
        chunk = max(1, QUERY_CHUNK)
        wide = int(any(o is not None and o.dtype == np.int64 for o in (key_order, order)))
        qs = np.empty(nb + 1, dtype=np.int64)
        qs[0], qs[nb] = 0, count
        qs[1:nb] = search(queries, order, self.starts, "left")
        have = np.diff(qs)
        work = np.where(have > 0, np.minimum(size, n - size * np.arange(nb)), 0) + have

        def evaluate(piece: tuple[int, int]) -> int:
            return self.lib.nadaraya_exp_eval(
                n, p, kernel.degree, kernel.scale, pointer(self.coef), pointer(keys),
                pointer(values), pointer(key_order), pointer(queries), pointer(order), wide,
                pointer(qs), size, nb, piece[0], piece[1], chunk, pointer(self.cl),
                pointer(self.cr), pointer(lse), pointer(mean))

        if any(code != 0 for code in self.run(evaluate, _pieces(work, self.parts))):
            self._no_memory(chunk)

    def _no_memory(self, chunk: int) -> None:
        p, width = self.values.shape[1], self.cl.shape[1]
        per_thread = 8 * (self.size * (p + 4) + chunk * (2 * p + 6) + 2 * width)
        raise NadarayaError(
            f"the sweep over {self.keys.shape[0]} keys could not allocate its scratch memory "
            f"(about {per_thread} bytes per thread). Free memory or smooth fewer value columns "
            "at a time."
        )
