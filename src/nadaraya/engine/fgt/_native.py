"""The compiled loops of ``fgt.c`` seen from Python.

Every function takes contiguous CPU tensors (float64, int64 or int8), splits
its boxes into blocks and runs them side by side in
:func:`~nadaraya.engine._threads.map_blocks` threads (the ctypes calls
release the GIL). Blocks write disjoint rows, so no two threads share an
output.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from .. import native
from .._threads import map_blocks

__all__ = [
    "SOURCE",
    "box_count",
    "box_keys",
    "counting_sort",
    "direct",
    "direct_tables",
    "evaluate",
    "expneg",
    "finish",
    "gather",
    "histogram",
    "load",
    "mass",
    "moments",
    "scatter",
    "table",
    "translate",
    "unavailable",
    "value_range",
]

SOURCE = Path(__file__).with_name("fgt.c")

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_I32 = ctypes.c_int32
_F64 = ctypes.c_double
_CPU = torch.device("cpu")

_SIGNATURES = {
    "fgt_table": ([_I64, _I32, _P, _I64, _P], None),
    "fgt_moments": ([_I64, _I64, _I32, _I32, _I32, _F64, _P, _P, _P, _P, _P, _I64, _P, _P,
                     _P], _I32),
    "fgt_pass": ([_I64, _I64, _I32, _I32, _I32, _I32, _I64, _P, _P, _P, _I64, _P, _P, _P, _P],
                 _I32),
    "fgt_evaluate": ([_I64, _I64, _I32, _I32, _I32, _F64, _P, _P, _P, _P, _P, _P, _P, _P],
                     _I32),
    "fgt_direct": ([_I64, _I64, _I32, _I32, _P, _P, _P, _P, _P, _I64, _P, _P, _P, _I64, _P,
                    _P, _I64, _P, _P, _P, _P, _P, _I64, _P, _P, _P], _I32),
    "fgt_expneg": ([_I64, _P, _P], None),
    "fgt_sort": ([_I64, _P, _I64, _P, _P], None),
    "fgt_count": ([_I64, _P, _P], None),
    "fgt_range": ([_I64, _I32, _P, _P, _P], None),
    "fgt_keys": ([_I64, _I64, _I32, _P, _F64, _P, _P, _P], None),
    "fgt_gather": ([_I64, _I64, _I32, _I32, _I64, _P, _P, _P, _P, _P, _P, _P], None),
    "fgt_finish": ([_I64, _I64, _I32, _P, _P, _P, _P, _P, _P, _F64, _F64, _P], None),
    "fgt_scatter": ([_I64, _I32, _I32, _P, _P, _F64, _P, _P, _I64, _P, _P, _P], None),
    "fgt_mass": ([_I64, _I64, _I32, _I64, _P, _P, _P], None),
    "fgt_box_count": ([_I64, _I32, _P, _F64, _P, _P, _P], None),
}

_declared: dict[int, ctypes.CDLL] = {}


def load() -> ctypes.CDLL | None:
    """The compiled library, or None where native code is unavailable (see :func:`unavailable`)."""
    lib = native.library(SOURCE)
    if lib is None:
        return None
    if id(lib) not in _declared:
        for name, (args, res) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = res
        _declared[id(lib)] = lib
    return _declared[id(lib)]


def unavailable() -> str | None:
    """Why :func:`load` gave None."""
    return native.unavailable(SOURCE)


def _lib() -> ctypes.CDLL:
    lib = load()
    if lib is None:
        raise RuntimeError(f"the fast Gauss transform's compiled loops are unavailable: "
                           f"{unavailable()}")
    return lib


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _zeros(*shape: int, dtype: type = np.float64) -> torch.Tensor:
    """Zeros from NumPy (one thread; the pages are zero when first touched)."""
    return torch.from_numpy(np.zeros(shape, dtype=dtype))


def _blocks(weights: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split ``len(weights)`` items into about ``parts`` ranges of similar total weight."""
    w = np.asarray(weights, dtype=np.float64)
    count = w.shape[0]
    if count == 0:
        return []
    cum = np.cumsum(w)
    if parts <= 1 or count == 1 or cum[-1] <= 0:
        return [(0, count)]
    edges = np.searchsorted(cum, np.linspace(0, cum[-1], parts + 1)[1:-1])
    cuts = sorted({0, count, *(int(e) + 1 for e in edges)})
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


def _work(start: torch.Tensor) -> np.ndarray:
    """Points per box plus one: the work of a loop over boxes and their points."""
    return np.diff(start.numpy()) + 1.0


def _run(fn: Callable[[int, int], int], weights: np.ndarray, scale: int | None = None) -> None:
    """``fn(a, b)`` over ranges of items of similar total weight, in threads.

    With ``scale``, the ranges of ``len(weights)`` equal items are stretched over
    ``scale`` items (rows of one array cut into equal blocks).
    """
    parts = 8 * max(1, torch.get_num_threads())
    blocks = _blocks(weights, parts)
    if scale is not None:
        count = len(weights)
        blocks = [(a * scale // count, b * scale // count) for a, b in blocks]
    failed = [code for code in map_blocks(lambda r: fn(*r), blocks, device=_CPU) if code]
    if failed:
        raise MemoryError("the fast Gauss transform could not allocate its work buffers")


def counting_sort(key: torch.Tensor, span: int, hist: torch.Tensor, order: torch.Tensor) -> None:
    """Stable counting sort of int64 keys in ``[0, span)``: fills ``order`` and ``hist[:span]``.

    ``hist`` (``span + 1`` zeros) receives the count of each key.
    """
    _lib().fgt_sort(key.shape[0], _ptr(key), span, _ptr(hist), _ptr(order))


def value_range(points: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate least and greatest values ``(d,)`` of points ``(n, d)`` (``n >= 1``)."""
    n, d = points.shape
    lo, hi = np.empty(d), np.empty(d)
    _lib().fgt_range(n, d, _ptr(points), lo.ctypes.data, hi.ctypes.data)
    return lo, hi


def histogram(key: torch.Tensor, span: int) -> torch.Tensor:
    """How many of the int64 keys (in ``[0, span)``) equal each value: ``(span,)`` int64."""
    hist = _zeros(span, dtype=np.int64)
    _lib().fgt_count(key.shape[0], _ptr(key), _ptr(hist))
    return hist


def box_keys(points: torch.Tensor, side: float, lo: torch.Tensor,
             span: torch.Tensor) -> torch.Tensor:
    """Lexicographic box keys ``(n,)`` of points ``(n, d)`` (see ``fgt_keys``)."""
    n, d = points.shape
    key = torch.empty(n, dtype=torch.int64)
    lib = _lib()
    _run(lambda j0, j1: lib.fgt_keys(j0, j1, d, _ptr(points), side, _ptr(lo), _ptr(span),
                                     _ptr(key)) or 0,
         np.ones(min(n, 64)), scale=n)
    return key


def box_count(points: torch.Tensor, side: float, lo: torch.Tensor, span: torch.Tensor,
              hist: torch.Tensor) -> None:
    """Add to ``hist`` (int64, one entry per grid box) the count of points ``(n, d)`` per box."""
    n, d = points.shape
    _lib().fgt_box_count(n, d, _ptr(points), side, _ptr(lo), _ptr(span), _ptr(hist))


def gather(start: torch.Tensor, order: torch.Tensor, points: torch.Tensor,
           values: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Points (and values) in box order.

    Queries (``values`` None): ``{"points": (m, d)}``. Keys: ``{"points_t": (d, n),
    "values_t": (nv, n), "mass": (nb, 1 + nv)}`` (per box, ``sum |w|`` with
    ``w = (1, values)``).
    """
    n, d = points.shape
    nb = start.shape[0] - 1
    lib = _lib()
    if values is None:
        pts = torch.empty(n, d, dtype=torch.float64)
        _run(lambda b0, b1: lib.fgt_gather(b0, b1, d, 0, n, _ptr(start), _ptr(order),
                                           _ptr(points), None, _ptr(pts), None, None) or 0,
             _work(start))
        return {"points": pts}
    nv = values.shape[1]
    out = {"points_t": torch.empty(d, n, dtype=torch.float64),
           "values_t": torch.empty(nv, n, dtype=torch.float64),
           "mass": torch.empty(nb, nv + 1, dtype=torch.float64)}
    _run(lambda b0, b1: lib.fgt_gather(b0, b1, d, nv, n, _ptr(start), _ptr(order),
                                       _ptr(points), _ptr(values), _ptr(out["points_t"]),
                                       _ptr(out["values_t"]), _ptr(out["mass"])) or 0,
         _work(start))
    return out


def scatter(points: torch.Tensor, values: torch.Tensor, side: float, lo: torch.Tensor,
            span: torch.Tensor, total: int) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """Keys (and values) sorted into boxes with no permutation kept (see ``fgt_scatter``).

    Parameters
    ----------
    points : (n, d) float64
    values : (n, nv) float64
    side : float
    lo, span : (d,) int64
        The grid of :func:`~nadaraya.engine.fgt._boxes.grid_of`, ``total`` boxes.

    Returns
    -------
    ends : (total,) int64
        The row after the last of each grid box, in the sorted order.
    points_t : (d, n) float64
    values_t : (nv, n) float64
    """
    n, d = points.shape
    nv = values.shape[1]
    hist = np.zeros(total + 1, dtype=np.int64)
    points_t = torch.empty(d, n, dtype=torch.float64)
    values_t = torch.empty(nv, n, dtype=torch.float64)
    _lib().fgt_scatter(n, d, nv, _ptr(points), _ptr(values), side, _ptr(lo), _ptr(span), total,
                       hist.ctypes.data, _ptr(points_t), _ptr(values_t))
    return hist[:total], points_t, values_t


def mass(start: torch.Tensor, values_t: torch.Tensor) -> torch.Tensor:
    """Per box of sorted keys, ``sum |w|`` with ``w = (1, values)``: ``(nb, 1 + nv)``."""
    nv, n = values_t.shape
    nb = start.shape[0] - 1
    out = torch.empty(nb, nv + 1, dtype=torch.float64)
    lib = _lib()
    _run(lambda b0, b1: lib.fgt_mass(b0, b1, nv, n, _ptr(start), _ptr(values_t),
                                     _ptr(out)) or 0,
         _work(start))
    return out


def finish(start: torch.Tensor, order: torch.Tensor, expansion: torch.Tensor | None,
           sums: torch.Tensor | None, abss: torch.Tensor | None, box_err: torch.Tensor,
           eps: float, safety: float) -> torch.Tensor:
    """Values and bounds ``(m, 2 ch)`` back in the caller's order (see ``fgt_finish``).

    ``expansion`` is None without expansions, ``sums`` and ``abss`` without direct sums.
    """
    m, ch = order.shape[0], box_err.shape[1]
    out = torch.empty(m, 2 * ch, dtype=torch.float64)
    lib = _lib()

    def opt(t: torch.Tensor | None) -> int | None:
        return None if t is None else _ptr(t)

    _run(lambda b0, b1: lib.fgt_finish(b0, b1, ch, _ptr(start), _ptr(order), opt(expansion),
                                       opt(sums), opt(abss), _ptr(box_err), eps, safety,
                                       _ptr(out)) or 0,
         _work(start))
    return out


def table(coords: torch.Tensor) -> torch.Tensor:
    """Hash table of box coordinates ``(nb, d)``: int64 slots (a power of two, -1 empty)."""
    size = 1 << max(4, (2 * coords.shape[0]).bit_length())
    slots = torch.from_numpy(np.full(size, -1, dtype=np.int64))
    _lib().fgt_table(coords.shape[0], coords.shape[1], _ptr(coords), size, _ptr(slots))
    return slots


def moments(coords: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, points_t: torch.Tensor,
            values_t: torch.Tensor, order: int, side: float,
            nodes: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Moments ``(nb, order^d * ch)`` of source boxes; layout (a_1 .. a_d, channel).

    Box ``b`` (coordinates ``coords[b]``) holds the sorted keys ``lo[b] .. hi[b] - 1``
    of ``points_t (d, n)`` with values ``values_t (nv, n)``; ``ch = nv + 1`` (channel 0
    weighs every key 1). Hermite moments, or with ``nodes = (eta, wbar)`` the weights
    anterpolated to the Chebyshev nodes.
    """
    nb, d = coords.shape
    ch = values_t.shape[0] + 1
    n = points_t.shape[1]
    out = torch.empty(nb, order**d * ch, dtype=torch.float64)
    eta, wbar = (None, None) if nodes is None else (_ptr(nodes[0]), _ptr(nodes[1]))
    lib = _lib()
    _run(lambda b0, b1: lib.fgt_moments(b0, b1, d, order, ch, side, eta, wbar, _ptr(coords),
                                        _ptr(lo), _ptr(hi), n, _ptr(points_t),
                                        _ptr(values_t), _ptr(out)),
         (hi.numpy() - lo.numpy()) + order ** (d - 1))
    return out


def translate(out_coords: torch.Tensor, in_coords: torch.Tensor, data: torch.Tensor,
              matrices: torch.Tensor, axis: int, inner: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One translation pass along ``axis``; returns the output data and which boxes found input.

    Parameters
    ----------
    out_coords : (no, d) int64
    in_coords : (ni, d) int64
    data : (ni, p * inner) float64, layout (p, inner)
    matrices : (2K + 1, p, p) float64
    axis : int
    inner : int
        Size of the axes after the transformed one (``Q``).

    Returns
    -------
    out : (no, inner * p) float64, layout (inner, p)
    found : (no,) bool
    """
    no, d = out_coords.shape
    reach = (matrices.shape[0] - 1) // 2
    order = matrices.shape[1]
    out = torch.empty(no, order * inner, dtype=torch.float64)
    found = _zeros(no, dtype=np.int8)
    slots = table(in_coords)
    lib = _lib()
    _run(lambda o0, o1: lib.fgt_pass(o0, o1, d, axis, reach, order, inner, _ptr(out_coords),
                                     _ptr(in_coords), _ptr(slots), slots.shape[0],
                                     _ptr(matrices), _ptr(data), _ptr(out), _ptr(found)),
         np.ones(no))
    return out, torch.from_numpy(found.numpy().astype(bool))


def evaluate(coords: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, points: torch.Tensor,
             local: torch.Tensor, order: int, ch: int, side: float,
             nodes: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Local expansions of target boxes at their targets: ``(m, ch)``, sorted order.

    Taylor polynomials, or with ``nodes = (eta, wbar)`` Chebyshev interpolants. Rows of
    targets in no listed box stay zero.
    """
    d = coords.shape[1]
    out = _zeros(points.shape[0], ch)
    eta, wbar = (None, None) if nodes is None else (_ptr(nodes[0]), _ptr(nodes[1]))
    lib = _lib()
    _run(lambda b0, b1: lib.fgt_evaluate(b0, b1, d, order, ch, side, eta, wbar, _ptr(coords),
                                         _ptr(lo), _ptr(hi), _ptr(points), _ptr(local),
                                         _ptr(out)),
         (hi.numpy() - lo.numpy()) + 1.0)
    return out


def direct(tcoords: torch.Tensor, tlo: torch.Tensor, thi: torch.Tensor, tpoints: torch.Tensor,
           texpanded: torch.Tensor, offsets: torch.Tensor, scoords: torch.Tensor,
           sstart: torch.Tensor, sexpanded: torch.Tensor, spoints_t: torch.Tensor,
           svalues_t: torch.Tensor, smass: torch.Tensor, work: np.ndarray,
           tables: tuple[torch.Tensor, ...] | None = None,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact sums over the source boxes at ``offsets`` of each target box.

    A pair of boxes both expanded is skipped (the expansions carry it). ``tables``
    are :func:`direct_tables` of the source boxes, when built already.

    Returns
    -------
    sums, abs_sums : (m, ch) float64
        ``sum K w`` and ``sum K |w|`` per target (sorted order), channel 0 the total.
    near : (nbt, ch) float64
        The masses ``smass`` of the source boxes each target box visited.
    """
    nbt, d = tcoords.shape
    ch = smass.shape[1]
    m, n = tpoints.shape[0], spoints_t.shape[1]
    sums, abss, near = _zeros(m, ch), _zeros(m, ch), _zeros(nbt, ch)
    slots, dindex, dcoords, dslots = tables or direct_tables(scoords, sexpanded)
    lib = _lib()
    texp = torch.from_numpy(texpanded.numpy().astype(np.int8))
    _run(lambda b0, b1: lib.fgt_direct(b0, b1, d, ch, _ptr(tcoords), _ptr(tlo), _ptr(thi),
                                       _ptr(tpoints), _ptr(texp), offsets.shape[0],
                                       _ptr(offsets), _ptr(scoords), _ptr(slots),
                                       slots.shape[0], _ptr(dcoords), _ptr(dslots),
                                       dslots.shape[0], _ptr(dindex), _ptr(sstart),
                                       _ptr(spoints_t), _ptr(svalues_t), _ptr(smass), n,
                                       _ptr(sums), _ptr(abss), _ptr(near)),
         work)
    return sums, abss, near


def direct_tables(scoords: torch.Tensor, sexpanded: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The lookups :func:`direct` needs: all source boxes, and the boxes not expanded.

    Returns ``(slots, dindex, dcoords, dslots)``: the hash table of ``scoords``; the
    indices, coordinates and hash table of the source boxes ``sexpanded`` leaves out.
    """
    slots = table(scoords)
    dindex = torch.from_numpy(np.flatnonzero(~sexpanded.numpy()))
    dcoords = torch.from_numpy(np.ascontiguousarray(scoords.numpy()[dindex.numpy()]))
    return slots, dindex, dcoords, table(dcoords)


def expneg(r2: torch.Tensor) -> torch.Tensor:
    """``exp(-r2 / 2)`` by the direct sums' own exponential (float64, for the tests)."""
    r2 = r2.to(torch.float64).contiguous()
    out = torch.empty_like(r2)
    _lib().fgt_expneg(r2.numel(), _ptr(r2), _ptr(out))
    return out
