"""The three steps on the grid: linear binning, FFT convolution, linear interpolation."""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import numpy as np
import scipy.fft

from .. import native
from ._envelope import box_radii, envelope
from ._plan import Grid
from ._profiles import Profile

__all__ = ["bin_keys", "convolve", "interpolate", "kernel_quadrants", "norms"]

_SOURCE = Path(__file__).parent / "binning.c"


def _corners(i: np.ndarray, f: np.ndarray,
             shape: tuple[int, ...]) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """Flat index of each point's first corner, and ``(offset, weight)`` per corner."""
    if len(shape) == 1:
        return i[:, 0], [(0, 1.0 - f[:, 0]), (1, f[:, 0])]
    f0, f1 = f[:, 0], f[:, 1]
    g0, g1 = 1.0 - f0, 1.0 - f1
    flat = i[:, 0] * shape[1] + i[:, 1]
    return flat, [(0, g0 * g1), (1, g0 * f1), (shape[1], f0 * g1), (shape[1] + 1, f0 * f1)]


def bin_keys(grid: Grid, keys: np.ndarray, values: np.ndarray,
             rows: int | None = None, *, compiled: bool = True) -> tuple[np.ndarray, int]:
    """Linear binning of the weights 1 and of each value column.

    Parameters
    ----------
    keys : np.ndarray of shape (n, d)
    values : np.ndarray of shape (n, p)
    rows : int, optional
        Keys binned at a time (default: all); each block's products are summed
        per node and added to the masses, so memory is ``O(rows)`` beyond them.
    compiled : bool, default True
        In one dimension, bin with the compiled loop (``binning.c``) where it
        is available: one pass per column, ``O(grid)`` memory, the sums of
        the NumPy path in one block (``rows`` is then not used).

    Returns
    -------
    masses : np.ndarray of shape (p + 1, *grid.nodes)
        ``masses[0]`` the binned weights 1, ``masses[1 + c]`` column ``c``.
    crowd : int
        At least the most keys in one cell: each node's mass is ``2^d`` sums
        (one per corner role) of at most ``crowd`` products each, added up (in
        blocks or not, a sum of ``k`` nonzero products takes at most ``k - 1``
        roundings: adding a block's zero is exact).
    """
    size = math.prod(grid.nodes)
    n = keys.shape[0]
    lib = _library() if compiled and grid.d == 1 and size >= 2 else None
    if lib is not None:  # one pass per column in C, the same sums as below
        masses = np.empty((values.shape[1] + 1, size))
        x = np.ascontiguousarray(keys[:, 0], dtype=np.float64)
        v = np.ascontiguousarray(values, dtype=np.float64)
        scratch = np.empty(size)
        lib.nadaraya_linbin1(n, v.shape[1], x.ctypes.data, v.ctypes.data,
                             float(grid.origin[0]), float(grid.delta), size,
                             masses.ctypes.data, scratch.ctypes.data)
        del scratch
        return masses.reshape(-1, *grid.nodes), _crowd(masses[0], grid)
    masses = np.zeros((values.shape[1] + 1, size))
    step = max(1, n if rows is None else rows)
    for start in range(0, n, step):
        t = keys[start:start + step] - grid.origin
        t /= grid.delta
        i, f = _split(t, grid.nodes)
        del t
        flat, corners = _corners(i, f, grid.nodes)
        del i, f
        product = np.empty(flat.shape[0])
        part = values[start:start + step]
        for c in range(values.shape[1] + 1):
            for offset, weight in corners:
                w = weight if c == 0 else np.multiply(weight, part[:, c - 1], out=product)
                masses[c, offset:] += np.bincount(flat, w, minlength=size)[: size - offset]
    return masses.reshape(-1, *grid.nodes), _crowd(masses[0], grid)


def _crowd(ones: np.ndarray, grid: Grid) -> int:
    """At least the most keys in one cell, from the binned weights 1 ``(size,)``."""
    # a cell's keys put all their weight on its corners
    cell = ones.reshape(grid.nodes)
    for axis in range(grid.d):
        cell = np.delete(cell, -1, axis) + np.delete(cell, 0, axis)
    return math.ceil(float(cell.max()) * (1.0 + 1e-9)) + 1 if cell.size else 1


def _library() -> ctypes.CDLL | None:
    """The compiled binning loop (``binning.c``), or None without native code."""
    lib = native.library(_SOURCE)
    if lib is not None and lib.nadaraya_linbin1.argtypes is None:
        p, i, d = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
        lib.nadaraya_linbin1.argtypes = [i, i, p, p, d, d, i, p, p]
        lib.nadaraya_linbin1.restype = None
    return lib


def kernel_quadrants(profile: Profile, grid: Grid,
                     mass_rel: float) -> tuple[np.ndarray, np.ndarray]:
    """Kernel samples ``K(s delta)`` and envelope ``E(s)`` for ``0 <= s_i <= L_i``.

    Both are even in every coordinate; :func:`convolve` mirrors them.
    """
    d, delta = grid.d, grid.delta
    s = [np.arange(r + 1, dtype=np.float64).reshape([-1 if a == b else 1 for b in range(d)])
         for a, r in enumerate(grid.reach)]
    r2 = sum(x * x for x in s) * (delta * delta)
    lo, hi = box_radii([x * delta for x in s], 2.0 * delta + 2.0 * grid.pos_err)
    e = envelope(profile, lo, hi, r2, delta, d, grid.pos_err, mass_rel)
    return profile.value(r2), e


def _wrap(quadrant: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The even array of ``quadrant`` laid out for a circular convolution of ``shape``."""
    out = quadrant
    for axis, n in enumerate(shape):
        r = out.shape[axis] - 1
        full_shape = list(out.shape)
        full_shape[axis] = n
        full = np.zeros(full_shape)
        head = [slice(None)] * len(shape)
        head[axis] = slice(0, r + 1)
        full[tuple(head)] = out
        if r:
            tail = [slice(None)] * len(shape)
            tail[axis] = slice(n - r, n)
            mirrored = np.flip(np.take(out, np.arange(1, r + 1), axis=axis), axis=axis)
            full[tuple(tail)] = mirrored
        out = full
    return out


def norms(quadrant: np.ndarray) -> tuple[float, float]:
    """``||k||_1`` and ``||k||_2`` of the even array whose quadrant is given."""
    mult = np.ones_like(quadrant)
    for axis in range(quadrant.ndim):
        index = [slice(None)] * quadrant.ndim
        index[axis] = slice(1, None)
        mult[tuple(index)] *= 2.0
    a = np.abs(quadrant)
    return float((mult * a).sum()), float(np.sqrt((mult * a * a).sum()))


def convolve(grid: Grid, masses: np.ndarray, kernel: np.ndarray, env: np.ndarray,
             workers: int) -> np.ndarray:
    """Sums at the nodes: masses with the kernel, and the weight masses with the envelope.

    Parameters
    ----------
    masses : np.ndarray of shape (p + 1, *grid.nodes)
    kernel, env : np.ndarray of shape (L_i + 1, ...)
        Quadrants from :func:`kernel_quadrants`.

    Returns
    -------
    nodes : np.ndarray of shape (p + 2, *grid.extended)
        ``p + 1`` convolved sums, then the envelope sum, on the nodes
        ``-P_i .. G_i - 1 + P_i`` of each axis.
    """
    axes = tuple(range(1, grid.d + 1))
    kspec = scipy.fft.rfftn(_wrap(kernel, grid.fft), workers=workers)
    espec = scipy.fft.rfftn(_wrap(env, grid.fft), workers=workers)
    spectra = scipy.fft.rfftn(masses, s=grid.fft, axes=axes, workers=workers)
    out = np.empty((masses.shape[0] + 1, *grid.fft))
    for c in range(masses.shape[0] + 1):
        product = spectra[0] * espec if c == masses.shape[0] else spectra[c] * kspec
        out[c] = scipy.fft.irfftn(product, s=grid.fft, workers=workers, overwrite_x=True)
    del spectra, kspec, espec
    for axis, (g, e, n) in enumerate(zip(grid.nodes, grid.margin, grid.fft, strict=True)):
        out = np.take(out, np.arange(-e, g + e) % n, axis=axis + 1)
    return out


def interpolate(grid: Grid, nodes: np.ndarray,
                queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear interpolation of the node sums at the queries on the grid.

    Parameters
    ----------
    nodes : np.ndarray of shape (k, *grid.extended)
    queries : np.ndarray of shape (m, d)

    Returns
    -------
    inside : np.ndarray of shape (m,), bool
        Queries within the nodes' box; the others get no values.
    sums : np.ndarray of shape (k, m_inside)
        The interpolated sums of the queries inside.
    whole : np.ndarray of shape (m_inside,), bool
        Whether every corner of the query's cell is within ``L_i`` cells of
        every key node on every axis, so that the truncation left nothing out.
    """
    ext = grid.extended
    t = queries - grid.origin
    t /= grid.delta
    t += np.asarray(grid.margin, dtype=np.float64)
    inside = np.all((t >= 0.0) & (t <= np.asarray(ext, dtype=np.float64) - 1.0), axis=1)
    i, f = _split(t if inside.all() else t[inside], ext)
    del t
    flat, corners = _corners(i, f, ext)
    table = nodes.reshape(nodes.shape[0], -1)
    sums = np.empty((nodes.shape[0], flat.shape[0]))
    part = np.empty(flat.shape[0])
    for k in range(nodes.shape[0]):
        for j, (offset, weight) in enumerate(corners):
            np.take(table[k, offset:], flat, out=part)
            if j == 0:
                np.multiply(part, weight, out=sums[k])
            else:
                part *= weight
                sums[k] += part
    g, r, e = (np.asarray(x) for x in (grid.nodes, grid.reach, grid.margin))
    # corner j (from the keys' first node, j = i - P) sees every key node iff
    # G - 1 - L <= j <= L
    whole = np.all((i >= g - 1 - r + e) & (i + 1 <= r + e), axis=1)
    return inside, sums, whole


def _split(t: np.ndarray, ext: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Cell index (clipped to ``[0, ext_i - 2]``) and position in ``[0, 1]`` of grid coordinates."""
    top = np.asarray(ext, dtype=np.int64) - 2
    i = np.clip(np.floor(t).astype(np.int64), 0, top)
    f = t - i
    np.clip(f, 0.0, 1.0, out=f)
    return i, f
