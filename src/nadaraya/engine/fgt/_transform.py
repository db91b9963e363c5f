"""Running one plan: expansions where they pay, direct sums elsewhere, and the bounds.

A target box is *expanded* when its targets are better served by one local
expansion than by direct sums over the keys around it, a source box when
its moments serve enough expanded targets (:func:`_modes`). Expanded source
boxes reach expanded target boxes through the translation passes (offsets
``|o_i| <= K``); every other pair within distance ``K side`` is summed
directly. The bound of each query adds the expansion's ``E W``, the cut-off,
the direct sums' rounding and the final addition (see :mod:`._bounds`).

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
from ._boxes import Boxes, bin_points, linear_keys, unique_rows
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

__all__ = ["Outcome", "transform"]

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


def _cut_off(plan: Params, kb: Boxes, qb: Boxes, mass: np.ndarray,
             covered: np.ndarray) -> np.ndarray:
    """Bound ``(nbt, ch)`` on the sources no sum of a target box covered (see :mod:`._bounds`)."""
    coarse = 2 * plan.reach
    blocks_of_s = np.floor_divide(kb.coords.numpy(), coarse)
    blocks_of_t = np.floor_divide(qb.coords.numpy(), coarse)
    blocks = unique_rows(blocks_of_s).numpy()
    tblocks = unique_rows(blocks_of_t).numpy()
    keys = linear_keys(np.concatenate([blocks, blocks_of_s, tblocks, blocks_of_t]))
    # without an index (points too far apart) or a manageable window, every uncovered
    # key counts at distance K side
    around = np.broadcast_to(mass.sum(axis=0), covered.shape)
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
    total = mass.sum(axis=0)
    slack = 1e-8
    inner = np.clip(around * (1 + slack) - covered * (1 - slack), 0, None)
    outer = np.clip(total * (1 + slack) - around * (1 - slack), 0, None)
    near_gap = math.exp(-plan.radius**2 / 2)
    far_gap = math.exp(-(coarse * plan.side) ** 2 / 2)
    return SAFETY * (inner * near_gap + outer * far_gap)


def transform(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              plan: Params, expand: bool | None = None) -> Outcome:
    """The sums of :class:`~nadaraya.engine.certified.Sums` for prepared points.

    Parameters
    ----------
    queries : torch.Tensor of shape (m, d), float64, contiguous
    keys : torch.Tensor of shape (n, d), float64, contiguous
    values : torch.Tensor of shape (n, nv), float64, contiguous
    plan : Params
    expand : bool, optional
        Expand every box (True) or none (False) instead of choosing box by box
        (for tests and benchmarks; ``plan.order`` must be positive for True).
    """
    d = queries.shape[1]
    ch = values.shape[1] + 1
    side = plan.side
    kb, qb = bin_points(keys, side), bin_points(queries, side)
    src = _native.gather(kb.start, kb.order, keys, values)
    kb.order = kb.order[:0]  # the keys are in box order from here on
    qpts = _native.gather(qb.start, qb.order, queries, None)["points"]
    mass = src["mass"].numpy()
    tstart, sstart = qb.start.numpy(), kb.start.numpy()
    if expand is None:
        texp, sexp = _modes(plan, kb, qb, ch)
    else:
        texp = np.full(qb.n_boxes, bool(expand) and plan.order > 0)
        sexp = np.full(kb.n_boxes, bool(expand) and plan.order > 0)

    # expansions: moments -> d translation passes -> local expansions at the targets
    exp_vals = None
    weighted = np.zeros((qb.n_boxes, ch))
    covered = np.zeros((qb.n_boxes, ch))
    factor = 0.0
    sets = None
    if texp.any() and sexp.any():
        scoords = _t(kb.coords.numpy()[sexp])
        tcoords = _t(qb.coords.numpy()[texp])
        try:
            sets = support(scoords, window_sets(tcoords, plan.reach, scoords), plan.reach)
        except TooLarge:  # a fan of passes too wide to hold: every pair directly instead
            texp[:], sexp[:] = False, False
    if sets is not None:
        p, reach, basis = plan.order, plan.reach, Basis(plan.basis)
        slo, shi = sstart[:-1][sexp], sstart[1:][sexp]
        factor = basis.factor(side, p, d, reach, int((shi - slo).max()))
        nodes = basis.nodes(p, side)
        local = run_chain(scoords, _native.moments(scoords, _t(slo), _t(shi), src["points_t"],
                                                   src["values_t"], p, side, nodes),
                          sets, basis.translation(reach, p, side), ch)
        exp_vals = _native.evaluate(tcoords, _t(tstart[:-1][texp]), _t(tstart[1:][texp]),
                                    qpts, local, p, ch, side, nodes)
        del local
        smass = _t(mass[sexp])
        weighted[texp] = run_chain(scoords, smass, sets, basis.decay(reach, side), ch).numpy()
        covered[texp] = run_chain(scoords, smass, sets, window_weights(reach, side, False),
                                  ch).numpy()

    # direct sums over the boxes within K side (pairs of expanded boxes excepted)
    sums = abss = None
    near = np.zeros((qb.n_boxes, ch))
    eps_direct = 0.0
    if not (texp.all() and sexp.all()):
        offsets = ball_offsets(plan.reach, d)
        r2max = float((((offsets.abs() + 1).double() * side) ** 2).sum(dim=1).max())
        work = np.diff(tstart) * (1.0 + (~texp) * offsets.shape[0])
        sums, abss, near_t = _native.direct(qb.coords, _t(tstart[:-1]), _t(tstart[1:]), qpts,
                                            _t(texp), offsets, kb.coords, kb.start, _t(sexp),
                                            src["points_t"], src["values_t"], src["mass"],
                                            work)
        near = near_t.numpy()
        eps_direct = direct_error(d, r2max, int(np.diff(sstart).max()), offsets.shape[0])

    del src, qpts
    # the bound per target box, then per target, back in the caller's order
    box_err = factor * weighted + _cut_off(plan, kb, qb, mass, covered + near)
    box_err += near * _DROPPED
    out = _native.finish(qb.start, qb.order, exp_vals, sums, abss, _t(box_err), eps_direct,
                         SAFETY)
    result = Sums(out[:, 0], out[:, 1:ch], out[:, ch], out[:, ch + 1:])
    return Outcome(result, int(texp.sum()), int(sexp.sum()), qb.n_boxes, kb.n_boxes, factor)
