"""The pruned engine: streamed over the key blocks whose weight can matter.

A radial kernel's weight falls with distance, and often it falls below
rounding well inside the data: a Gaussian of bandwidth ``h`` weighs less than
``2^-60`` beyond about ``9.1 h``. The streamed engine still evaluates every
pair; this engine proves most of them negligible block by block and skips
them.

* Queries and keys are put in a spatially coherent order (sorted in one
  dimension, a k-d split order otherwise) and cut into blocks, each with its
  bounding box in the space where the kernel is radial.
* For a block of queries, key blocks are visited nearest box first. The
  kernel's profile at the smallest box distance bounds the weight of every
  pair of a block, so the blocks not yet visited weigh at most the sum of
  their bounds (a suffix sum, computed once per query block).
* Visiting stops once that bound is at most ``PRUNE_TOLERANCE * eps`` of the
  smallest row total found so far. Together the skipped weights move each
  result by less than ``2^-8`` of a rounding error of the largest value: the
  answer is the streamed engine's up to rounding.

Weights are folded as in the streamed engine's bounded pass (radial scores
peak at 0, so no running maximum); rows whose total is too small for that are
redone by its exact pass over every key. Masks are applied pair by pair on
the original indices. The engine refuses when a sample of query blocks shows
that most key blocks carry weight above rounding (more than a tenth or so when
the compiled engine can run the job): then the compiled, fused or streamed
engine, which do not pay for the order and the bounds, are faster. A sample
of point pairs, scored before any sorting, gives a lower bound of that share
(:meth:`PrunedEngine._share_floor`), so a problem whose keys mostly matter is
passed over without paying for the sort.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import torch

from ..._config import get_config
from ...kernels import BoundKernel, RadialKernel
from .._job import Job, exp_floor
from .._products import RowSums, augmented_values
from .._state import SmoothState
from .._threads import map_blocks
from ..compiled import CompiledEngine
from ..streamed._engine import StreamedEngine, _Scorer

__all__ = ["MAX_SHARE_BESIDE_COMPILED", "MAX_VISITED_SHARE", "PRUNE_TOLERANCE", "PrunedEngine"]

# Skipped blocks weigh at most this many machine epsilons of a row's total.
PRUNE_TOLERANCE = 2.0**-8
# Above this estimated share of key blocks visited, the fused or streamed
# engine is faster (no ordering, no bounds, a fused kernel).
MAX_VISITED_SHARE = 0.6
# The same where the compiled engine can run the job: its vectorized loop over
# every pair takes about as long as this engine visiting 12% of the blocks
# (1-D task, n = m = 1e5, float32 and float64; benchmarks/bench_engine.py).
MAX_SHARE_BESIDE_COMPILED = 0.12
# Largest key block: finer blocks prune closer to the kernel's reach.
_KEY_BLOCK = 1024
# Query blocks sampled to estimate the visited share.
_SAMPLE_BLOCKS = 64
# Queries and keys sampled for the share's lower bound (no sort).
_FLOOR_QUERIES, _FLOOR_KEYS = 64, 2048


def spatial_order(points: np.ndarray, leaf: int) -> np.ndarray:
    """An order of the points in which each run of ``leaf`` points is compact.

    Parameters
    ----------
    points : ndarray of shape (N, e)
    leaf : int
        Block size the order is cut into.

    Returns
    -------
    ndarray of shape (N,), int64
        Sorted along the single feature when ``e == 1``; otherwise a k-d
        order: each group splits along its widest feature at a multiple of
        ``leaf`` near its median, until groups hold at most ``leaf`` points.
    """
    n, e = points.shape
    if e == 1:
        return np.argsort(points[:, 0], kind="stable")
    if e == 0 or n <= leaf:
        return np.arange(n)
    done: list[np.ndarray] = []
    stack = [np.arange(n)]
    while stack:
        idx = stack.pop()
        if idx.shape[0] <= leaf:
            done.append(idx)
            continue
        sub = points[idx]
        axis = int(np.argmax(sub.max(0) - sub.min(0)))
        cut = max(leaf, (idx.shape[0] // 2 // leaf) * leaf)
        part = np.argpartition(sub[:, axis], cut)
        stack.append(idx[part[cut:]])  # popped after the lower half: ascending
        stack.append(idx[part[:cut]])
    return np.concatenate(done)


def _boxes(points: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounding boxes ``(blocks, e)`` (low, high) of consecutive runs of ``size`` points."""
    n, e = points.shape
    blocks = -(-n // size)
    pad = blocks * size - n
    lo = torch.cat([points, points[-1:].expand(pad, e)]) if pad else points
    lo = lo.reshape(blocks, size, e)
    return lo.amin(1), lo.amax(1)


def _box_sqdist(lo: torch.Tensor, hi: torch.Tensor, los: torch.Tensor,
                his: torch.Tensor, *, far: bool = False) -> torch.Tensor:
    """Smallest (or, with ``far``, largest) squared distance from one box to each of ``los``."""
    if far:
        gap = torch.maximum(his - lo, hi - los)
    else:
        gap = (torch.maximum(los - hi, lo - his)).clamp_(min=0)
    return gap.square().sum(1)


@dataclass
class _Plan:
    """Both point sets in block order, with their boxes."""

    qperm: torch.Tensor  # (m,) original index of each sorted query
    kperm: torch.Tensor  # (n,)
    kernel: BoundKernel  # the kernel on the sorted points
    qlo: torch.Tensor
    qhi: torch.Tensor
    klo: torch.Tensor
    khi: torch.Tensor
    counts: torch.Tensor  # (key blocks,) keys in each
    mb: int
    nb: int
    share: float  # estimated share of key blocks visited


def _block_bounds(kernel: RadialKernel, plan: _Plan, b: int,
                  far: bool = False) -> torch.Tensor:
    """Log-weight bound ``(key blocks,)`` of every pair of query block ``b`` with each key block."""
    d2 = _box_sqdist(plan.qlo[b], plan.qhi[b], plan.klo, plan.khi, far=far)
    return kernel.profile(d2)


def _visit_order(kernel: RadialKernel, plan: _Plan, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Key blocks nearest first, and the log of the bound on all blocks from each on."""
    lw = _block_bounds(kernel, plan, b) + plan.counts.log()
    order = torch.argsort(lw, descending=True)
    suffix = torch.logcumsumexp(lw[order].flip(0), 0).flip(0)
    return order, suffix


class PrunedEngine:
    """Exact smoothing for radial kernels, skipping key blocks below rounding."""

    name = "pruned"

    def refuse(self, job: Job) -> str | None:
        if job.requires_grad:
            return "inputs require grad and this engine updates blocks in place"
        if job.device.type != "cpu":
            return ("it runs on the CPU only: its test after every block would wait on the "
                    f"{job.device.type} device")
        if not isinstance(job.kernel.kernel, RadialKernel):
            return "the kernel is not radial: no distance bounds its weights"
        if job.m == 0 or job.n <= self._key_block(job):
            return "the keys fit in one block: there is nothing to skip"
        floor = self._share_floor(job)
        if floor > MAX_VISITED_SHARE:
            return (f"at least about {floor:.0%} of key blocks carry weight above rounding; "
                    "visiting every block without bounds is faster")
        if floor > MAX_SHARE_BESIDE_COMPILED and self._beside_compiled(job):
            return None  # defer() passes it over; the spatial sort is not worth paying to say so
        plan = self._plan(job)
        if plan.share > MAX_VISITED_SHARE:
            return (f"about {plan.share:.0%} of key blocks carry weight above rounding; "
                    "visiting every block without bounds is faster")
        return None

    def defer(self, job: Job) -> str | None:
        """Why the automatic choice should pass over this engine although it can run ``job``."""
        if not self._beside_compiled(job):
            return None
        floor = self._share_floor(job)
        share, about = (floor, "at least about") if floor > MAX_SHARE_BESIDE_COMPILED else (
            self._plan(job).share, "about")
        if share > MAX_SHARE_BESIDE_COMPILED:
            return (f"{about} {share:.0%} of key blocks carry weight above rounding; the "
                    "compiled engine's loop over every pair is faster")
        return None

    @staticmethod
    def _beside_compiled(job: Job) -> bool:
        return job.kernel.cached("pruned_beside_compiled",
                                 lambda: CompiledEngine().refuse(job) is None)

    @staticmethod
    def _share_floor(job: Job) -> float:
        """A lower bound of the visited share on a sample of pairs, without the spatial sort.

        No row total exceeds ``n`` times the kernel's peak, so a key weighing
        more than ``PRUNE_TOLERANCE * eps * n`` times the peak is visited
        whatever the total, and so is the key block holding it: the share of
        such keys among a query's keys bounds from below the share of key
        blocks visited for its block. Averaged over up to 64 queries and 2048
        keys spread evenly through the inputs; 0 under a mask (it hides pairs
        the sample cannot see).
        """
        if job.mask is not None:
            return 0.0

        def floor() -> float:
            kernel = job.kernel.kernel
            assert isinstance(kernel, RadialKernel)
            qi = torch.from_numpy(np.unique(np.linspace(0, job.m - 1, min(job.m, _FLOOR_QUERIES))
                                            .astype(np.int64)))
            kj = torch.from_numpy(np.unique(np.linspace(0, job.n - 1, min(job.n, _FLOOR_KEYS))
                                            .astype(np.int64)))
            peak = float(kernel.profile(torch.zeros(1, dtype=job.dtype)).max())
            log_tol = math.log(PRUNE_TOLERANCE * torch.finfo(job.dtype).eps)
            mq, mk = job.kernel.metric_points()
            d2 = torch.cdist(mq[qi.to(job.device)], mk[kj.to(job.device)]).square()
            scores = kernel.profile(d2)
            return float((scores > peak + log_tol + math.log(job.n)).double().mean())

        return job.kernel.cached("pruned_share_floor", floor)

    def cost(self, job: Job) -> float:
        share = self._plan(job).share if job.n > self._key_block(job) else 1.0
        return share * job.m * job.n * (job.p + 4)

    @staticmethod
    def _key_block(job: Job) -> int:
        return max(1, min(get_config().key_block, _KEY_BLOCK))

    def _plan(self, job: Job) -> _Plan:
        return job.kernel.cached("pruned_plan", lambda: self._make_plan(job))

    def _make_plan(self, job: Job) -> _Plan:
        kernel = job.kernel.kernel
        assert isinstance(kernel, RadialKernel)
        mq, mk = job.kernel.metric_points()
        nb = self._key_block(job)
        mb = max(1, min(get_config().query_block, job.m))
        qperm = torch.from_numpy(spatial_order(mq.detach().cpu().numpy(), mb)).to(job.device)
        kperm = torch.from_numpy(spatial_order(mk.detach().cpu().numpy(), nb)).to(job.device)
        qs, ks = mq[qperm], mk[kperm]
        qlo, qhi = _boxes(qs, mb)
        klo, khi = _boxes(ks, nb)
        counts = torch.full((klo.shape[0],), float(nb), dtype=job.dtype, device=job.device)
        counts[-1] = job.n - nb * (klo.shape[0] - 1)
        sorted_kernel = BoundKernel(job.kernel.kernel, job.kernel.q[qperm], job.kernel.k[kperm])
        plan = _Plan(qperm, kperm, sorted_kernel, qlo, qhi, klo, khi, counts, mb, nb, 1.0)
        plan.share = self._estimate_share(job, kernel, plan)
        return plan

    @staticmethod
    def _estimate_share(job: Job, kernel: RadialKernel, plan: _Plan) -> float:
        """Share of key blocks visited, on a sample of query blocks.

        Each row's total is bounded below by its farthest point in the nearest
        key block (one key fewer, for a mask that hides a row's own key).
        """
        blocks = plan.qlo.shape[0]
        sample = np.unique(np.linspace(0, blocks - 1, min(blocks, _SAMPLE_BLOCKS)).astype(int))
        log_tol = math.log(PRUNE_TOLERANCE * torch.finfo(job.dtype).eps)
        visited = 0
        for b in sample:
            order, suffix = _visit_order(kernel, plan, int(b))
            near = int(order[0])
            far = _block_bounds(kernel, plan, int(b), far=True)[near]
            floor = float(far) + math.log(max(float(plan.counts[near]) - 1.0, 1.0))
            visited += max(1, int((suffix > floor + log_tol).sum()))
        return visited / (len(sample) * plan.klo.shape[0])

    def run(self, job: Job) -> SmoothState:
        kernel = job.kernel.kernel
        assert isinstance(kernel, RadialKernel)
        plan = self._plan(job)
        unsorted = augmented_values(job.values)  # for rows redone by the exact pass
        vt = unsorted[:, plan.kperm].contiguous()
        local = threading.local()

        def block_state(b: int) -> SmoothState:
            buffer = getattr(local, "buffer", None)
            if buffer is None:
                buffer = local.buffer = torch.empty(plan.mb * plan.nb, dtype=job.dtype,
                                                    device=job.device)
            return self._rows(job, kernel, plan, b, vt, unsorted, buffer)

        parts = map_blocks(block_state, range(plan.qlo.shape[0]), device=job.device)
        offset, total, acc = (torch.cat(x) for x in zip(
            *((s.offset, s.total, s.acc) for s in parts), strict=True))
        state = SmoothState(torch.empty_like(offset), torch.empty_like(total),
                            torch.empty_like(acc))
        state.offset[plan.qperm], state.total[plan.qperm], state.acc[plan.qperm] = (
            offset, total, acc)
        return state

    def _rows(self, job: Job, kernel: RadialKernel, plan: _Plan, b: int, vt: torch.Tensor,
              unsorted: torch.Tensor, buffer: torch.Tensor) -> SmoothState:
        """The state of query block ``b`` (in sorted order) over the key blocks that matter.

        ``vt`` holds ``[values, 1]^T`` in the keys' block order, ``unsorted`` in
        their original order (for the streamed engine's exact pass).
        """
        floor = exp_floor(job.dtype)
        log_tol = math.log(PRUNE_TOLERANCE * torch.finfo(job.dtype).eps)
        rows = slice(b * plan.mb, min((b + 1) * plan.mb, job.m))
        size = rows.stop - rows.start
        order, suffix = _visit_order(kernel, plan, b)
        order_list, suffix_list = order.tolist(), suffix.tolist()
        sums = RowSums(job.p + 1, size, job.device)
        qidx = plan.qperm[rows]
        for c, rest in zip(order_list, suffix_list, strict=True):
            if rest == -math.inf:
                break
            smallest = float(sums.total.min())
            if smallest > 0 and rest <= log_tol + math.log(smallest):
                break
            cols = slice(c * plan.nb, min((c + 1) * plan.nb, job.n))
            width = cols.stop - cols.start
            s = plan.kernel.score(rows, cols, buffer[: size * width].view(size, width))
            s.clamp_(min=floor).exp_()
            if job.mask is not None:
                kidx = plan.kperm[cols]
                visible = job.mask.pairs(qidx, kidx.expand(size, width))
                s.masked_fill_(~visible, 0.0)
            sums.add(s, vt[:, cols])
        state = sums.state(torch.zeros(size, dtype=job.dtype, device=job.device), job.dtype)
        weak = StreamedEngine._too_small(job, state)
        if bool(weak.any()):
            idx = torch.nonzero(weak).flatten()
            streamed = StreamedEngine()
            _, nb = streamed._blocks(job)
            redo = streamed._exact(job, _Scorer(job), qidx[idx], nb, unsorted,
                                   torch.empty(idx.shape[0] * nb, dtype=job.dtype,
                                               device=job.device))
            state.offset[idx], state.total[idx], state.acc[idx] = (
                redo.offset, redo.total, redo.acc)
        return state
