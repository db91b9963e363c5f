"""The streamed engine: key blocks folded into the online log-sum-exp state.

Two passes share one loop shape:

* bounded pass, for kernels that know an upper bound ``c(q)`` of their scores
  (every radial kernel: 0; the exp-dot kernel: Cauchy-Schwarz). Weights are
  ``exp(s - c)`` with no running maximum: a score block, a clamp, an ``exp``
  and one matrix product with ``[values, 1]`` per block. Rows whose total is
  too small for that offset to be exact are redone by the exact pass.
* exact pass: the running-maximum (flash-attention) update, for kernels with
  no bound and for the rows the bounded pass hands over.

Scores below the exponent floor are clamped to it: they weigh less than
``exp(floor)`` relative to the offset, which the row test proves negligible,
and it keeps ``exp`` and the matrix product (weights times values) off the
CPU's slow subnormal path. (Clamping beats zeroing through ``-inf``: ``exp``
of ``-inf`` is itself a slow path in float32.)

The products of each block are added into float64 sums (see
:mod:`~nadaraya.engine._products`): in float32 the result does not drift
with the number of keys.
"""

from __future__ import annotations

import math
import threading

import torch

from ..._config import block_elements, get_config
from ...masks import Visibility
from .._job import Job, exp_floor
from .._products import RowSums, augmented_values
from .._state import SmoothState
from .._threads import map_blocks

__all__ = ["StreamedEngine", "dot_form_tolerance"]


def dot_form_tolerance(dtype: torch.dtype) -> float:
    """Largest score error accepted from the dot-product form of a kernel."""
    return 2.0**-40 if dtype == torch.float64 else 2.0**-17


class _Scorer:
    """Produces score blocks, through the kernel's dot form when it is exact enough."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.dot = None
        if job.kernel.q.shape[1] > 4:
            form = job.kernel.dot_form()
            if form is not None and job.kernel.dot_error() <= dot_form_tolerance(job.dtype):
                self.dot = form

    @property
    def method(self) -> str:
        return "matrix product of the kernel's dot form" if self.dot else "direct differences"

    def __call__(self, rows: slice | torch.Tensor, cols: slice,
                 buffer: torch.Tensor) -> torch.Tensor:
        mb = rows.stop - rows.start if isinstance(rows, slice) else rows.shape[0]
        out = buffer[: mb * (cols.stop - cols.start)].view(mb, cols.stop - cols.start)
        if self.dot is not None:
            qa, ka = self.dot
            return torch.mm(qa[rows], ka[cols].T, out=out)
        return self.job.kernel.score(rows, cols, out)


def _floor_exp_(s: torch.Tensor, floor: float) -> torch.Tensor:
    """``exp`` in place of scores clamped below at ``floor``."""
    return s.clamp_(min=floor).exp_()


def _visible(job: Job, rows: slice | torch.Tensor, cols: slice) -> torch.Tensor | None:
    """Visibility of a block; None when fully visible."""
    mask = job.mask
    if mask is None:
        return None
    if isinstance(rows, slice):
        return mask.block(rows, cols)
    index = torch.arange(cols.start, cols.stop, device=job.device).expand(rows.shape[0], -1)
    return mask.pairs(rows, index)


def _status(job: Job, rows: slice | torch.Tensor, cols: slice) -> Visibility:
    if job.mask is None:
        return Visibility.FULL
    if isinstance(rows, slice):
        return job.mask.status(rows, cols)
    return Visibility.PARTIAL


class StreamedEngine:
    """Exact smoothing in bounded memory for any kernel and any mask."""

    name = "streamed"

    def refuse(self, job: Job) -> str | None:
        if job.requires_grad:
            return "inputs require grad and this engine updates blocks in place"
        return None

    def cost(self, job: Job) -> float:
        return 1.0 * job.m * job.n * (job.p + 4)

    def _blocks(self, job: Job) -> tuple[int, int]:
        config = get_config()
        if job.device.type != "cpu":
            # one block at a time on an accelerator, as large as the budget allows: the
            # time goes into launches, not into a cache the block must fit
            budget = max(1, block_elements(job.dtype.itemsize, buffers=3))
            side = max(config.query_block, math.isqrt(budget))
            nb = max(1, min(job.n, budget // min(job.m, side)))
            mb = max(1, min(job.m, budget // nb))
            return mb, nb
        # every thread holds its own score block (see map_blocks), sized for its cache
        budget = max(1, block_elements(job.dtype.itemsize, buffers=3) // torch.get_num_threads())
        nb = max(1, min(config.key_block, job.n, budget))
        mb = max(1, min(config.query_block, job.m, budget // nb))
        return mb, nb

    def run(self, job: Job) -> SmoothState:
        scorer = _Scorer(job)
        mb, nb = self._blocks(job)
        vt = augmented_values(job.values)
        local = threading.local()

        def rows_state(start: int) -> SmoothState:
            buffer = getattr(local, "buffer", None)
            if buffer is None:
                buffer = local.buffer = torch.empty(mb * nb, dtype=job.dtype,
                                                    device=job.device)
            return self._rows(job, scorer, slice(start, min(start + mb, job.m)), nb, vt,
                              buffer)

        parts = map_blocks(rows_state, range(0, job.m, mb), device=job.device)
        if not parts:
            return SmoothState.empty(0, job.p, dtype=job.dtype, device=job.device)
        return SmoothState(*(torch.cat(x) for x in zip(
            *((s.offset, s.total, s.acc) for s in parts), strict=True)))

    def _rows(self, job: Job, scorer: _Scorer, rows: slice, nb: int, vt: torch.Tensor,
              buffer: torch.Tensor) -> SmoothState:
        """The state of one block of query rows over all keys."""
        bound = job.kernel.upper_bound(rows)
        if bound is None:
            return self._exact(job, scorer, rows, nb, vt, buffer)
        state = self._bounded(job, scorer, rows, bound, nb, vt, buffer)
        weak = self._too_small(job, state)
        if bool(weak.any()):
            idx = torch.nonzero(weak).flatten()
            redo = self._exact(job, scorer, idx + rows.start, nb, vt, buffer)
            state.offset[idx], state.total[idx], state.acc[idx] = (
                redo.offset, redo.total, redo.acc)
        return state

    @staticmethod
    def _too_small(job: Job, state: SmoothState) -> torch.Tensor:
        # Clamped scores each add at most exp(floor); ask that together they
        # stay below eps * e^-5 of the total.
        floor = exp_floor(job.dtype)
        eps = torch.finfo(job.dtype).eps
        limit = math.exp(floor + math.log(max(job.n, 1)) - math.log(eps) + 5.0)
        return ~(state.total > limit)

    def _bounded(self, job: Job, scorer: _Scorer, rows: slice, bound: torch.Tensor,
                 nb: int, vt: torch.Tensor, buffer: torch.Tensor) -> SmoothState:
        floor = exp_floor(job.dtype)
        sums = RowSums(job.p + 1, rows.stop - rows.start, job.device)
        shift = bound[:, None]
        zero_shift = bool((bound == 0).all())
        for cstart in range(0, job.n, nb):
            cols = slice(cstart, min(cstart + nb, job.n))
            status = _status(job, rows, cols)
            if status is Visibility.EMPTY:
                continue
            s = scorer(rows, cols, buffer)
            if not zero_shift:
                s.sub_(shift)
            _floor_exp_(s, floor)
            if status is Visibility.PARTIAL:
                visible = _visible(job, rows, cols)
                s.masked_fill_(~visible, 0.0)
            sums.add(s, vt[:, cols])
        return sums.state(bound.clone(), job.dtype)

    def _exact(self, job: Job, scorer: _Scorer, rows: slice | torch.Tensor, nb: int,
               vt: torch.Tensor, buffer: torch.Tensor) -> SmoothState:
        floor = exp_floor(job.dtype)
        size = rows.stop - rows.start if isinstance(rows, slice) else rows.shape[0]
        top = torch.full((size,), -torch.inf, dtype=job.dtype, device=job.device)
        sums = RowSums(job.p + 1, size, job.device)
        for cstart in range(0, job.n, nb):
            cols = slice(cstart, min(cstart + nb, job.n))
            status = _status(job, rows, cols)
            if status is Visibility.EMPTY:
                continue
            s = scorer(rows, cols, buffer)
            visible = _visible(job, rows, cols) if status is Visibility.PARTIAL else None
            if visible is not None:
                s.masked_fill_(~visible, -torch.inf)
            new_top = torch.maximum(top, s.max(dim=1).values)
            safe = torch.where(torch.isinf(new_top), torch.zeros_like(new_top), new_top)
            # the offsets are numbers of the job's dtype; their difference is exact in float64
            sums.rescale(torch.exp(top.to(torch.float64) - safe.to(torch.float64)))
            _floor_exp_(s.sub_(safe[:, None]), floor)
            if visible is not None:
                s.masked_fill_(~visible, 0.0)
            sums.add(s, vt[:, cols])
            top = new_top
        # Rows whose every visible score is -inf carry only clamped dust: empty.
        sums.sums[:, torch.isinf(top)] = 0.0
        return sums.state(top, job.dtype)
