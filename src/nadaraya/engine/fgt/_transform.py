"""Running one plan: expansions where they pay, direct sums elsewhere, and the bounds.

A target box is *expanded* when its targets are better served by one local
expansion than by direct sums over the keys around it, a source box when
its moments serve enough expanded targets (:func:`_modes`). Expanded source
boxes reach expanded target boxes through the translation passes (offsets
``|o_i| <= K``); every other pair within distance ``K side`` is summed
directly. The bound of each query adds the expansion's ``E W``, the cut-off,
the direct sums' rounding and the final addition (see :mod:`._bounds`).

The run has two halves. :func:`prepare` does everything that reads the keys
or the boxes of all queries: it sorts the keys into boxes, counts the queries
per box (reading them a block at a time, never sorting them all), decides
the modes, and computes the local expansions of the expanded target boxes and
the per-box parts of the bound. :meth:`Prepared.evaluate` then serves any
block of queries: it sorts the block into boxes, evaluates the expansions,
sums the direct pairs and assembles each query's bound. A query's sums and
bound depend only on its box and its own coordinates, so blocks of any size
give the same results, to the last bit, as one block of all queries; memory
beyond the keys' sorted copy is ``O(block)``.

Bookkeeping on boxes runs in NumPy; the compiled loops of ``fgt.c`` see
torch tensors sharing its memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..certified import Sums
from . import _native
from ._basis import Basis
from ._bounds import LANES, SAFETY, direct_error
from ._boxes import (
    Boxes,
    BoxIndex,
    bin_points,
    count_boxes,
    linear_keys,
    sort_keys,
    unique_rows,
)
from ._hermite import window_weights
from ._passes import TooLarge, run_chain, support, window_sets
from ._plan import (
    LOOKUP_NS,
    VISIT_NS,
    Params,
    ball_offsets,
    evaluate_ns,
    moment_ns,
    pair_ns,
    pass_ns,
)

__all__ = ["Outcome", "Prepared", "prepare", "transform"]

_DROPPED = 1e-304  # bound on each direct term the exponential returns as 0 (exp(-700))


@dataclass
class Outcome:
    """The sums and what the run did (for ``explain`` and the benchmarks)."""

    sums: Sums
    expanded_targets: int
    expanded_sources: int
    target_boxes: int
    source_boxes: int
    factor: float


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _window_sum(sources: np.ndarray, weight: np.ndarray, targets: np.ndarray,
                reach: int) -> np.ndarray:
    """Sum of ``weight`` over the source boxes within the cube ``K`` of each target box."""
    if sources.shape[0] == 0 or targets.shape[0] == 0:
        return np.zeros(targets.shape[0])
    sets = support(_t(sources), window_sets(_t(targets), reach, _t(sources)), reach)
    ones = window_weights(reach, 1.0, gaussian=False)
    return run_chain(_t(sources), _t(weight[:, None]), sets, ones, 1).numpy()[:, 0]


def _same_box(at: np.ndarray, coords: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``count`` of the box of ``coords`` equal to each row of ``at`` (0 where none)."""
    both = linear_keys(np.concatenate([coords, at]))
    if both is None:
        return np.zeros(at.shape[0])
    keys, wanted = both.numpy()[: coords.shape[0]], both.numpy()[coords.shape[0]:]
    idx = np.minimum(np.searchsorted(keys, wanted), max(coords.shape[0] - 1, 0))
    return np.where(keys[idx] == wanted, count[idx], 0.0)


def _modes(plan: Params, kb: Boxes, qb: Boxes, ch: int) -> tuple[np.ndarray, np.ndarray]:
    """Which target and source boxes are expanded (bool ``(nbt,)``, ``(nbs,)``).

    A target box is, when the modelled time of the direct sums of its targets over
    the keys of its window exceeds that of evaluating their expansions plus its
    share of the passes; then a source box, when the direct sums of its keys to the
    expanded targets of its window cost more than its moments and passes.
    """
    nbt, nbs = qb.n_boxes, kb.n_boxes
    if plan.order == 0:
        return np.zeros(nbt, dtype=bool), np.zeros(nbs, dtype=bool)
    d, p, reach = kb.coords.shape[1], plan.order, plan.reach
    per_box = pass_ns(p, d, reach, ch)
    pair = pair_ns(d, ch - 1) + VISIT_NS / LANES
    evaluate, moment = evaluate_ns(p, d, ch), moment_ns(p, d, ch)
    tc, sc = qb.coords.numpy(), kb.coords.numpy()
    nt, ns = qb.count.numpy().astype(float), kb.count.numpy().astype(float)
    # the points of the same box are a lower bound on those of the window
    same_s, same_t = _same_box(tc, sc, ns), _same_box(sc, tc, nt)
    if bool((nt * same_s * pair > nt * evaluate + per_box).all()) and bool(
            (ns * same_t * pair > ns * moment + per_box).all()):
        return np.ones(nbt, dtype=bool), np.ones(nbs, dtype=bool)
    try:
        near = _window_sum(sc, ns, tc, reach)
        texp = nt * near * pair > nt * evaluate + per_box + LOOKUP_NS
        seen = _window_sum(tc[texp], nt[texp], sc, reach)
    except TooLarge:
        return np.zeros(nbt, dtype=bool), np.zeros(nbs, dtype=bool)
    sexp = ns * seen * pair > ns * moment + per_box
    if not sexp.any():
        texp[:] = False
    return texp, sexp


def _around(plan: Params, kb: Boxes, qb: Boxes, mass: np.ndarray) -> np.ndarray:
    """Mass ``(nbt, ch)`` of the ``3^d`` coarse blocks around each target box (see :mod:`._bounds`).

    Without an index (points too far apart) or a manageable window, every key counts.
    """
    coarse = 2 * plan.reach
    blocks_of_s = np.floor_divide(kb.coords.numpy(), coarse)
    blocks_of_t = np.floor_divide(qb.coords.numpy(), coarse)
    blocks = unique_rows(blocks_of_s).numpy()
    tblocks = unique_rows(blocks_of_t).numpy()
    keys = linear_keys(np.concatenate([blocks, blocks_of_s, tblocks, blocks_of_t]))
    around = np.broadcast_to(mass.sum(axis=0), (qb.n_boxes, mass.shape[1]))
    if keys is not None:
        k = keys.numpy()
        nb, ns, nt = blocks.shape[0], blocks_of_s.shape[0], tblocks.shape[0]
        bmass = np.zeros((nb, mass.shape[1]))
        np.add.at(bmass, np.searchsorted(k[:nb], k[nb:nb + ns]), mass)
        ones = window_weights(1, 1.0, gaussian=False)
        try:
            sets = window_sets(_t(tblocks), 1, _t(blocks))
            sums = run_chain(_t(blocks), _t(bmass), sets, ones, mass.shape[1]).numpy()
            around = sums[np.searchsorted(k[nb + ns:nb + ns + nt], k[nb + ns + nt:])]
        except TooLarge:
            pass
    return around


def _cut_off(plan: Params, total: np.ndarray, around: np.ndarray,
             covered: np.ndarray) -> np.ndarray:
    """Bound ``(nbt, ch)`` on the sources no sum of a target box covered (see :mod:`._bounds`).

    ``total`` ``(ch,)`` is the mass of all keys, ``around`` that of :func:`_around`,
    ``covered`` the mass the box's expansion and direct sums covered.
    """
    slack = 1e-8
    inner = np.clip(around * (1 + slack) - covered * (1 - slack), 0, None)
    outer = np.clip(total * (1 + slack) - around * (1 - slack), 0, None)
    near_gap = math.exp(-plan.radius**2 / 2)
    far_gap = math.exp(-(2 * plan.reach * plan.side) ** 2 / 2)
    return SAFETY * (inner * near_gap + outer * far_gap)


@dataclass
class _Direct:
    """What the direct sums read: the offsets, the source tables and the rounding bound."""

    offsets: torch.Tensor
    tables: tuple[torch.Tensor, ...]
    eps: float


class Prepared:
    """One plan's keys in boxes and the target boxes of all queries; blocks of queries follow.

    Built by :func:`prepare`; :meth:`evaluate` gives the sums of any block of the
    queries it counted.
    """

    def __init__(self, plan: Params, kb: Boxes, src: dict[str, torch.Tensor], qb: Boxes,
                 texp: np.ndarray, sexp: np.ndarray) -> None:
        self.plan, self.kb, self.src, self.qb = plan, kb, src, qb
        self.texp, self.sexp = texp, sexp
        self.ch = src["mass"].shape[1]
        nbt = qb.n_boxes
        self.weighted = np.zeros((nbt, self.ch))
        self.covered = np.zeros((nbt, self.ch))
        self.factor = 0.0
        self.local: torch.Tensor | None = None
        self.local_row = np.full(nbt, -1, dtype=np.int64)
        self.nodes: tuple[torch.Tensor, torch.Tensor] | None = None
        self.direct: _Direct | None = None
        mass = src["mass"].numpy()
        self.total = mass.sum(axis=0)
        self.around = np.zeros((0, self.ch))
        self._lookup = BoxIndex(qb.coords.numpy())
        self._expand()
        self._tables()
        self.around = _around(plan, kb, qb, mass)
        if self.direct is None:  # the expansions carry every pair: the keys are done with
            self.src = {"mass": src["mass"]}

    def _expand(self) -> None:
        """Moments -> ``d`` translation passes -> local expansions of the expanded targets."""
        plan, kb, qb, d = self.plan, self.kb, self.qb, self.qb.coords.shape[1]
        texp, sexp = self.texp, self.sexp
        if not (texp.any() and sexp.any()):
            return
        scoords = _t(kb.coords.numpy()[sexp])
        tcoords = _t(qb.coords.numpy()[texp])
        try:
            sets = support(scoords, window_sets(tcoords, plan.reach, scoords), plan.reach)
        except TooLarge:  # a fan of passes too wide to hold: every pair directly instead
            texp[:], sexp[:] = False, False
            return
        p, reach, side, basis = plan.order, plan.reach, plan.side, Basis(plan.basis)
        sstart = kb.start.numpy()
        slo, shi = sstart[:-1][sexp], sstart[1:][sexp]
        self.factor = basis.factor(side, p, d, reach, int((shi - slo).max()))
        self.nodes = basis.nodes(p, side)
        moments = _native.moments(scoords, _t(slo), _t(shi), self.src["points_t"],
                                  self.src["values_t"], p, side, self.nodes)
        self.local = run_chain(scoords, moments, sets, basis.translation(reach, p, side),
                               self.ch)
        del moments
        self.local_row[texp] = np.arange(int(texp.sum()))
        smass = _t(self.src["mass"].numpy()[sexp])
        self.weighted[texp] = run_chain(scoords, smass, sets, basis.decay(reach, side),
                                        self.ch).numpy()
        self.covered[texp] = run_chain(scoords, smass, sets,
                                       window_weights(reach, side, False), self.ch).numpy()

    def _tables(self) -> None:
        """The direct sums' lookups, unless every pair of boxes is expanded."""
        if self.texp.all() and self.sexp.all():
            return
        d, side = self.kb.coords.shape[1], self.plan.side
        offsets = ball_offsets(self.plan.reach, d)
        r2max = float((((offsets.abs() + 1).double() * side) ** 2).sum(dim=1).max())
        most = int(np.diff(self.kb.start.numpy()).max())
        self.direct = _Direct(offsets, _native.direct_tables(self.kb.coords, _t(self.sexp)),
                              direct_error(d, r2max, most, offsets.shape[0]))

    def evaluate(self, queries: torch.Tensor) -> Sums:
        """The sums and bounds of ``queries`` ``(b, d)`` (float64, contiguous), over all keys.

        Every query must lie in a box :func:`prepare` counted (a block of its queries).
        """
        plan, ch, src = self.plan, self.ch, self.src
        bb = bin_points(queries, plan.side)
        qpts = _native.gather(bb.start, bb.order, queries, None)["points"]
        at = self._lookup.find(bb.coords.numpy())
        texp = self.texp[at]
        tstart = bb.start.numpy()
        exp_vals = None
        if self.local is not None and texp.any():
            local = _t(self.local.numpy()[self.local_row[at[texp]]])
            exp_vals = _native.evaluate(_t(bb.coords.numpy()[texp]), _t(tstart[:-1][texp]),
                                        _t(tstart[1:][texp]), qpts, local, plan.order, ch,
                                        plan.side, self.nodes)
            del local
        sums = abss = None
        near = np.zeros((bb.n_boxes, ch))
        eps = 0.0
        if self.direct is not None:
            offsets = self.direct.offsets
            work = np.diff(tstart) * (1.0 + (~texp) * offsets.shape[0])
            sums, abss, near_t = _native.direct(
                bb.coords, _t(tstart[:-1]), _t(tstart[1:]), qpts, _t(texp), offsets,
                self.kb.coords, self.kb.start, _t(self.sexp), src["points_t"], src["values_t"],
                src["mass"], work, self.direct.tables)
            near = near_t.numpy()
            eps = self.direct.eps
        del qpts
        box_err = self.factor * self.weighted[at] + _cut_off(
            plan, self.total, self.around[at], self.covered[at] + near)
        box_err += near * _DROPPED
        out = _native.finish(bb.start, bb.order, exp_vals, sums, abss, _t(box_err), eps, SAFETY)
        return Sums(out[:, 0], out[:, 1:ch], out[:, ch], out[:, ch + 1:])


def prepare(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, plan: Params,
            expand: bool | None = None, rows: int | None = None) -> Prepared:
    """The key side of ``plan`` and the target boxes of ``queries``, ready for blocks.

    Parameters
    ----------
    queries : torch.Tensor of shape (m, d)
        Read ``rows`` at a time (converted to float64 block by block).
    keys : torch.Tensor of shape (n, d), float64, contiguous
    values : torch.Tensor of shape (n, nv), float64, contiguous
    plan : Params
    expand : bool, optional
        Expand every box (True) or none (False) instead of choosing box by box
        (for tests and benchmarks; ``plan.order`` must be positive for True).
    rows : int, optional
        Queries read at a time while counting them (default: all at once).
    """
    ch = values.shape[1] + 1
    kb, src = sort_keys(keys, values, plan.side)
    qb = count_boxes(queries, plan.side, rows or queries.shape[0])
    if expand is None:
        texp, sexp = _modes(plan, kb, qb, ch)
    else:
        texp = np.full(qb.n_boxes, bool(expand) and plan.order > 0)
        sexp = np.full(kb.n_boxes, bool(expand) and plan.order > 0)
    return Prepared(plan, kb, src, qb, texp, sexp)


def transform(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              plan: Params, expand: bool | None = None) -> Outcome:
    """The sums of :class:`~nadaraya.engine.certified.Sums` for prepared points, in one block.

    Parameters
    ----------
    queries : torch.Tensor of shape (m, d), float64, contiguous
    keys : torch.Tensor of shape (n, d), float64, contiguous
    values : torch.Tensor of shape (n, nv), float64, contiguous
    plan : Params
    expand : bool, optional
        As in :func:`prepare`.
    """
    ready = prepare(queries, keys, values, plan, expand)
    sums = ready.evaluate(queries)
    return Outcome(sums, int(ready.texp.sum()), int(ready.sexp.sum()), ready.qb.n_boxes,
                   ready.kb.n_boxes, ready.factor)
