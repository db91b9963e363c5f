"""The functions Dask runs: one block of queries against one block of keys, merges, finish.

Every task is pure and deterministic (its result depends on its arguments
only), so a task lost with a worker is recomputed to the same bits. A block
task holds one query chunk, one key chunk (with its values) and one state;
it runs the in-memory engine on them, with the mask asked about global
indices (:mod:`._masks`) and the values divided by the global per-column
power of two (:mod:`.._scale`), so that states of different key chunks
merge exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..._config import config_context
from ..._errors import NadarayaError
from ...masks import Mask, Visibility
from .._dispatch import choose
from .._empty import _NO_WEIGHT, _describe
from .._job import Job
from .._scale import times_power_of_two
from .._state import SmoothState
from ..unnormalized import SignedState, finish, is_signed
from ._masks import localize
from ._partial import Partial, exponents, value_range

__all__ = [
    "BlockSpec",
    "Nearest",
    "block_job",
    "block_state",
    "finish_block",
    "in_budget",
    "merge_all",
    "nearest_block",
    "pick",
]


@dataclass(frozen=True)
class BlockSpec:
    """What every task of one ``smooth`` call shares (small: it travels with each task).

    Attributes
    ----------
    kernel : str, Kernel or callable
        As the caller gave it; built in each task with the resolved bandwidth.
    mask : Mask or None
        Over the whole ``(m, n)`` problem (global indices).
    m, n : int
        Numbers of queries and keys of the whole problem.
    dtype : torch.dtype
        The compute dtype.
    out_dtype : numpy.dtype
        The dtype of the results (the caller's values').
    normalize : bool
    engine : str
        The in-memory engine each block task runs (``"auto"`` lets the dispatcher choose).
    empty : str
        The empty-query policy.
    squeeze : bool
        Whether the values were 1-D (the result is then 1-D).
    tolerance : float or None
    lse : bool
        Whether the log-sums are returned.
    working_memory : float
        The caller's working-memory budget (MiB), in force in every task.
    """

    kernel: Any
    mask: Mask | None
    m: int
    n: int
    dtype: torch.dtype
    out_dtype: Any
    normalize: bool
    engine: str
    empty: str
    squeeze: bool
    tolerance: float | None = None
    lse: bool = False
    working_memory: float = 256.0


def in_budget(task: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``task(spec, ...)`` under the caller's working-memory budget (``spec.working_memory``).

    The budget is configuration of the thread that calls ``smooth``; a worker's
    threads start from the default, so each task sets it for its own run.
    """

    @functools.wraps(task)
    def run(spec: BlockSpec, *args: Any) -> Any:
        with config_context(working_memory=spec.working_memory):
            return task(spec, *args)

    return run


def pick(pair: tuple[Any, Any], index: int) -> Any:
    """One element of a task's tuple result (for the output arrays)."""
    return pair[index]


def _empty_state(spec: BlockSpec, m: int, p: int) -> SmoothState:
    empty = SmoothState.empty(m, p, dtype=spec.dtype, device=torch.device("cpu"))
    if _signed(spec):
        return SignedState(torch.zeros_like(empty.total), empty.total, empty.acc,
                           torch.zeros_like(empty.total))
    return empty


@functools.lru_cache(maxsize=64)
def _signed_kernel(kernel: Any) -> bool:
    from ...kernels import get_kernel

    return is_signed(get_kernel(kernel))


def _signed(spec: BlockSpec) -> bool:
    if isinstance(spec.kernel, str):
        return _signed_kernel(spec.kernel)
    return is_signed(spec.kernel)


def block_job(spec: BlockSpec, q: np.ndarray, k: np.ndarray, v: np.ndarray, qidx: torch.Tensor,
              k0: int, bandwidth: Any, e: torch.Tensor) -> Job | None:
    """The in-memory job of one block, or None when its mask hides the whole block.

    Parameters
    ----------
    q : ndarray of shape (m_block, d)
        The block's queries, global rows ``qidx``.
    k : ndarray of shape (n_block, d)
        The block's keys, global rows ``k0 ...``.
    v : ndarray of shape (n_block, p)
        Their values, as the caller gave them (divided here by ``2^e``).
    bandwidth : float, ndarray or None
        Resolved (a rule such as ``"scott"`` was computed over all keys).
    e : torch.Tensor of shape (p,), int64
        The per-column exponents the values are divided by (see :mod:`._partial`).
    """
    from .._api import build_job

    mask = localize(spec.mask, qidx, k0, spec.m, spec.n)
    try:
        job, _ = build_job(q, k, v, spec.kernel, mask, bandwidth)
    except NadarayaError as exc:
        first = int(qidx[0]) if qidx.numel() else 0
        raise NadarayaError(
            f"{exc} (in the Dask block of query rows from {first} and key rows "
            f"{k0}..{k0 + k.shape[0] - 1}: row numbers above count from the block's first row)"
        ) from None
    job.normalize = spec.normalize
    if job.mask is not None:
        status = job.mask.status(slice(0, job.m), slice(0, job.n))
        if status is Visibility.EMPTY:
            return None
        if status is Visibility.FULL:
            job.mask = None
    job.exponents = e
    if bool((e != 0).any()):
        job.values = times_power_of_two(job.values, -e[None, :])
    return job


@in_budget
def block_state(spec: BlockSpec, q: np.ndarray, k: np.ndarray, v: np.ndarray, q0: int, k0: int,
                bandwidth: Any) -> Partial:
    """The exact state of one query chunk over one key chunk (the in-memory engine's).

    The values are divided by their own chunk's powers of two; the partial
    carries them for the merge.
    """
    top, lo, hi = value_range(v)
    if q.shape[0] == 0 or k.shape[0] == 0:
        return Partial(_empty_state(spec, q.shape[0], v.shape[1]), top, lo, hi)
    qidx = torch.arange(q0, q0 + q.shape[0])
    job = block_job(spec, q, k, v, qidx, k0, bandwidth, exponents(top))
    if job is None:
        return Partial(_empty_state(spec, q.shape[0], v.shape[1]), top, lo, hi)
    engine = choose(job, spec.engine, describe=False)[0]
    return Partial(engine.run(job), top, lo, hi)


def merge_all(parts: list[Any]) -> Any:
    """Merge partial results over disjoint key chunks, left to right (one tree node)."""
    return functools.reduce(lambda a, b: a.merge(b), parts)


@dataclass
class Nearest:
    """Partial nearest-key search for some queries: the best rank and the values tied at it.

    A monoid like the state: two partial searches over disjoint key sets merge
    by keeping the better rank (adding the tied values at equal ranks).

    Attributes
    ----------
    best : torch.Tensor of shape (r,)
        Best (largest) rank of a visible key; ``-inf`` when none is visible.
    acc : torch.Tensor of shape (r, p)
        Sum of the (scaled) values of the keys at that rank.
    count : torch.Tensor of shape (r,)
        How many keys are at that rank.
    """

    best: torch.Tensor
    acc: torch.Tensor
    count: torch.Tensor

    def merge(self, other: Nearest) -> Nearest:
        """Combine two searches over disjoint key sets."""
        a, b = self.best > other.best, other.best > self.best
        tie = ~(a | b)
        best = torch.maximum(self.best, other.best)
        acc = torch.where(a[:, None], self.acc, other.acc)
        acc = torch.where(tie[:, None], self.acc + other.acc, acc)
        count = torch.where(a, self.count, torch.where(tie, self.count + other.count,
                                                       other.count))
        return Nearest(best, acc, count)


@in_budget
def nearest_block(spec: BlockSpec, merged: Partial, q: np.ndarray, k: np.ndarray,
                  v: np.ndarray, q0: int, k0: int, bandwidth: Any) -> Nearest:
    """The nearest visible keys of this chunk for the queries the merged state left empty.

    The values are divided by the exponents of all keys (``merged``'s), so the
    partial searches of all chunks add.
    """
    rows = torch.nonzero(merged.part.empty_rows).flatten()
    e = merged.exponents
    p = v.shape[1]
    none = Nearest(torch.full((rows.numel(),), -torch.inf, dtype=spec.dtype),
                   torch.zeros(rows.numel(), p, dtype=spec.dtype),
                   torch.zeros(rows.numel(), dtype=spec.dtype))
    if rows.numel() == 0 or k.shape[0] == 0:
        return none
    job = block_job(spec, q[rows.numpy()], k, v, q0 + rows, k0, bandwidth, e)
    if job is None:
        return none
    local = torch.arange(rows.numel())
    r = job.kernel.rank(local, slice(None))
    if job.mask is not None:
        index = torch.arange(job.n)
        r = r.masked_fill(~job.mask.pairs(local, index.expand(local.numel(), -1)), -torch.inf)
    best = r.max(dim=1).values
    hit = ((r == best[:, None]) & torch.isfinite(r)).to(job.dtype)
    return Nearest(best, hit @ job.values, hit.sum(1))


def _finish_job(spec: BlockSpec, m: int, merged: Partial) -> Job:
    """A job that carries what :func:`finish` reads: the values' range, exponents, sizes."""
    exps = merged.exponents
    lo_hi = torch.stack([merged.lo, merged.hi]).to(spec.dtype)
    values = times_power_of_two(lo_hi, -exps[None, :])
    none = torch.zeros(m, 0, dtype=spec.dtype)
    keys = torch.zeros(spec.n, 0, dtype=spec.dtype)
    return Job(None, None, values, none, keys, spec.normalize, exps)  # type: ignore[arg-type]


def finish_block(spec: BlockSpec, merged: Partial, near: Nearest | None,
                 q0: int) -> tuple[np.ndarray, np.ndarray]:
    """The smoothed values and log-sums of one query chunk, from its merged state.

    The empty-query policy acts here, naming queries by their global index.
    """
    state = merged.part
    m = state.acc.shape[0]
    lse = state.lse.numpy().astype(spec.out_dtype, copy=False)
    if spec.normalize and m:
        rows = torch.nonzero(state.empty_rows).flatten()
        where = f"in the query chunk of rows {q0}..{q0 + m - 1}: "
        if rows.numel() and spec.empty == "raise":
            raise NadarayaError(f"{where}{_describe(rows + q0, spec.m)} {_NO_WEIGHT}")
        if rows.numel() and spec.empty == "nearest" and near is not None:
            lost = rows[near.count == 0]
            if lost.numel():
                raise NadarayaError(
                    f"empty='nearest' cannot help, {where}{_describe(lost + q0, spec.m)}: the mask "
                    "hides every key from them. Relax the mask or pass empty='nan'.")
            state = _with_rows(state, rows, near.acc / near.count[:, None])
    out = finish(_finish_job(spec, m, merged), state, "nan")
    result = out.numpy().astype(spec.out_dtype, copy=False)
    return (result[:, 0] if spec.squeeze else result), lse


def _with_rows(state: SmoothState, rows: torch.Tensor, means: torch.Tensor) -> SmoothState:
    """``state`` with the rows ``rows`` replaced by the means ``means`` (weight one)."""
    offset, total, acc = state.offset.clone(), state.total.clone(), state.acc.clone()
    offset[rows], total[rows], acc[rows] = 0.0, 1.0, means.to(acc.dtype)
    if isinstance(state, SignedState):
        magnitude = state.magnitude.clone()
        magnitude[rows] = 0.0
        return SignedState(offset, total, acc, magnitude)
    return SmoothState(offset, total, acc)
