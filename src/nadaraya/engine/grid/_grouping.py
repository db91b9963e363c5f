"""The grid engine's offset groups: offsets that differ only in their last coordinate.

A :class:`Group` holds one set of offsets ``(*prefix, lo..hi)`` and the
coefficients of their moments (``_groups`` builds them when the plan is
made); each query's offset in the bounded pass is the largest log-weight in
its window (``_window_max``). The tiles fold them in :mod:`._group`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .._job import exp_floor
from ._lattice import monomials, power

__all__ = ["Group"]


@dataclass
class Group:
    """Offsets that differ only in their last coordinate, ``o = (*prefix, lo + k)``.

    Their keys are one strided view of an array (a window sliding along the
    last axis), so the scores of all of them are one operation, and the
    moments one matrix product with the coefficients (zero columns for the
    ``k`` not in the window).
    """

    prefix: tuple[int, ...]
    lo: int
    width: int                    # K = hi - lo + 1
    last: torch.Tensor            # (K,) the last coordinates lo..hi (values' dtype)
    value_coef: torch.Tensor      # (n_mono, K) scale_k o_k^a (accumulators' dtype)
    weight_coef: torch.Tensor     # (n_mono2 + 1, K) scale_k o_k^a, then scale_k


def _groups(offsets: list[tuple[int, ...]], d: int, degree: int,
            qx: list[list[float]] | None, dtype: torch.dtype, device: torch.device,
            acc_dtype: torch.dtype) -> list[Group]:
    """The offsets grouped by all but their last coordinate, with the moments' coefficients.

    Without a per-key field the position block is a constant per offset, a
    factor ``exp(-o^T Q_x o)`` of its coefficients (0 below the exponent floor).
    """
    mono = monomials(d, degree)
    mono2 = [a for a in monomials(d, 2 * degree) if any(a)]
    floor = exp_floor(dtype)
    by: dict[tuple[int, ...], list[int]] = {}
    for o in offsets:
        by.setdefault(o[:-1], []).append(o[-1])
    out = []
    for prefix, lasts in sorted(by.items()):
        lo, hi = min(lasts), max(lasts)
        width = hi - lo + 1
        value = torch.zeros(len(mono), width, dtype=torch.float64)
        weight = torch.zeros(len(mono2) + 1, width, dtype=torch.float64)
        for last in set(lasts):
            o = (*prefix, last)
            log_scale = 0.0 if qx is None else -sum(
                o[i] * o[j] * qx[i][j] for i in range(d) for j in range(d))
            if log_scale < floor:
                continue
            scale = math.exp(log_scale)
            k = last - lo
            value[:, k] = torch.tensor([scale * power(o, a) for a in mono], dtype=torch.float64)
            weight[:, k] = torch.tensor([scale * power(o, a) for a in mono2] + [scale],
                                        dtype=torch.float64)
        out.append(Group(prefix, lo, width,
                         torch.arange(lo, hi + 1, dtype=dtype, device=device),
                         value.to(dtype=acc_dtype, device=device),
                         weight.to(dtype=acc_dtype, device=device)))
    return out


def _window_max(x: torch.Tensor, pads: Sequence[int], offsets: list[tuple[int, ...]],
                shape: Sequence[int]) -> torch.Tensor:
    """``max_o x[q + o]`` over the bounding box of the offsets, for every query ``q``
    (``x`` padded by ``pads``); separable, one running maximum per axis."""
    for k, n in enumerate(shape):
        lo = min(o[k] for o in offsets)
        hi = max(o[k] for o in offsets)
        out = x.narrow(k, pads[k] + lo, n).clone()
        for u in range(lo + 1, hi + 1):
            torch.maximum(out, x.narrow(k, pads[k] + u, n), out=out)
        x = out
    return x
