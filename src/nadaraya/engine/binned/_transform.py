"""The three steps on the grid: linear binning, FFT convolution, linear interpolation."""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import numpy as np
import scipy.fft
import torch

from .. import native
from ._envelope import box_radii, envelope
from ._plan import Grid
from ._profiles import Profile

__all__ = ["bin_keys", "convolve", "interpolate", "kernel_quadrants", "norms"]

_SOURCE = Path(__file__).parent / "binning.c"


def _offsets(shape: tuple[int, ...]) -> list[int]:
    """Flat offset of each corner of a cell from its first corner (row-major ``shape``)."""
    return [0, 1] if len(shape) == 1 else [0, 1, shape[1], shape[1] + 1]


def _corners(i: torch.Tensor, f: torch.Tensor,
             shape: tuple[int, ...]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Flat index of each point's first corner, and its weight per corner (see :func:`_offsets`)."""
    if len(shape) == 1:
        return i[:, 0], [1.0 - f[:, 0], f[:, 0]]
    f0, f1 = f[:, 0], f[:, 1]
    g0, g1 = 1.0 - f0, 1.0 - f1
    flat = i[:, 0] * shape[1] + i[:, 1]
    return flat, [g0 * g1, g0 * f1, f0 * g1, f0 * f1]


def _grid_coordinates(grid: Grid, points: torch.Tensor, shift: tuple[int, ...]) -> torch.Tensor:
    """``(x - origin) / delta + shift`` per coordinate, in that order of operations."""
    t = points - torch.as_tensor(grid.origin, dtype=torch.float64, device=points.device)
    t /= grid.delta
    if any(shift):
        t += torch.as_tensor(shift, dtype=torch.float64, device=points.device)
    return t


def bin_keys(grid: Grid, keys: torch.Tensor, values: torch.Tensor,
             rows: int | None = None, *, compiled: bool = True) -> tuple[torch.Tensor, int]:
    """Linear binning of the weights 1 and of each value column, on the keys' device.

    Parameters
    ----------
    keys : torch.Tensor of shape (n, d), float64
    values : torch.Tensor of shape (n, p), float64, on the keys' device
    rows : int, optional
        Keys binned at a time (default: all); each block's products are added
        per node and corner role, so memory is ``O(rows)`` beyond the masses.
    compiled : bool, default True
        On the CPU in one dimension, bin with the compiled loop
        (``binning.c``) where it is available: one pass per column, ``O(grid)``
        memory, the sums of the tensor path in one block (``rows`` is then
        not used).

    Returns
    -------
    masses : torch.Tensor of shape (p + 1, *grid.nodes), float64
        ``masses[0]`` the binned weights 1, ``masses[1 + c]`` column ``c``.
    crowd : int
        At least the most keys in one cell: each node's mass is ``2^d`` sums
        (one per corner role, each accumulated separately) of at most
        ``crowd`` products each, added up. A sum of ``k`` products has at most
        ``k - 1`` roundings in any order, so blocks of keys and the unordered
        additions of a GPU keep the bound.
    """
    size = math.prod(grid.nodes)
    n, p = keys.shape[0], values.shape[1]
    device = keys.device
    lib = (_library() if compiled and device.type == "cpu" and grid.d == 1 and size >= 2
           else None)
    if lib is not None:  # one pass per column in C, the same sums as below
        masses = torch.empty(p + 1, size, dtype=torch.float64)
        x = keys[:, 0].contiguous()
        v = values.contiguous()
        scratch = torch.empty(size, dtype=torch.float64)
        lib.nadaraya_linbin1(n, p, x.data_ptr(), v.data_ptr(), float(grid.origin[0]),
                             float(grid.delta), size, masses.data_ptr(), scratch.data_ptr())
        del scratch
        return masses.reshape(-1, *grid.nodes), _crowd(masses[0], grid)
    corners = 2**grid.d
    # one accumulator per column and corner role: each adds at most `crowd` products
    roles = torch.zeros(p + 1, corners, size, dtype=torch.float64, device=device)
    step = max(1, n if rows is None else rows)
    for start in range(0, n, step):
        i, f = _split(_grid_coordinates(grid, keys[start:start + step], ()), grid.nodes)
        flat, weights = _corners(i, f, grid.nodes)
        del i, f
        part = values[start:start + step]
        for c in range(p + 1):
            for role, weight in enumerate(weights):
                w = weight if c == 0 else weight * part[:, c - 1]
                roles[c, role].index_add_(0, flat, w)
    masses = roles[:, 0].clone()
    for role, offset in enumerate(_offsets(grid.nodes)[1:], start=1):
        masses[:, offset:] += roles[:, role, : size - offset]
    del roles
    return masses.reshape(-1, *grid.nodes), _crowd(masses[0], grid)


def _crowd(ones: torch.Tensor, grid: Grid) -> int:
    """At least the most keys in one cell, from the binned weights 1 ``(size,)``."""
    # a cell's keys put all their weight on its corners
    cell = ones.reshape(grid.nodes)
    for axis in range(grid.d):
        length = cell.shape[axis]
        cell = cell.narrow(axis, 0, length - 1) + cell.narrow(axis, 1, length - 1)
    return math.ceil(float(cell.max()) * (1.0 + 1e-9)) + 1 if cell.numel() else 1


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


def convolve(grid: Grid, masses: torch.Tensor, kernel: np.ndarray, env: np.ndarray,
             workers: int, *, device_fft: bool | None = None) -> torch.Tensor:
    """Sums at the nodes: masses with the kernel, and the weight masses with the envelope.

    Real FFTs of the 2, 3 and 5-smooth lengths ``grid.fft``: pocketfft
    (``scipy.fft``, ``workers`` threads) on the CPU, the device's FFT
    (``torch.fft``: cuFFT on CUDA) elsewhere.

    Parameters
    ----------
    masses : torch.Tensor of shape (p + 1, *grid.nodes), float64
    kernel, env : np.ndarray of shape (L_i + 1, ...)
        Quadrants from :func:`kernel_quadrants`.
    device_fft : bool, optional
        Use ``torch.fft`` (default: off the CPU only).

    Returns
    -------
    nodes : torch.Tensor of shape (p + 2, *grid.extended), on the masses' device
        ``p + 1`` convolved sums, then the envelope sum, on the nodes
        ``-P_i .. G_i - 1 + P_i`` of each axis.
    """
    device = masses.device
    axes = tuple(range(1, grid.d + 1))
    k, e = _wrap(kernel, grid.fft), _wrap(env, grid.fft)
    if not (device.type != "cpu" if device_fft is None else device_fft):
        kspec = scipy.fft.rfftn(k, workers=workers)
        espec = scipy.fft.rfftn(e, workers=workers)
        spectra = scipy.fft.rfftn(masses.numpy(), s=grid.fft, axes=axes, workers=workers)
        out = torch.empty(masses.shape[0] + 1, *grid.fft, dtype=torch.float64)
        for c in range(masses.shape[0] + 1):
            product = spectra[0] * espec if c == masses.shape[0] else spectra[c] * kspec
            out[c] = torch.from_numpy(scipy.fft.irfftn(product, s=grid.fft, workers=workers,
                                                       overwrite_x=True))
    else:
        kspec = torch.fft.rfftn(torch.from_numpy(k).to(device))
        espec = torch.fft.rfftn(torch.from_numpy(e).to(device))
        spectra = torch.fft.rfftn(masses, s=grid.fft, dim=axes)
        out = torch.empty(masses.shape[0] + 1, *grid.fft, dtype=torch.float64, device=device)
        for c in range(masses.shape[0] + 1):
            product = spectra[0] * espec if c == masses.shape[0] else spectra[c] * kspec
            out[c] = torch.fft.irfftn(product, s=grid.fft, dim=tuple(range(grid.d)))
    del spectra, kspec, espec
    for axis, (g, m, n) in enumerate(zip(grid.nodes, grid.margin, grid.fft, strict=True)):
        keep = torch.arange(-m, g + m, device=device) % n
        out = out.index_select(axis + 1, keep)
    return out


def interpolate(grid: Grid, nodes: torch.Tensor,
                queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Linear interpolation of the node sums at the queries on the grid.

    Parameters
    ----------
    nodes : torch.Tensor of shape (k, *grid.extended), float64
    queries : torch.Tensor of shape (m, d), float64, on the nodes' device

    Returns
    -------
    inside : torch.Tensor of shape (m,), bool
        Queries within the nodes' box; the others get no values.
    sums : torch.Tensor of shape (k, m_inside)
        The interpolated sums of the queries inside.
    whole : torch.Tensor of shape (m_inside,), bool
        Whether every corner of the query's cell is within ``L_i`` cells of
        every key node on every axis, so that the truncation left nothing out.
    """
    ext = grid.extended
    device = queries.device
    t = _grid_coordinates(grid, queries, grid.margin)
    top = torch.as_tensor(ext, dtype=torch.float64, device=device) - 1.0
    inside = ((t >= 0.0) & (t <= top)).all(dim=1)
    i, f = _split(t if bool(inside.all()) else t[inside], ext)
    del t
    flat, weights = _corners(i, f, ext)
    table = nodes.reshape(nodes.shape[0], -1)
    sums = torch.empty(nodes.shape[0], flat.shape[0], dtype=torch.float64, device=device)
    for k in range(nodes.shape[0]):
        for j, (offset, weight) in enumerate(zip(_offsets(ext), weights, strict=True)):
            part = table[k].index_select(0, flat + offset)
            if j == 0:
                torch.mul(part, weight, out=sums[k])
            else:
                part *= weight
                sums[k] += part
    g, r, e = (torch.as_tensor(x, device=device) for x in (grid.nodes, grid.reach, grid.margin))
    # corner j (from the keys' first node, j = i - P) sees every key node iff
    # G - 1 - L <= j <= L
    whole = ((i >= g - 1 - r + e) & (i + 1 <= r + e)).all(dim=1)
    return inside, sums, whole


def _split(t: torch.Tensor, ext: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Cell index (clipped to ``[0, ext_i - 2]``) and position in ``[0, 1]`` of grid coordinates."""
    top = torch.as_tensor(ext, dtype=torch.int64, device=t.device) - 2
    i = torch.minimum(torch.floor(t).clamp(min=0.0, max=float(2**62)).to(torch.int64), top)
    f = (t - i).clamp_(0.0, 1.0)
    return i, f
