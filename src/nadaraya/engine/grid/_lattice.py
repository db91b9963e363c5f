"""Lattice helpers of the grid engine: windows of offsets, monomials, views and padding.

Queries and keys of the grid engine sit on one regular lattice. This module
holds what it needs about the lattice itself, independent of any kernel:

* :func:`window_offsets`, the integer offsets ``o`` of a window, shape
  ``(n_offsets, ndim)``;
* :func:`monomials` and :func:`power`, the exponents ``a`` of the
  displacement moments ``D^a`` and their value ``o^a`` at an offset;
* :func:`window`, the view of a block of grid points of an array;
* ``pad``, padding of the trailing (grid) axes by ``"reflect"``,
  ``"symmetric"``, ``"edge"`` or ``"wrap"``, and ``_separable``, the
  factorization of patch weights ``g = g_0 (x) g_1 (x) ...``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from ..._errors import NadarayaError

__all__ = ["monomials", "pad", "power", "window", "window_offsets"]


def window_offsets(radius: int | Sequence[int], ndim: int = 2, shape: str = "square",
                   *, device: torch.device | str | None = None) -> torch.Tensor:
    """The offsets of a window: ``|o_k| <= radius_k`` (square) or ``||o|| <= radius`` (disk).

    Parameters
    ----------
    radius : int or sequence of int
        Half-width in pixels, one for all axes or one per axis.
    ndim : int, default 2
        Number of grid dimensions.
    shape : {"square", "disk"}
        ``"disk"`` keeps the offsets with Euclidean length ``<= radius``
        (OpenCV's bilateral window).

    Returns
    -------
    torch.Tensor of shape (n_offsets, ndim), int64
    """
    radii = [radius] * ndim if isinstance(radius, int) else list(radius)
    if len(radii) != ndim or any(not isinstance(r, int) or r < 0 for r in radii):
        raise NadarayaError(
            f"radius must be an integer >= 0 or one per axis ({ndim}); got {radius!r}."
        )
    axes = [torch.arange(-r, r + 1) for r in radii]
    grid = torch.cartesian_prod(*axes).reshape(-1, ndim)
    if shape == "disk":
        r = max(radii) if radii else 0
        grid = grid[(grid.double().square().sum(1) <= r * r + 1e-9)]
    elif shape != "square":
        raise NadarayaError(f"shape must be 'square' or 'disk'; got {shape!r}.")
    return grid.to(device=device)


def monomials(ndim: int, degree: int) -> list[tuple[int, ...]]:
    """Exponents ``a`` of the monomials ``D^a`` with ``|a| <= degree``, by total degree.

    ``[(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)]`` for ``ndim=2, degree=2``.
    """
    out: list[tuple[int, ...]] = []
    for total in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(ndim), total):
            a = [0] * ndim
            for k in combo:
                a[k] += 1
            out.append(tuple(a))
    return out


def power(o: Sequence[int], a: Sequence[int]) -> float:
    """``o^a = prod_k o_k^(a_k)`` of an offset ``o`` and exponents ``a``, as a float."""
    out = 1.0
    for v, e in zip(o, a, strict=True):
        out *= float(v) ** e
    return out


def window(x: torch.Tensor, start: Sequence[int], size: Sequence[int]) -> torch.Tensor:
    """``x[..., start_k : start_k + size_k, ...]`` on the trailing ``len(start)`` axes."""
    if len(start) == 2:
        a, b = start
        return x[..., a:a + size[0], b:b + size[1]]
    lead = x.ndim - len(start)
    index = (slice(None),) * lead + tuple(slice(a, a + n) for a, n in zip(start, size, strict=True))
    return x[index]


def _pad_index(n: int, before: int, after: int, mode: str, device: torch.device) -> torch.Tensor:
    i = torch.arange(-before, n + after, device=device)
    if mode == "reflect":
        if n == 1:
            return torch.zeros_like(i)
        period = 2 * n - 2
        i = i.remainder(period)
        return torch.where(i >= n, period - i, i)
    if mode == "symmetric":
        i = i.remainder(2 * n)
        return torch.where(i >= n, 2 * n - 1 - i, i)
    if mode == "edge":
        return i.clamp(0, n - 1)
    return i.remainder(n)  # wrap


def pad(x: torch.Tensor, pads: Sequence[int], mode: str) -> torch.Tensor:
    """Pad the trailing ``len(pads)`` axes of ``x`` by ``pads[k]`` on both sides.

    The interior is one copy; each axis's margins are then read from the
    padded array itself (``out[i, j] = x[index_0(i), index_1(j)]``: margins
    of earlier axes are complete when a later axis copies them).
    """
    lead = x.ndim - len(pads)
    if not any(pads):
        return x
    shape = list(x.shape)
    for k, p in enumerate(pads):
        shape[lead + k] += 2 * p
    out = x.new_empty(shape)
    out[(slice(None),) * lead + tuple(slice(p, p + x.shape[lead + k])
                                      for k, p in enumerate(pads))] = x
    for k, p in enumerate(pads):
        if not p:
            continue
        axis, n = lead + k, x.shape[lead + k]
        index = _pad_index(n, p, p, mode, x.device) + p
        for start in (0, p + n):
            source = out.index_select(axis, index[start:start + p])
            out.narrow(axis, start, p).copy_(source)
    return out


def _separable(g: torch.Tensor) -> list[torch.Tensor] | None:
    """Factors ``g_k`` with ``g = g_0 (x) g_1 (x) ...``, or None."""
    if g.ndim == 1:
        return [g]
    factors = []
    for k in range(g.ndim):
        index = tuple(slice(None) if j == k else g.shape[j] // 2 for j in range(g.ndim))
        factors.append(g[index].clone())
    centre = g[tuple(s // 2 for s in g.shape)]
    if float(centre) <= 0:
        return None
    outer = factors[0]
    for f in factors[1:]:
        outer = outer[..., None] * f
    outer = outer / centre ** (g.ndim - 1)
    if not torch.allclose(outer, g, rtol=1e-12, atol=1e-300):
        return None
    factors[0] = factors[0] / centre ** (g.ndim - 1)
    return factors
