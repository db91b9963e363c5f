"""The neighbors engine's runs, one per source: a table, a sparse mask, a ball.

A ball walks a KD-tree over chunks of spatially ordered queries, in one thread while
another folds the pairs it found.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ...kernels import BoundKernel
from .._job import Job
from .._state import SmoothState
from .._threads import map_blocks, on_worker
from ._fold import _bytes_per_pair, _chunk_pairs, _fold_pairs, _fold_table, _hide, _wide_state
from ._sources import _Ball, _inflate, _Sparse, _Table

__all__: list[str] = []


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
