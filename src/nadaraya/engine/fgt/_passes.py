"""Window sums over boxes, one axis at a time.

A sum over a cube of box offsets ``o in [-K, K]^d`` whose weight factors by
axis, ``F(C) = sum_o T_1(o_1) ... T_d(o_d) X(C - o)``, is ``d`` passes of a
one-axis window: pass ``j`` sums along axis ``j`` only. Each pass needs its
outputs only where later passes read them: backwards from the target boxes,
the boxes pass ``j`` must fill are those of pass ``j + 1`` moved by
``-K .. K`` along axis ``j + 1``, less those whose remaining coordinates no
source box has (:func:`window_sets`); running forwards, a box whose window
held no input is dropped (:func:`support`), so sparse data keep sparse sets.
The translation of the expansions (``T(o)`` a ``p x p`` matrix) and the
scalar masses of the error bound (``T(o)`` a number) both run through
:func:`run_chain`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import _native
from ._boxes import unique_rows

__all__ = ["MAX_CANDIDATES", "TooLarge", "run_chain", "support", "window_sets"]


class TooLarge(Exception):
    """The boxes a chain of passes would fill exceed :data:`MAX_CANDIDATES`."""


# Most candidate boxes one pass may consider (rows of d int64 each).
MAX_CANDIDATES = 20_000_000


def _suffix_keys(rows: np.ndarray, first: int, lo: np.ndarray, span: list[int]) -> np.ndarray:
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for i in range(first, rows.shape[1]):
        key = key * span[i] + (rows[:, i] - lo[i])
    return key


def window_sets(targets: torch.Tensor, reach: int,
                sources: torch.Tensor | None = None) -> list[torch.Tensor]:
    """The boxes each pass must fill, ``[O_0, ..., O_{d-1}]`` with ``O_{d-1} = targets``.

    With ``sources``, a box of ``O_j`` is kept only if some source box has its
    coordinates ``j + 1 .. d - 1`` (the ones no later pass moves): the others
    can receive nothing.

    Parameters
    ----------
    targets : torch.Tensor of shape (nt, d), int64
    reach : int
        ``K``: offsets ``-K .. K`` on every axis.
    sources : torch.Tensor of shape (ns, d), int64, optional

    Raises
    ------
    TooLarge
        When a pass would consider more than :data:`MAX_CANDIDATES` boxes.
    """
    d = targets.shape[1]
    sets = [targets.numpy()]
    shift = np.arange(-reach, reach + 1, dtype=np.int64)
    src = None if sources is None else sources.numpy()
    if src is not None and src.shape[0]:
        lo = np.minimum(src.min(axis=0), sets[0].min(axis=0) - reach)
        span = (np.maximum(src.max(axis=0), sets[0].max(axis=0) + reach) - lo + 1).tolist()
        if math.prod(span) >= 2**62:
            src = None
    for axis in range(d - 1, 0, -1):
        if sets[0].shape[0] * shift.size > MAX_CANDIDATES:
            raise TooLarge(f"{sets[0].shape[0] * shift.size} candidate boxes")
        moved = np.repeat(sets[0][:, None, :], shift.size, axis=1)
        moved[:, :, axis] += shift[None, :]
        moved = moved.reshape(-1, d)
        if src is not None:
            moved = moved[np.isin(_suffix_keys(moved, axis, lo, span),
                                  _suffix_keys(src, axis, lo, span))]
        sets.insert(0, unique_rows(moved).numpy())
    return [torch.from_numpy(np.ascontiguousarray(s)) for s in sets]


def support(sources: torch.Tensor, sets: list[torch.Tensor], reach: int) -> list[torch.Tensor]:
    """``sets`` less the intermediate boxes whose windows hold no source (the last set is kept)."""
    ones = torch.ones(2 * reach + 1, 1, 1, dtype=torch.float64)
    data = torch.ones(sources.shape[0], 1, dtype=torch.float64)
    coords = sources
    kept = []
    for axis, out in enumerate(sets):
        data, found = _native.translate(out, coords, data, ones, axis, 1)
        if axis < len(sets) - 1:
            keep = found.numpy()
            out = torch.from_numpy(np.ascontiguousarray(out.numpy()[keep]))
            data = torch.from_numpy(np.ascontiguousarray(data.numpy()[keep]))
        kept.append(out)
        coords = out
    return kept


def run_chain(sources: torch.Tensor, data: torch.Tensor, sets: list[torch.Tensor],
              matrices: torch.Tensor, inner: int) -> torch.Tensor:
    """All ``d`` passes from the source boxes to ``sets[-1]``.

    Parameters
    ----------
    sources : torch.Tensor of shape (ns, d), int64
    data : torch.Tensor of shape (ns, p^d * inner), float64
        Layout ``(a_1, ..., a_d, inner)``.
    sets : list of torch.Tensor
        The boxes of each pass (:func:`support` of :func:`window_sets`).
    matrices : torch.Tensor of shape (2K + 1, p, p)
        The weight of offset ``o`` (the same on every axis).
    inner : int
        Trailing values per multi-index (weight channels).

    Returns
    -------
    torch.Tensor of shape (len(sets[-1]), inner * p^d)
        Layout ``(inner, b_1, ..., b_d)``.
    """
    order = matrices.shape[1]
    d = sources.shape[1]
    coords = sources
    for axis, out in enumerate(sets):
        q = order ** (d - 1) * inner
        data, _ = _native.translate(out, coords, data, matrices, axis, q)
        coords = out
    return data
