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
side by side in threads).

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

__all__ = ["ExpKernel", "block_size", "chain_length", "exp_sums"]


class ExpKernel:
    """``K(t) = exp(-t) sum_a coef[a] t^a`` with ``t = scale |x - k|``."""

    def __init__(self, coef: tuple[float, ...], scale: float) -> None:
        self.coef, self.scale = coef, scale

    @property
    def degree(self) -> int:
        return len(self.coef) - 1


def block_size(n: int) -> int:
    """Keys per block: ``max(64, ceil(sqrt n))`` balances the two chains of the error bound."""
    return max(64, math.isqrt(max(n - 1, 0)) + 1)


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


def exp_sums(kernel: ExpKernel, keys: np.ndarray, values: np.ndarray, queries: np.ndarray,
             run: Callable[..., list], parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log-offsets, weight sums and weighted value sums of sorted queries.

    Parameters
    ----------
    kernel : ExpKernel
    keys : numpy.ndarray of shape (n,)
        Sorted key positions (prepared: unit bandwidth), float64.
    values : numpy.ndarray of shape (n, p)
        The keys' values in the same order, float64, contiguous.
    queries : numpy.ndarray of shape (m,)
        Sorted query positions, float64.
    run : callable
        ``run(fn, blocks)`` gives ``[fn(b) for b in blocks]``, in threads or in turn
        (:func:`~nadaraya.engine._threads.map_blocks`).
    parts : int
        How many pieces to split the blocks into (threads).

    Returns
    -------
    offset, total, acc : numpy.ndarray of shapes (m,), (m,), (m, p)
        ``sum_k K v_k = exp(offset) * acc`` and ``sum_k K = exp(offset) * total``.
    """
    lib = load("expsweep")
    assert lib is not None  # the engine refuses jobs without native code
    n, p, m = keys.shape[0], values.shape[1], queries.shape[0]
    deg, scale = kernel.degree, kernel.scale
    size = block_size(n)
    nb = -(-n // size)
    width = (deg + 1) * (p + 1)
    qs = np.empty(nb + 1, dtype=np.int64)
    qs[0], qs[nb] = 0, m
    qs[1:nb] = np.searchsorted(queries, keys[size::size][: nb - 1], side="left")
    gaps, before, after = np.empty(n), np.empty(n), np.empty(n)
    lf, rf = np.empty((nb, width)), np.empty((nb, width))
    cl, cr = np.empty((nb, width)), np.empty((nb, width))
    coef = np.array(kernel.coef, dtype=np.float64)
    offset, total, acc = np.empty(m), np.empty(m), np.empty((m, p))
    work = np.minimum(size, n - size * np.arange(nb)) + np.diff(qs)
    pieces = _pieces(work, parts)
    kp, vp, qp = pointer(keys), pointer(values), pointer(queries)

    def finals(piece: tuple[int, int]) -> None:
        lib.nadaraya_exp_finals(n, p, deg, scale, kp, vp, size, piece[0], piece[1],
                                pointer(gaps), pointer(before), pointer(after), pointer(lf),
                                pointer(rf))

    def evaluate(piece: tuple[int, int]) -> int:
        return lib.nadaraya_exp_eval(n, p, deg, scale, pointer(coef), kp, vp, qp, pointer(qs),
                                     size, nb, piece[0], piece[1], pointer(gaps),
                                     pointer(before), pointer(after), pointer(cl), pointer(cr),
                                     pointer(offset), pointer(total), pointer(acc))

    run(finals, pieces)
    lib.nadaraya_exp_carries(n, p, deg, scale, kp, size, nb, pointer(lf), pointer(rf),
                             pointer(cl), pointer(cr))
    if any(code != 0 for code in run(evaluate, pieces)):
        raise NadarayaError(
            f"the sweep over {n} keys could not allocate its scratch memory (about "
            f"{8 * (p + 3) * int(np.diff(qs).max())} bytes per thread). Free memory or smooth "
            "fewer value columns at a time."
        )
    return offset, total, acc
