"""Masks defined by distances between points: radius and k-nearest neighbours.

Distances are Euclidean in the raw feature space of the queries and keys
given to the engine (scale the features first for another metric).
"""

from __future__ import annotations

import numpy as np
import torch

from .._errors import NadarayaError
from ._base import BoundMask, Candidates, Mask

__all__ = ["KNearest", "Radius"]


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


class Radius(Mask):
    """Query ``q`` sees keys with ``||q - k|| <= radius``."""

    name = "radius"

    def __init__(self, radius: float) -> None:
        if not (isinstance(radius, int | float) and np.isfinite(radius) and radius > 0):
            raise NadarayaError(f"radius must be a positive finite number; got {radius!r}.")
        self.radius = float(radius)

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        p = bound.problem
        d = torch.cdist(p.queries[rows], p.keys[cols], compute_mode="donot_use_mm_for_euclid_dist")
        return d <= self.radius

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        p = bound.problem
        diff = p.keys[index] - p.queries[rows][:, None, :]
        return diff.square().sum(-1) <= self.radius**2

    def _candidates(self, bound: BoundMask) -> Candidates:
        if "candidates" not in bound.state:
            from scipy.spatial import cKDTree

            p = bound.problem
            tree = cKDTree(_numpy(p.keys))
            lists = tree.query_ball_point(_numpy(p.queries), self.radius, workers=-1)
            bound.state["candidates"] = _pad(lists, p.n_queries, p.queries.device)
        return bound.state["candidates"]  # type: ignore[return-value]

    def _params(self) -> str:
        return repr(self.radius)


def _pad(lists: list[list[int]] | np.ndarray, m: int, device: torch.device) -> Candidates:
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=m)
    width = int(counts.max()) if m else 0
    index = np.zeros((m, max(width, 1)), dtype=np.int64)
    valid = np.arange(max(width, 1))[None, :] < counts[:, None]
    if width:
        index[valid] = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists if len(x)])
    return Candidates(torch.from_numpy(index).to(device), torch.from_numpy(valid).to(device))


class KNearest(Mask):
    """Query ``q`` sees its ``k`` nearest keys (all keys when ``k >= n_keys``).

    Ties at the k-th distance are broken by the KD-tree, as in scikit-learn.
    """

    name = "k-nearest"

    def __init__(self, k: int) -> None:
        if not isinstance(k, int | np.integer) or k < 1:
            raise NadarayaError(f"k must be a positive integer; got {k!r}.")
        self.k = int(k)

    def _prepare(self, bound: BoundMask) -> None:
        from scipy.spatial import cKDTree

        p = bound.problem
        k = min(self.k, p.n_keys)
        if p.n_queries == 0 or k == 0:
            index = np.zeros((p.n_queries, 0), dtype=np.int64)
        else:
            tree = cKDTree(_numpy(p.keys))
            queries = _numpy(p.queries)
            # Searching in the queries' own tree order keeps neighbouring
            # searches in cache: several times faster than the given order.
            order = cKDTree(queries, balanced_tree=False, compact_nodes=False).indices
            _, found = tree.query(queries[order], k=k, workers=-1)
            index = np.empty((p.n_queries, k), dtype=np.int64)
            index[order] = np.asarray(found, dtype=np.int64).reshape(p.n_queries, k)
        idx = torch.from_numpy(index).to(p.queries.device)
        bound.state["index"] = idx

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        idx: torch.Tensor = bound.state["index"][rows]  # type: ignore[index]
        out = torch.zeros(idx.shape[0], cols.stop - cols.start, dtype=torch.bool,
                          device=idx.device)
        inside = (idx >= cols.start) & (idx < cols.stop)
        r, c = torch.nonzero(inside, as_tuple=True)
        out[r, idx[r, c] - cols.start] = True
        return out

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        if "sorted" not in bound.state:  # sorted rows, made on first use
            bound.state["sorted"] = torch.sort(bound.state["index"], dim=1).values
        table: torch.Tensor = bound.state["sorted"][rows]  # type: ignore[index]
        if table.shape[1] == 0:
            return torch.zeros_like(index, dtype=torch.bool)
        pos = torch.searchsorted(table, index.contiguous()).clamp_(max=table.shape[1] - 1)
        return table.gather(1, pos) == index

    def _candidates(self, bound: BoundMask) -> Candidates:
        idx: torch.Tensor = bound.state["index"]  # type: ignore[assignment]
        return Candidates(idx, torch.ones_like(idx, dtype=torch.bool))

    def _params(self) -> str:
        return str(self.k)
