"""The grid engine: keys on a regular grid, seen through a window of offsets.

Images and regular series put queries and keys on one lattice, and the mask
is a window: query ``x`` sees the keys ``x + o`` for ``o`` in a fixed set of
offsets. Then the sum is a loop over offsets, each step vectorized over every
pixel at once:

    for o in offsets:
        s(x) = log K(t_x, t_{x+o})        for all x         (one array)
        fold exp(s) and v(x + o) into the online log-sum-exp state

with the kernel a :class:`~nadaraya.kernels.quadratic.QuadraticKernel`:
``s = -max(r^2 - tau, 0) + log w(x + o)`` where
``r^2 = o^T Q_x o + F[(y(z) - y(z + o))^T Q_v (y(z) - y(z + o))](x)`` and
``F`` filters with the patch weights (a box or Gaussian filter, separable),
so a patch distance costs a few additions per pixel whatever the patch size.
``r^2`` of the pair ``(x, x + o)`` is that of ``(x + o, x)``: one filtered
array serves the offsets ``o`` and ``-o``.

The reduction is the engine's :class:`~nadaraya.engine._state.SmoothState`:
a bounded pass with the kernel's upper bound as offset (exact when the
centre pixel is a key: its weight is the maximum), and the running-maximum
pass for tiles where that bound leaves too little weight. The image is
processed in tiles of rows sized by the working-memory budget
(:func:`nadaraya.config_context`). Everything is torch, on the device of the
input.

Local polynomial fits (kernel regression of order 2) need weighted moments
of the key's displacement ``D = key - query``: with ``degree > 0`` the state
also accumulates ``D^a v`` and ``D^a`` for the monomials ``a``
(:func:`monomials`); solving the small systems is left to the caller.

Without patches, sub-pixel shifts or a noise offset, and with moments or a
per-key field or log-weight (LARK), offsets are taken a row at a time: the
offsets ``(*prefix, lo..hi)`` differ in their last coordinate only, so their
keys are one strided view of each array (a window sliding along the last
axis), their scores one operation over ``K`` stacked arrays, and the moments
one matrix product with the monomials' coefficients. Each query's offset is
then the largest log-weight in its window (every weight at most 1, the
centre's at least ``exp`` of its own log-weight minus that bound).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch

from .._config import get_config
from .._errors import NadarayaError
from ..kernels.quadratic import QuadraticKernel
from ._grid_tile import Group, Plan, power, run_tile, weak
from ._job import exp_floor
from ._state import SmoothState

__all__ = ["BORDERS", "grid_smooth", "monomials", "window_offsets"]

BORDERS = ("reflect", "symmetric", "edge", "wrap")

# Temporaries per pixel of a tile beyond the channels (scores, weights, masks).
_TEMPS = 8
# On CPU, tiles hold at most this many pixels (their temporaries stay in cache).
_CPU_TILE = 1 << 17
# On CPU, the stacked scores of one group of offsets hold at most this many numbers.
_CPU_GROUP = 1 << 17


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


def _pad(x: torch.Tensor, pads: Sequence[int], mode: str) -> torch.Tensor:
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


def _check_inputs(values: torch.Tensor, guide: torch.Tensor | None,
                  offsets: torch.Tensor, kernel: QuadraticKernel) -> None:
    if not isinstance(values, torch.Tensor) or not values.is_floating_point():
        raise NadarayaError("values must be a floating torch tensor of shape (p, *grid_shape).")
    d = values.ndim - 1
    if d < 1:
        raise NadarayaError(
            f"values must have shape (p, *grid_shape) with at least one grid axis; "
            f"got shape {tuple(values.shape)}."
        )
    if kernel.ndim != d:
        raise NadarayaError(
            f"the kernel has {kernel.ndim} position dimension(s) but the grid has {d}; "
            f"build it with ndim={d}."
        )
    if offsets.ndim != 2 or offsets.shape[1] != d or offsets.shape[0] == 0:
        raise NadarayaError(
            f"offsets must have shape (n_offsets, {d}) with at least one row; "
            f"got {tuple(offsets.shape)}."
        )
    if guide is not None and tuple(guide.shape[1:]) != tuple(values.shape[1:]):
        raise NadarayaError(
            f"guide must cover the same grid as values {tuple(values.shape[1:])}; "
            f"got {tuple(guide.shape[1:])}."
        )


def _plan(values: torch.Tensor, kernel: QuadraticKernel, offsets: torch.Tensor,
          guide: torch.Tensor | None, key_valid: torch.Tensor | None,
          key_shift: torch.Tensor | None, degree: int, border: str,
          keys_outside: bool) -> Plan:
    dtype, device = values.dtype, values.device
    shape = tuple(values.shape[1:])
    d = len(shape)
    offs = sorted({tuple(int(v) for v in o) for o in offsets.tolist()})
    reach = tuple(max(abs(o[k]) for o in offs) for k in range(d))

    g = guide if guide is not None else values
    lmap = None  # guide -> L guide with L^T L = Q_v: the value block becomes Euclidean
    if kernel.value is not None:
        qvm = kernel.value_matrix(g.shape[0])
        if bool((qvm != 0).any()):
            lam, vec = torch.linalg.eigh(qvm)
            keep = lam > lam.abs().max() * 1e-14
            lmap = (vec[:, keep] * lam[keep].sqrt()).T.to(dtype=dtype, device=device)
    patch: Any = None
    prad = (0,) * d
    if lmap is not None and kernel.patch is not None:
        gw = kernel.patch
        if gw.ndim != d:
            raise NadarayaError(f"patch weights must have {d} dimensions; got {gw.ndim}.")
        prad = tuple(s // 2 for s in gw.shape)
        for k in range(d):
            if gw.shape[k] > shape[k]:
                raise NadarayaError(
                    f"patch of size {tuple(gw.shape)} is larger than the image "
                    f"{shape}; use a patch_size of at most {min(shape)}."
                )
        factors = _separable(gw)
        # plain floats: the filter loop reads them without a device round trip
        patch = [f.tolist() for f in factors] if factors is not None else gw

    field = None
    logw = None
    if kernel.position_field is not None:
        f = kernel.position_field
        if tuple(f.shape[:-2]) != shape:
            raise NadarayaError(
                f"position_field must have shape (*grid_shape, d, d) = {(*shape, d, d)} on "
                f"the grid; got {tuple(f.shape)}."
            )
        field = f.permute(*range(d, d + 2), *range(d)).to(dtype=dtype, device=device)
    if kernel.key_log_weight is not None:
        lw = kernel.key_log_weight
        if tuple(lw.shape) != shape:
            raise NadarayaError(
                f"key_log_weight must have the grid's shape {shape}; got {tuple(lw.shape)}."
            )
        logw = lw.to(dtype=dtype, device=device)

    symmetric = field is None and key_shift is None
    pairs, singles, zero = [], [], False
    offset_set = set(offs)
    for o in offs:
        if not any(o):
            zero = True
        elif symmetric and tuple(-v for v in o) in offset_set:
            if o > tuple(-v for v in o):
                pairs.append(o)
        else:
            singles.append(o)
    ext = reach if pairs else (0,) * d
    pads = tuple(reach[k] + ext[k] + prad[k] for k in range(d))

    mode = border
    vals = _pad(values, pads, mode)
    gd = None
    guide_scale = 1.0
    if lmap is not None:
        # padding copies pixels, so it commutes with the linear map: the values
        # are padded once and serve as the guide's source when they are the guide
        source = vals if guide is None else _pad(g.to(dtype=dtype, device=device), pads, mode)
        if lmap.shape == (1, 1):
            # one channel: the scale multiplies the squared differences instead
            gd, guide_scale = source, float(lmap[0, 0]) ** 2
        else:
            gd = torch.einsum("ij,j...->i...", lmap, source)
    valid = None
    if key_valid is not None:
        valid = key_valid.to(device=device, dtype=torch.bool)
    if not keys_outside:
        inside = torch.ones(shape, dtype=torch.bool, device=device)
        valid = inside if valid is None else valid
        widths = tuple(p for p in reversed(pads) for _ in (0, 1))
        valid = torch.nn.functional.pad(valid.to(torch.uint8), widths).to(torch.bool)
    elif valid is not None:
        valid = _pad(valid, pads, mode)
    if logw is not None:
        logw = _pad(logw, pads, mode)
    if field is not None:
        field = _pad(field, pads, mode)
    shift = None
    if key_shift is not None:
        if tuple(key_shift.shape) != (d, *shape):
            raise NadarayaError(
                f"key_shift must have shape (d, *grid_shape) = {(d, *shape)}; "
                f"got {tuple(key_shift.shape)}."
            )
        shift = _pad(key_shift.to(dtype=dtype, device=device), pads, mode)
    counts = None
    if degree == 0 and valid is not None:
        # hidden keys carry no value and no count: v * valid and valid
        counts = valid.to(dtype)
        vals = vals * counts
    clamp = _may_underflow(gd, guide_scale, patch, dtype)
    bound = 0.0
    if logw is not None:
        inner = logw if valid is None else logw[valid]
        bound = float(inner.max()) if inner.numel() else 0.0
    groups = keylog = top = keep = None
    if (shift is None and patch is None and not kernel.noise
            and (degree > 0 or logw is not None or field is not None)):
        qx = kernel.position_matrix().tolist()
        groups = _groups(offs, d, degree, None if field is not None else qx, dtype, device)
        if valid is not None:
            keep = valid.to(dtype)
        if logw is not None:
            keylog = logw
            top = _window_max(logw if valid is None else logw.masked_fill(~valid, -math.inf),
                              pads, offs, shape)
            top.masked_fill_(torch.isinf(top), 0.0)
    return Plan(
        shape=shape, pads=pads, values=vals, guide=gd, guide_scale=guide_scale, valid=valid,
        logw=logw, field=field,
        shift=shift, qx=kernel.position_matrix().to(dtype=dtype, device=device),
        patch=patch, prad=prad, noise=kernel.noise, bound=bound, zero=zero, pairs=pairs,
        singles=singles, ext=ext, mono=monomials(d, degree),
        mono2=[a for a in monomials(d, 2 * degree) if any(a)], symmetric=symmetric,
        counts=counts, clamp=clamp, groups=groups, keylog=keylog, top=top, keep=keep,
    )


def _groups(offsets: list[tuple[int, ...]], d: int, degree: int,
            qx: list[list[float]] | None, dtype: torch.dtype, device: torch.device
            ) -> list[Group]:
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
                         value.to(dtype=dtype, device=device),
                         weight.to(dtype=dtype, device=device)))
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


def _may_underflow(guide: torch.Tensor | None, guide_scale: float, patch: Any,
                   dtype: torch.dtype) -> bool:
    """Whether some pair score of the value / patch block can fall below the exponent floor.

    ``r^2 <= sum_c range(L y_c)^2 * sum(g)``; the position block is a constant
    per offset (kept out of the arrays in the bounded pass).
    """
    if guide is None:
        return False
    spread = guide_scale * sum((float(c.amax()) - float(c.amin())) ** 2 for c in guide)
    if patch is not None:
        if isinstance(patch, list):
            total = 1.0
            for f in patch:
                total *= sum(f)
        else:
            total = float(patch.sum())
        spread *= total
    return not spread * (1 + 1e-6) < -exp_floor(dtype) - 1.0


def _tile_rows(plan: Plan, n_acc: int, itemsize: int, device: torch.device) -> int:
    """Rows per tile: the temporaries of one tile fit the working-memory budget."""
    budget = get_config().working_memory * 2**20 / itemsize
    row = 1
    for k in range(1, plan.ndim):
        row *= plan.shape[k] + 2 * plan.ext[k] + 2 * plan.prad[k]
    stacked = 0
    if plan.groups is not None:
        stacked = max(g.width for g in plan.groups) * (plan.p + 1)
    per_row = row * (_TEMPS + 2 * (plan.p + (plan.guide.shape[0] if plan.guide is not None
                                                else 0)) + n_acc + stacked)
    rows = max(1, int(budget // max(per_row, 1)) - 2 * plan.ext[0] - 2 * plan.prad[0])
    if device.type == "cpu":
        rows = min(rows, max(1, _CPU_TILE // max(row, 1)))
        if stacked:
            rows = min(rows, max(1, _CPU_GROUP // (row * stacked)))
    rows = min(rows, plan.shape[0])
    tiles = -(-plan.shape[0] // rows)
    return -(-plan.shape[0] // tiles)  # tiles of equal height


def grid_smooth(
    values: torch.Tensor,
    kernel: QuadraticKernel,
    offsets: torch.Tensor | int,
    *,
    guide: torch.Tensor | None = None,
    key_valid: torch.Tensor | None = None,
    key_shift: torch.Tensor | None = None,
    degree: int = 0,
    border: str = "reflect",
    keys_outside: bool = False,
) -> SmoothState:
    """Smooth values on a grid with a quadratic-form kernel and a window of offsets.

    Query ``x`` (every grid point) sees the keys ``x + o`` for the offsets
    ``o``; its output is ``sum_o K(t_x, t_{x+o}) v(x + o) / sum_o K(t_x, t_{x+o})``
    with ``K`` the :class:`~nadaraya.kernels.quadratic.QuadraticKernel`.

    Parameters
    ----------
    values : torch.Tensor of shape (p, *grid_shape)
        Values at the keys (channels first); the compute dtype and device.
    kernel : QuadraticKernel
        Its ``ndim`` must be the number of grid axes. A ``position_field`` or
        ``key_log_weight`` it carries must have the grid's shape
        (``(*grid_shape, d, d)`` and ``grid_shape``).
    offsets : torch.Tensor of shape (n_offsets, d), or int
        The window (integer offsets); an int is the radius of a square window.
    guide : torch.Tensor of shape (c, *grid_shape), optional
        The features ``y`` the value / patch block of ``Q`` compares; default
        ``values``.
    key_valid : torch.Tensor of shape grid_shape, bool, optional
        Which grid points are keys (reconstruction from samples).
    key_shift : torch.Tensor of shape (d, *grid_shape), optional
        Key ``j`` sits at ``j + key_shift[:, j]`` (samples off the grid).
    degree : int, default 0
        With ``degree > 0`` the state also holds the moments of the key
        displacement ``D = key - query`` for local polynomial fits: ``acc``
        columns are ``D^a v`` for ``a`` in ``monomials(d, degree)`` (``p``
        columns each), then ``D^a`` for ``a`` in ``monomials(d, 2 degree)``
        without the constant.
    border : {"reflect", "symmetric", "edge", "wrap"}
        How pixels outside the grid are read (patches near the border, and
        keys outside when ``keys_outside``). ``"reflect"`` mirrors without
        repeating the edge (OpenCV's BORDER_REFLECT_101, NumPy's "reflect").
    keys_outside : bool, default False
        Whether window positions outside the grid are keys (read through
        ``border``, as OpenCV's filters do) or skipped (the window is clipped).

    Returns
    -------
    SmoothState
        For the ``prod(grid_shape)`` queries in row-major order: ``offset``,
        ``total`` ``(m,)`` and ``acc`` ``(m, n_columns)``; ``state.mean()`` is
        the smoothed values.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.engine._grid import grid_smooth
    >>> from nadaraya.kernels.quadratic import bilateral_kernel
    >>> img = torch.rand(1, 32, 32, dtype=torch.float64)
    >>> state = grid_smooth(img, bilateral_kernel(2.0, 0.1), 3)
    >>> state.mean().reshape(32, 32).shape
    torch.Size([32, 32])
    """
    if not isinstance(values, torch.Tensor) or values.ndim < 2:
        raise NadarayaError(
            "values must be a floating torch tensor of shape (p, *grid_shape) with at least "
            f"one grid axis; got {getattr(values, 'shape', type(values).__name__)}."
        )
    if isinstance(offsets, int):
        offsets = window_offsets(offsets, values.ndim - 1)
    offsets = torch.as_tensor(offsets)
    if offsets.is_floating_point() and not bool((offsets == offsets.round()).all()):
        raise NadarayaError("offsets must be integers (grid steps).")
    offsets = offsets.to(torch.int64)
    _check_inputs(values, guide, offsets, kernel)
    if border not in BORDERS:
        raise NadarayaError(f"border must be one of {', '.join(map(repr, BORDERS))}; "
                            f"got {border!r}.")
    if not isinstance(degree, int) or degree < 0:
        raise NadarayaError(f"degree must be an integer >= 0; got {degree!r}.")
    with torch.no_grad():
        plan = _plan(values, kernel, offsets, guide, key_valid, key_shift, degree, border,
                     keys_outside)
        n_acc = plan.p * len(plan.mono) + len(plan.mono2)
        step = _tile_rows(plan, n_acc, values.element_size(), values.device)
        n_keys = offsets.shape[0]
        m = 1
        for n in plan.shape:
            m *= n
        row = m // plan.shape[0]
        # acc is stored column-major, (n_columns, m): a tile's columns are a view
        acc = values.new_empty(n_acc, m)
        total = values.new_empty(m)
        # the offset is the constant bound until a tile says otherwise
        offset: torch.Tensor | None = None
        direct = len(plan.mono) == 1
        scratch: dict[Any, torch.Tensor] = {}  # work arrays shared by the tiles
        for a in range(0, plan.shape[0], step):
            rows = (a, min(a + step, plan.shape[0]))
            where = slice(rows[0] * row, rows[1] * row)
            size = (rows[1] - rows[0], *plan.shape[1:])
            into = (acc[:, where].view(n_acc, *size), total[where].view(size))
            tile = run_tile(plan, rows, exact=False, into=into if direct else None,
                            scratch=scratch)
            if weak(plan, tile, n_keys):
                tile = run_tile(plan, rows, exact=True, scratch=scratch)
            elif tile.fast and direct:
                continue
            part = tile.state()
            if offset is None:
                offset = values.new_full((m,), plan.bound)
            offset[where], total[where], acc.T[where] = part.offset, part.total, part.acc
        if offset is None:
            offset = values.new_full((1,), plan.bound).expand(m)
        return SmoothState(offset, total, acc.T)
