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

The reduction is the engine's :class:`~nadaraya.engine.SmoothState`:
a bounded pass with the kernel's upper bound as offset (exact when the
centre pixel is a key: its weight is the maximum), and the running-maximum
pass for tiles where that bound leaves too little weight. The image is
processed in tiles of rows sized by the working-memory budget
(:func:`nadaraya.config_context`). Everything is torch, on the device of the
input.

Range and rounding: values and guide are scaled by powers of two into
``[-1, 1]`` (exact), so that a float32 image near ``3e38`` or a float64 one
near ``1.7e308`` or among the subnormal numbers filters without overflow or
underflow; sums are accumulated in float64 for float32 values, so float32
results are the float64 ones up to the rounding of the weights. The state
each tile writes is normalized: ``total`` is 1 where a key has weight and
``acc`` holds the weighted means in the values' units.

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

The pieces: :mod:`._lattice` (offsets, monomials, padding), :mod:`._plan`
(the padded inputs and the offsets' schedule, with the offset groups of
:mod:`._grouping`), :mod:`._tile` (one tile, offset by offset),
:mod:`._run` (which path a tile takes), :mod:`._fast` (the loop without
moments or per-key weights) and :mod:`._group` (the grouped path);
:mod:`._blocks` cuts images larger than the working memory into blocks.
"""

from __future__ import annotations

from typing import Any

import torch

from ..._config import get_config
from ..._errors import NadarayaError
from ...kernels.quadratic import QuadraticKernel
from .._state import SmoothState
from ._lattice import window_offsets
from ._plan import Plan, _plan
from ._run import run_tile, weak

__all__ = ["BORDERS", "grid_smooth"]

BORDERS = ("reflect", "symmetric", "edge", "wrap")

# Temporaries per pixel of a tile beyond the channels (scores, weights, masks).
_TEMPS = 8
# Accumulators per pixel of a tile beyond the columns, and the copies made when a tile finishes.
_ACC_TEMPS = 3
# On CPU, tiles hold at most this many pixels (their temporaries stay in cache).
_CPU_TILE = 1 << 17
# On CPU, the stacked scores of one group of offsets hold at most this many numbers.
_CPU_GROUP = 1 << 17


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


def _tile_rows(plan: Plan, n_acc: int, device: torch.device) -> int:
    """Rows per tile: the temporaries of one tile fit the working-memory budget."""
    budget = get_config().working_memory * 2**20
    row = 1
    for k in range(1, plan.ndim):
        row *= plan.shape[k] + 2 * plan.ext[k] + 2 * plan.prad[k]
    stacked = 0
    if plan.groups is not None:
        stacked = max(g.width for g in plan.groups) * (plan.p + 1)
    narrow = _TEMPS + 3 * plan.p + 1 + 2 * (plan.guide.shape[0] if plan.guide is not None
                                            else 0) + stacked
    wide = 2 * n_acc + _ACC_TEMPS + stacked
    per_row = row * (narrow * plan.values.element_size()
                     + wide * torch.finfo(plan.acc_dtype).bits // 8)
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
    state_dtype: torch.dtype | None = None,
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
    state_dtype : torch.dtype, optional
        The dtype of the returned state; default the values'. Float64 keeps
        the digits of float32 values' moments for the solve of a local fit
        (they are summed in float64).

    Returns
    -------
    SmoothState
        For the ``prod(grid_shape)`` queries in row-major order, normalized:
        ``offset`` ``(m,)`` is ``log sum_o K`` (``-inf`` where no key has
        weight), ``total`` ``(m,)`` is 1 (0 where no key has weight) and
        ``acc`` ``(m, n_columns)`` the weighted means, so ``state.mean()`` is
        the smoothed values. Every column is finite except moments
        ``D^a v`` whose true value exceeds the dtype's range
        (``|D^a| max |v|`` beyond it; local fits scale their values first).

    Examples
    --------
    >>> import torch
    >>> from nadaraya.engine.grid._smooth import grid_smooth
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
        step = _tile_rows(plan, n_acc, values.device)
        n_keys = offsets.shape[0]
        m = 1
        for n in plan.shape:
            m *= n
        row = m // plan.shape[0]
        # acc is stored column-major, (n_columns, m): a tile's columns are a view
        out = {"dtype": state_dtype or values.dtype, "device": values.device}
        acc = torch.empty(n_acc, m, **out)
        total = torch.empty(m, **out)
        offset = torch.empty(m, **out)
        scratch: dict[Any, torch.Tensor] = {}  # work arrays shared by the tiles
        for a in range(0, plan.shape[0], step):
            rows = (a, min(a + step, plan.shape[0]))
            where = slice(rows[0] * row, rows[1] * row)
            size = (rows[1] - rows[0], *plan.shape[1:])
            tile = run_tile(plan, rows, exact=False, scratch=scratch)
            parts = (offset[where].view(size), total[where].view(size),
                     acc[:, where].view(n_acc, *size))
            tile.finish(*parts)
            low = weak(plan, tile, n_keys)
            if low is not None:
                # the queries the fixed offset leaves too little weight: the exact pass
                exact = run_tile(plan, rows, exact=True, scratch=scratch)
                redo = (torch.empty_like(parts[0]), torch.empty_like(parts[1]),
                        torch.empty_like(parts[2]))
                exact.finish(*redo)
                for part, new in zip(parts, redo, strict=True):
                    torch.where(low, new, part, out=part)
        return SmoothState(offset, total, acc.T)
