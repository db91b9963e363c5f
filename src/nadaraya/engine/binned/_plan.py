"""The grid: its spacing from the tolerance, its extent, truncation and FFT sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.fft

from ._envelope import bulk_ratio
from ._profiles import Profile

__all__ = ["Grid", "make_grid"]

_U = 2.0**-53
# Each sum's bulk bound aims at this share of the tolerance (relative to the
# total, or to max|v| times it): the output bound
# (acc_err + |out| total_err) / (total - total_err) is then at most about half of it.
_SHARE = 1.0 / 4.0
# The truncation aims its tail at this share of the tolerance (relative to a
# bulk total), so that it never matters beside the interpolation terms.
_TAIL_SHARE = 2.0**-10
# Queries up to this many bandwidths beyond the keys' box stay on the grid
# (kernels with heavy tails); farther ones are left to the exact engines.
_MARGIN = 8.0
# Largest cell, in bandwidths.
_MAX_DELTA = 0.5


@dataclass(frozen=True)
class Grid:
    """A regular grid over the keys in kernel coordinates (unit bandwidth).

    Attributes
    ----------
    delta : float
        Cell size (the same on every axis).
    origin : np.ndarray of shape (d,)
        The first node: the keys' smallest coordinate on each axis.
    nodes : tuple of int
        Key-grid nodes per axis, ``G_i``: keys lie in ``[origin, origin + (G_i - 1) delta]``.
    reach : tuple of int
        Kernel half-width per axis in cells, ``L_i``: the kernel is sampled on
        ``[-L_i, L_i]``.
    margin : tuple of int
        Cells per axis beyond the keys' nodes where the sums are known,
        ``P_i <= L_i``: on ``G_i + 2 P_i`` nodes.
    fft : tuple of int
        FFT length per axis, ``N_i >= G_i + L_i + P_i`` (no wrap-around reaches
        the nodes read).
    pos_err : float
        Bound on the rounding of any point's position on the grid (per coordinate).
    ratio : float
        Predicted bound of each sum relative to ``total`` for a query amid keys of
        uniform density.
    """

    delta: float
    origin: np.ndarray
    nodes: tuple[int, ...]
    reach: tuple[int, ...]
    margin: tuple[int, ...]
    fft: tuple[int, ...]
    pos_err: float
    ratio: float

    @property
    def d(self) -> int:
        return len(self.nodes)

    @property
    def extended(self) -> tuple[int, ...]:
        """Nodes per axis on which the sums are known, ``G_i + 2 P_i``."""
        return tuple(g + 2 * r for g, r in zip(self.nodes, self.margin, strict=True))

    @property
    def radius(self) -> float:
        """Truncation radius: every offset beyond it on some axis is left out."""
        return min(self.reach) * self.delta

    @property
    def size(self) -> int:
        """Nodes of one FFT."""
        return math.prod(self.fft)

    def memory(self, p: int) -> int:
        """Bytes of the grid arrays for ``p`` value columns."""
        return 8 * ((p + 1) * math.prod(self.nodes) + (2 * p + 7) * self.size
                    + (p + 2) * math.prod(self.extended))


def _fast_length(n: int) -> int:
    """The FFT length for ``n`` nodes: 2, 3 and 5-smooth (a grid this large is refused)."""
    return scipy.fft.next_fast_len(n, real=True) if n < 2**40 else n


def make_grid(profile: Profile, low: np.ndarray, high: np.ndarray, tolerance: float) -> Grid:
    """The grid at ``tolerance`` for keys spanning ``low .. high`` (each ``(d,)``, kernel units).

    The cell size is the largest whose bulk ratio (:func:`._envelope.bulk_ratio`)
    is at most ``tolerance / 4``; the kernel is truncated where it falls below
    ``tolerance / 1024`` of a bulk total's share of one key, capped at the keys'
    extent plus ``8`` bandwidths.
    """
    d = low.shape[0]
    spans = high - low
    volume = float(np.prod(spans + 2.0))
    # mass of the kernel within radius 1/2 (a lower bound of its integral)
    mass = float(profile.value(np.float64(0.25))) * (1.0 if d == 1 else math.pi / 4.0)
    theta = max(tolerance * _TAIL_SHARE * mass / volume, 1e-300)
    tail = profile.tail_radius(min(theta, 0.5))
    target = tolerance * _SHARE
    # (a span beyond 1e9 bandwidths needs a grid refused whatever its cell)
    extent = min(float(spans.max()), 1e9) + 2.0 * min(tail, 1e9)

    def ratio_at(delta: float) -> float:
        return max(bulk_ratio(profile, delta, d, 4.0 * _U * (extent + 4.0 * delta)), 1e-300)

    delta = min(math.sqrt(target), _MAX_DELTA)
    ratio = ratio_at(delta)
    for _ in range(8):
        delta = min(delta * min(2.0, math.sqrt(target / ratio)) * 0.98, _MAX_DELTA)
        ratio = ratio_at(delta)
        if ratio <= target and (ratio > 0.9 * target or delta == _MAX_DELTA):
            break
    for _ in range(100):
        if ratio <= target:
            break
        delta *= 0.9
        ratio = ratio_at(delta)
    nodes = tuple(max(math.ceil(s / delta), 1) + 1 for s in spans)
    if math.isfinite(profile.support):
        # past the support plus the envelope's two cells, nothing is left out
        tail = profile.support + math.sqrt(d) * 2.0 * delta * (1.0 + 1e-9)
    reach = tuple(min(math.ceil(tail / delta) + 1, g - 1 + math.ceil(_MARGIN / delta))
                  for g in nodes)
    out = profile.outreach / delta
    margin = tuple(r if r <= out else math.ceil(out) for r in reach)
    fft = tuple(_fast_length(g + r + e) for g, r, e in zip(nodes, reach, margin, strict=True))
    pos_err = 4.0 * _U * delta * (max(g + 2 * e for g, e in zip(nodes, margin, strict=True)) + 2)
    return Grid(delta, low.astype(np.float64), nodes, reach, margin, fft, pos_err, ratio)
