"""The neighbors engine: visit only the keys that can carry weight.

Each query's candidate keys come from one *source*, whichever promises the
fewest (query, key) pairs:

* a ball: every key within a radius of the query, found by a dual KD-tree
  walk (``scipy.spatial.cKDTree.sparse_distance_matrix``), in the space where
  a compact kernel is radial (radius: its support; for a product, the ball
  around its compact factors) or in the raw space of a
  :class:`~nadaraya.masks.Radius` mask;
* a sparse matrix mask: its stored entries, row by row;
* a table: a mask's own neighbour list (:class:`~nadaraya.masks.KNearest`,
  see :meth:`~nadaraya.masks.BoundMask.candidates`).

Scores come from the kernel's pair form, the rest of the mask hides pairs,
and each query reduces in the log domain (shift by its largest score) into a
:class:`~nadaraya.engine.SmoothState`, so the result is the dense engine's
up to rounding. Work and memory follow the number of candidate pairs: queries
go in chunks whose pairs fit the working-memory budget. Trees are built on the
CPU; scores and sums are computed on the inputs' device.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..._config import get_config
from ...kernels import BoundKernel, ProductKernel
from ...masks import And, BoundMask, Candidates, Mask, MatrixMask, Radius
from .._job import Job
from .._products import WIDE
from .._state import SmoothState
from .._threads import map_blocks, on_worker

__all__ = ["MAX_PAIR_FRACTION", "NeighborsEngine"]

# Above this share of all m * n pairs, scanning every key (streamed engine) is
# faster than gathering candidates pair by pair. A tree walk costs more per
# pair as its dimension grows: a ball in ``e`` dimensions pays off below
# ``BALL_SHARE / e`` (measured: about 30 ns a pair streamed, against 90 ns in
# 2-D and 250 ns in 6-D through the tree).
MAX_PAIR_FRACTION = 0.25
BALL_SHARE = 0.6
_SAMPLE_QUERIES = 2048
_SAMPLE_KEYS = 16384


@dataclass
class _Ball:
    """Keys within ``radius`` of each query, in the coordinates ``qpts`` / ``kpts``."""

    what: str
    qpts: np.ndarray
    kpts: np.ndarray
    radius: float
    filters: list[BoundMask]
    pairs: float = 0.0
    sample_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sample_counts: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class _Sparse:
    """The stored entries of a sparse matrix mask (CSR)."""

    what: str
    matrix: Any
    filters: list[BoundMask]
    pairs: float


@dataclass
class _Table:
    """Padded neighbour lists ``(m, K)`` given by a mask, a block of queries at a time."""

    what: str
    candidates: Candidates
    filters: list[BoundMask]
    pairs: float


_Source = _Ball | _Sparse | _Table


# -- finding the sources ----------------------------------------------------------
def _numpy(x: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.float64)


def _conjuncts(mask: BoundMask) -> list[BoundMask]:
    """The masks whose intersection is ``mask`` (``a & b & c`` gives three)."""
    if isinstance(mask.mask, And):
        left, right = mask.state["left"], mask.state["right"]
        return _conjuncts(left) + _conjuncts(right)  # type: ignore[arg-type]
    return [mask]


def _compact_parts(bound: BoundKernel) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """Metric points and support radius of every compact radial factor of a kernel."""
    kernel = bound.kernel
    if kernel.support is not None:
        points = bound.metric_points()
        return [] if points is None else [(points[0], points[1], float(kernel.support))]
    if isinstance(kernel, ProductKernel):
        return [part for b in kernel._bound_parts for part in _compact_parts(b)]
    return []


def _sources(job: Job) -> list[_Source]:
    found: list[_Source] = []
    parts = _compact_parts(job.kernel)
    if parts:
        # Inside every factor's support means inside this ball of their joint space.
        q = torch.cat([p[0] for p in parts], 1)
        k = torch.cat([p[1] for p in parts], 1)
        radius = math.sqrt(sum(p[2] ** 2 for p in parts))
        filters = [job.mask] if job.mask is not None else []
        if q.shape[1] > 0:  # on no columns the support holds every key: no ball
            found.append(_Ball("the kernel's support", _numpy(q), _numpy(k), radius, filters))
    if job.mask is None:
        return found
    conjuncts = _conjuncts(job.mask)
    for part in conjuncts:
        others = [p for p in conjuncts if p is not part]
        what = f"the mask {part.mask!r}"
        if isinstance(part.mask, Radius):
            found.append(_Ball(what, _numpy(job.queries), _numpy(job.keys), part.mask.radius,
                               [job.mask]))
        elif isinstance(part.mask, MatrixMask):
            if part.mask.sparse:
                matrix = part.mask.matrix
                if not matrix.has_canonical_format:  # a key listed twice counts once
                    matrix = matrix.copy()
                    matrix.sum_duplicates()
                found.append(_Sparse(what, matrix, others, float(matrix.nnz)))
        elif type(part.mask)._candidates is not Mask._candidates:
            cand = part.candidates()
            if cand is not None:
                found.append(_Table(what, cand, others, float(cand.count)))
    return found


def _inflate(radius: float, job: Job) -> float:
    # The tree measures in float64, the kernel in the job's dtype: take a hair
    # more, and let the pair scores decide.
    return radius * (1.0 + 64.0 * torch.finfo(job.dtype).eps) + 1e-300


def _estimate(ball: _Ball, job: Job) -> None:
    """Expected pairs of a ball, counted on a sample of queries and keys."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(0)
    m, n = ball.qpts.shape[0], ball.kpts.shape[0]
    rows = (np.sort(rng.choice(m, _SAMPLE_QUERIES, replace=False)) if m > _SAMPLE_QUERIES
            else np.arange(m))
    keys = rng.choice(n, _SAMPLE_KEYS, replace=False) if n > _SAMPLE_KEYS else np.arange(n)
    counts = cKDTree(ball.kpts[keys]).query_ball_point(
        ball.qpts[rows], _inflate(ball.radius, job), return_length=True)
    ball.sample_rows = rows
    ball.sample_counts = np.asarray(counts, dtype=np.float64) * (n / len(keys))
    ball.pairs = float(ball.sample_counts.sum()) * (m / len(rows))


def _plan(job: Job) -> _Source | None:
    """The source with the fewest candidate pairs (None when there is none)."""

    def make() -> _Source | None:
        best = None
        for source in _sources(job):
            if isinstance(source, _Ball):
                _estimate(source, job)
            if best is None or source.pairs < best.pairs:
                best = source
        return best

    return job.kernel.cached("neighbors_plan", make)


# -- folding pairs into the state -------------------------------------------------
def _bytes_per_pair(job: Job) -> int:
    e = job.kernel.q.shape[1]
    return 48 + job.dtype.itemsize * (3 * e + 2 * job.p + 6)


def _chunk_pairs(job: Job) -> int:
    """Pairs per chunk within the budget (a tree's output, 24 bytes a pair, included)."""
    budget = get_config().working_memory * 2**20
    return max(1, int(budget // (_bytes_per_pair(job) + 24)))


def _hide(filters: list[BoundMask], rows: torch.Tensor, index: torch.Tensor,
          hidden: torch.Tensor | None = None) -> torch.Tensor | None:
    """Pairs (``rows[i]``, ``index[i, t]``) that one of ``filters`` hides."""
    for f in filters:
        unseen = ~f.pairs(rows, index)
        hidden = unseen if hidden is None else hidden.logical_or_(unseen)
    return hidden


def _fold_table(kernel: BoundKernel, values: torch.Tensor, index: torch.Tensor,
                hidden: torch.Tensor | None, part: SmoothState) -> None:
    """Reduce each query of ``kernel`` over its keys ``index (c, K)`` into ``part``.

    The sums over a query's keys are taken in float64 (then rounded to ``part``'s dtype).
    """
    s = kernel.pairs(slice(None), index) if index.shape[1] else kernel.q.new_empty(index.shape)
    if hidden is not None:
        s.masked_fill_(hidden, -torch.inf)
    top = s.amax(1) if s.shape[1] else s.new_full((s.shape[0],), -torch.inf)
    safe = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w = s.sub_(safe[:, None]).exp_()
    part.offset.copy_(top)
    part.total.copy_(w.sum(1, dtype=WIDE))
    if values.shape[1] == 1:
        part.acc[:, 0] = (w * values[index, 0]).sum(1, dtype=WIDE)
    elif values.shape[1]:
        part.acc.copy_((values[index] * w[:, :, None]).sum(1, dtype=WIDE))


def _fold_pairs(kernel: BoundKernel, values: torch.Tensor, local: torch.Tensor,
                cols: torch.Tensor, hidden: torch.Tensor | None, part: SmoothState) -> None:
    """Merge the pairs (query ``local``, key ``cols``) of ``kernel`` into ``part``.

    ``part`` may be wider than the scores (float64 sums of float32 pairs); its
    offsets are scores, so the weights are formed exactly as in the scores' dtype.
    """
    s = kernel.pairs(local, cols[:, None])[:, 0]
    if hidden is not None:
        s.masked_fill_(hidden, -torch.inf)
    top = s.new_full(part.offset.shape, -torch.inf).scatter_reduce_(0, local, s, reduce="amax")
    new = torch.maximum(part.offset, top.to(part.offset.dtype))
    safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
    rescale = torch.exp(part.offset - safe)
    part.total.mul_(rescale)
    part.acc.mul_(rescale[:, None])
    w = s.sub_(safe.to(s.dtype)[local]).exp_()
    wide = part.total.dtype
    part.total.index_add_(0, local, w.to(wide))
    if values.shape[1] == 1:
        part.acc[:, 0].index_add_(0, local, values[cols, 0].mul_(w).to(wide))
    elif values.shape[1]:
        part.acc.index_add_(0, local, values[cols].mul_(w[:, None]).to(wide))
    part.offset.copy_(new)


def _wide_state(rows: int, job: Job) -> SmoothState:
    """An empty state with float64 sums, for pairs folded over several chunks."""
    return SmoothState.empty(rows, job.p, dtype=WIDE, device=job.device)


# -- the three sources --------------------------------------------------------------
def _run_table(job: Job, table: _Table, state: SmoothState) -> None:
    cand = table.candidates
    width = max(cand.width, 1)
    # the mask's preferred order of the queries (nearby ones together), if any
    order = None if cand.order is None else cand.order.to(job.device)

    def fold(rows: slice) -> None:
        ids = torch.arange(rows.start, rows.stop, device=job.device) if order is None \
            else order[rows]
        index, valid = cand.rows(ids)
        index = index.to(job.device)
        hidden = None if cand.all_valid else ~valid.to(job.device)
        hidden = _hide(table.filters, ids, index, hidden)
        bound = BoundKernel(job.kernel.kernel, job.kernel.q[ids], job.kernel.k)
        if order is None:
            _fold_table(bound, job.values, index, hidden, state[rows])
            return
        part = SmoothState.empty(ids.shape[0], job.p, dtype=job.dtype, device=job.device)
        _fold_table(bound, job.values, index, hidden, part)
        state.offset[ids], state.total[ids], state.acc[ids] = part.offset, part.total, part.acc

    # each of the threads holds one chunk at a time
    threads = torch.get_num_threads() if job.device.type == "cpu" else 1
    step = max(1, _chunk_pairs(job) // (width * threads))
    chunks = [slice(a, min(a + step, job.m)) for a in range(0, job.m, step)]
    map_blocks(fold, chunks, device=job.device)


def _run_sparse(job: Job, sparse: _Sparse, state: SmoothState) -> None:
    csr = sparse.matrix
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    chunk = _chunk_pairs(job)
    targets = np.arange(chunk, indptr[-1], chunk)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(indptr, targets), [job.m]]))
    for a, b in itertools.pairwise(cuts.tolist()):
        lo, hi = int(indptr[a]), int(indptr[b])
        counts = np.diff(indptr[a:b + 1])
        local_np = np.repeat(np.arange(b - a, dtype=np.int64), counts)
        cols_np = np.asarray(csr.indices[lo:hi], dtype=np.int64)
        bound = BoundKernel(job.kernel.kernel, job.kernel.q[a:b], job.kernel.k)
        part = _wide_state(b - a, job)
        for s in range(0, hi - lo, chunk):
            local = torch.from_numpy(local_np[s:s + chunk]).to(job.device)
            cols = torch.from_numpy(cols_np[s:s + chunk]).to(job.device)
            hidden = _hide(sparse.filters, local + a, cols[:, None])
            _fold_pairs(bound, job.values, local, cols,
                        None if hidden is None else hidden[:, 0], part)
        state.offset[a:b], state.total[a:b], state.acc[a:b] = part.offset, part.total, part.acc


def _spatial_order(points: np.ndarray) -> np.ndarray:
    """A permutation that puts nearby points next to each other (a KD-tree's leaf order)."""
    from scipy.spatial import cKDTree

    return cKDTree(points, balanced_tree=False, compact_nodes=False).indices


def _ball_cuts(ball: _Ball, order: np.ndarray, chunk: int) -> np.ndarray:
    """Cut the queries, in ``order``, into runs of about ``chunk`` expected pairs."""
    m = ball.qpts.shape[0]
    if ball.pairs + m <= chunk:
        return np.array([0, m])
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    # Each query expects the count of the next sampled query in that order,
    # and at least one pair: no chunk holds more than ``chunk`` queries.
    pos = rank[ball.sample_rows]
    sorter = np.argsort(pos)
    pos, counts = pos[sorter], ball.sample_counts[sorter]
    nearest = np.searchsorted(pos, np.arange(m)).clip(max=len(pos) - 1)
    cumulative = np.cumsum(counts[nearest] + 1.0)
    targets = np.arange(1, int(cumulative[-1] // chunk) + 1) * float(chunk)
    return np.unique(np.concatenate([[0], np.searchsorted(cumulative, targets), [m]]))


def _key_tree(kpts: np.ndarray) -> tuple[np.ndarray, Any]:
    """Keys in a spatial order, and a KD-tree on them in that order."""
    from scipy.spatial import cKDTree

    order = _spatial_order(kpts)
    return order, cKDTree(kpts[order])


def _prefetched(tasks: list[Callable[[], Any]]) -> Iterator[Any]:
    """The tasks' results in order, each computed in a thread while the last is used.

    A tree walk releases the GIL, so it overlaps the folding of the chunk before.
    """
    from concurrent.futures import ThreadPoolExecutor

    if len(tasks) < 2:
        yield from (task() for task in tasks)
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(tasks[0])
        for i in range(len(tasks)):
            result = pending.result()
            if i + 1 < len(tasks):
                pending = pool.submit(tasks[i + 1])
            yield result


def _fold_found(job: Job, ball: _Ball, arrays: tuple[torch.Tensor, ...], a: int, b: int,
                found: np.ndarray, chunk: int, part: SmoothState) -> None:
    """Fold the tree's pairs of the sorted queries ``a:b`` into ``part``."""
    queries, keys, values, qorder, korder = arrays
    dev = job.device
    bound = BoundKernel(job.kernel.kernel, queries[a:b], keys)
    for s in range(0, len(found), chunk):
        piece = found[s:s + chunk]
        local = torch.from_numpy(np.ascontiguousarray(piece["i"])).to(dev)
        cols = torch.from_numpy(np.ascontiguousarray(piece["j"])).to(dev)
        hidden = _hide(ball.filters, qorder[local + a], korder[cols][:, None])
        _fold_pairs(bound, values, local, cols, None if hidden is None else hidden[:, 0], part)


def _run_ball(job: Job, ball: _Ball, state: SmoothState) -> None:
    """Pairs within the ball, chunk by chunk of queries, in a spatial order.

    Queries and keys are sorted along KD-trees so that a chunk's gathers stay
    in cache; the results go back to the caller's order at the end.
    """
    from scipy.spatial import cKDTree

    dev = job.device
    # two chunks of tree output (24 bytes a pair) live at once: one folded, one found
    chunk = max(1, _chunk_pairs(job) * (_bytes_per_pair(job) + 24)
                // (_bytes_per_pair(job) + 48))
    korder_np, tree = job.kernel.cached("neighbors_tree " + ball.what,
                                        lambda: _key_tree(ball.kpts))
    m = ball.qpts.shape[0]
    qorder_np = _spatial_order(ball.qpts) if ball.pairs + m > chunk else np.arange(m)
    cuts = _ball_cuts(ball, qorder_np, chunk).tolist()
    qorder = torch.from_numpy(qorder_np).to(dev)
    korder = torch.from_numpy(korder_np).to(dev)
    # queries, keys and values in the sorted orders, and those orders
    arrays = (job.kernel.q[qorder], job.kernel.k[korder], job.values[korder], qorder, korder)
    qpts = ball.qpts[qorder_np]
    radius = _inflate(ball.radius, job)

    def walk(a: int, b: int) -> np.ndarray:
        return cKDTree(qpts[a:b]).sparse_distance_matrix(tree, radius, output_type="ndarray")

    out = _wide_state(job.m, job)
    spans = list(itertools.pairwise(cuts))
    tasks = [lambda a=a, b=b: walk(a, b) for a, b in spans]

    def fold_all() -> None:
        for (a, b), found in zip(spans, _prefetched(tasks), strict=True):
            _fold_found(job, ball, arrays, a, b, found, chunk, out[a:b])
            del found

    # one thread folds (torch ops on one thread) while another walks the tree
    on_worker(fold_all, device=dev)
    state.offset[qorder], state.total[qorder], state.acc[qorder] = (
        out.offset.to(job.dtype), out.total.to(job.dtype), out.acc.to(job.dtype))


def _max_share(plan: _Source) -> float:
    """Largest share of all pairs at which this source beats scanning every key."""
    if isinstance(plan, _Ball):
        return min(MAX_PAIR_FRACTION, BALL_SHARE / max(plan.qpts.shape[1], 1))
    return MAX_PAIR_FRACTION


_RUNNERS: dict[type, Callable[[Job, Any, SmoothState], None]] = {
    _Ball: _run_ball, _Sparse: _run_sparse, _Table: _run_table,
}


class NeighborsEngine:
    """Exact smoothing that visits only the keys that can carry weight.

    Runs when the kernel has compact support (Epanechnikov, tricube, uniform,
    or a product with such a factor) or the mask is sparse (k-nearest,
    radius, a sparse matrix, or an ``&`` with one of these), and the
    candidate pairs are few compared with ``m * n``. Cost and memory follow
    the number of candidate pairs; queries are processed in chunks within the
    working-memory budget. KD-trees are built on the CPU with scipy (inputs on
    another device are copied to the CPU for them); scores and sums are
    computed on the inputs' device. On the CPU the engine spreads chunks over
    its own threads (or walks the tree in one while another folds), with
    torch set to one thread for the duration of the call.
    """

    name = "neighbors"
    unnormalized = True

    def refuse(self, job: Job) -> str | None:
        if job.requires_grad:
            return ("inputs require grad, and the choice of neighbours has no gradient "
                    "(the dense engine differentiates)")
        probe = torch.zeros(1, dtype=torch.long, device=job.device)
        if job.kernel.pairs(probe, probe[:, None]) is None:
            return (f"the kernel {job.kernel.kernel!r} cannot score single (query, key) "
                    "pairs (it has no pair form)")
        plan = _plan(job)
        if plan is None:
            return ("the kernel has unbounded support and the mask is dense (no k-nearest, "
                    "radius or sparse mask), so every key can carry weight for every query")
        share, limit = plan.pairs / (job.m * job.n), _max_share(plan)
        if share > limit:
            return (f"about {share:.0%} of all query-key pairs are candidates (through "
                    f"{plan.what}); above {limit:.0%} scanning every key is faster than "
                    "a neighbour search")
        return None

    def cost(self, job: Job) -> float:
        if self.refuse(job) is not None:
            return math.inf
        plan = _plan(job)
        return plan.pairs * (job.p + job.kernel.q.shape[1] + 8)  # type: ignore[union-attr]

    def run(self, job: Job) -> SmoothState:
        why = self.refuse(job)
        if why is not None:
            from ..._errors import NadarayaError

            raise NadarayaError(f"engine 'neighbors' cannot run this problem: {why}.")
        plan = _plan(job)
        state = SmoothState.empty(job.m, job.p, dtype=job.dtype, device=job.device)
        _RUNNERS[type(plan)](job, plan, state)
        return state
