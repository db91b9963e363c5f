"""The neighbors engine's sources of candidate keys: a ball, a sparse mask or a table.

:func:`_plan` picks, for a job, the source that promises the fewest (query, key) pairs
(estimated on a sample of queries and keys for a ball).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...kernels import BoundKernel, ProductKernel
from ...masks import And, BoundMask, Candidates, Mask, MatrixMask, Radius
from .._job import Job

__all__: list[str] = []

_SAMPLE_QUERIES = 2048
_SAMPLE_KEYS = 16384
#: Largest coordinate a KD-tree gets: its squared distances (up to ``d (2 x)^2``) stay finite.
_TREE_COORDINATE = 2.0**500


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

    def __post_init__(self) -> None:
        # The trees square coordinate differences: points near the float64 limit (a query
        # at 1e200) would overflow them. A power of two scales points and radius exactly
        # and leaves every neighbour set as it was.
        top = max(float(np.abs(a).max(initial=0.0)) for a in (self.qpts, self.kpts))
        if top > _TREE_COORDINATE:
            shift = math.frexp(top)[1] - math.frexp(_TREE_COORDINATE)[1]
            self.qpts, self.kpts = np.ldexp(self.qpts, -shift), np.ldexp(self.kpts, -shift)
            self.radius = math.ldexp(self.radius, -shift)


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
