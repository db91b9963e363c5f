"""``tolerance=`` on Dask: certified sums per block, checked per query chunk, redone exactly.

Each block task chooses, on its own block, between the certified methods
and the exact engines (:func:`~nadaraya.engine.certified.choose_certified`)
and returns :class:`~nadaraya.engine.certified.Sums`; sums over disjoint key
chunks add, bounds included, so they tree-reduce like the states. Each query
chunk then checks its rows against the tolerance
(:func:`~nadaraya.engine.certified.unproven_rows`, with the global value
scale) and the rows not proven are computed exactly by a second reduction
over the key chunks, as :func:`~nadaraya.engine.certified.certified_state`
does in memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._dispatch import choose
from .._state import SmoothState
from ..certified import METHODS, Sums, choose_certified, state_of, unproven_rows
from ..certified._leave_out import is_leave_one_out, less_own_terms, unmasked
from ._partial import Partial, exponents, value_range
from ._tasks import BlockSpec, block_job, in_budget

__all__ = ["add_certified", "check_block", "patch_block", "redo_block", "sums_block"]

_EPS = 2.0**-52
_TINY = 2.0**-1022


def _exact_sums(state: SmoothState) -> Sums:
    """An exact engine's state as sums in float64, bounded by its rounding (and underflow)."""
    offset = state.offset.to(torch.float64)
    finite = torch.isfinite(offset)
    scale = torch.where(finite, torch.exp(torch.where(finite, offset, 0.0)), 0.0)
    total = state.total.to(torch.float64) * scale
    acc = state.acc.to(torch.float64) * scale[:, None]
    rel = 8 * float(torch.finfo(state.total.dtype).eps)
    return Sums(total, acc, rel * total.abs() + _TINY, rel * acc.abs() + _TINY)


@in_budget
def sums_block(spec: BlockSpec, q: np.ndarray, k: np.ndarray, v: np.ndarray, q0: int,
               k0: int, bandwidth: Any) -> Partial:
    """Certified sums of one query chunk over one key chunk, with their proven bounds."""
    top, lo, hi = value_range(v)
    p = v.shape[1]
    none = Sums(torch.zeros(q.shape[0], dtype=torch.float64),
                torch.zeros(q.shape[0], p, dtype=torch.float64),
                torch.zeros(q.shape[0], dtype=torch.float64),
                torch.zeros(q.shape[0], p, dtype=torch.float64))
    if q.shape[0] == 0 or k.shape[0] == 0:
        return Partial(none, top, lo, hi)
    job = block_job(spec, q, k, v, torch.arange(q0, q0 + q.shape[0]), k0, bandwidth,
                    exponents(top))
    if job is None:
        return Partial(none, top, lo, hi)
    tolerance = float(spec.tolerance or 0.0)
    choice = choose_certified(job, tolerance, spec.engine, describe=False)[0]
    if choice.method is None:
        sums = _exact_sums(choice.engine.run(job))
    elif is_leave_one_out(job):
        sums = less_own_terms(job, choice.method.sums(unmasked(job), tolerance))
    else:
        sums = choice.method.sums(job, tolerance)
    return Partial(sums, top, lo, hi)


def check_block(spec: BlockSpec, merged: Partial) -> tuple[Partial, torch.Tensor]:
    """The state of a query chunk from its sums, and the rows its bounds do not prove."""
    sums = merged.part
    scale = torch.ldexp(merged.top, -merged.exponents)
    bad = unproven_rows(sums, scale, float(spec.tolerance or 0.0), normalize=spec.normalize,
                        lse=spec.lse)
    if sums.acc.shape[1]:
        # a column of zeros is smoothed exactly: its sums are zero whatever the method
        sums.acc[:, scale == 0] = 0.0
    state = state_of(sums, spec.dtype)
    return Partial(state, merged.top, merged.lo, merged.hi), torch.nonzero(bad).flatten()


@in_budget
def redo_block(spec: BlockSpec, checked: tuple[Partial, torch.Tensor], q: np.ndarray,
               k: np.ndarray, v: np.ndarray, q0: int, k0: int, bandwidth: Any) -> SmoothState:
    """The exact state, over this key chunk, of the rows the check did not prove.

    The values are divided by the exponents of all keys (the checked state's).
    """
    merged, rows = checked
    empty = SmoothState.empty(rows.numel(), v.shape[1], dtype=spec.dtype,
                              device=torch.device("cpu"))
    if rows.numel() == 0 or k.shape[0] == 0:
        return empty
    job = block_job(spec, q[rows.numpy()], k, v, q0 + rows, k0, bandwidth, merged.exponents)
    if job is None:
        return empty
    engine = "auto" if spec.engine in METHODS else spec.engine
    return choose(job, engine, describe=False)[0].run(job)


def patch_block(checked: tuple[Partial, torch.Tensor], exact: SmoothState) -> Partial:
    """The checked state with its unproven rows replaced by the exact ones."""
    merged, rows = checked
    state = merged.part
    if rows.numel():
        state = SmoothState(state.offset.clone(), state.total.clone(), state.acc.clone())
        state.offset[rows] = exact.offset.to(state.offset.dtype)
        state.total[rows] = exact.total.to(state.total.dtype)
        state.acc[rows] = exact.acc.to(state.acc.dtype)
    return Partial(state, merged.top, merged.lo, merged.hi)


def add_certified(graph: Any) -> list[Any]:
    """Add the certified stages to ``graph``; the merged state key of each query chunk.

    The exact redo reads the inputs a second time, after every query chunk's
    check (:meth:`~._graph.Graph.second_pass`).
    """
    n_keys = len(graph.k_offsets)
    checks = []
    for i in range(len(graph.q_offsets)):
        leaves = [graph.add("sums", (f"{graph.name}-sums", i, j),
                            (sums_block, graph.spec, *graph.block_args(i, j)))
                  for j in range(n_keys)]
        total = graph.reduce("sums", leaves, i)
        checks.append(graph.add("check", (f"{graph.name}-check", i),
                                (check_block, graph.spec, total)))
    graph.second_pass(checks)
    states = []
    for i, checked in enumerate(checks):
        redo = [graph.add("redo", (f"{graph.name}-redo", i, j),
                          (redo_block, graph.spec, checked,
                           *graph.block_args(i, j, again=True)))
                for j in range(n_keys)]
        exact = graph.reduce("redo", redo, i)
        states.append(graph.add("patch", (f"{graph.name}-patch", i),
                                (patch_block, checked, exact)))
    return states
