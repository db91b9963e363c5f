"""Masks defined by distances between points: radius and k-nearest neighbours.

Distances are Euclidean in the raw feature space of the queries and keys
given to the engine (scale the features first for another metric).
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from .._errors import NadarayaError
from ._base import BoundMask, Mask, Visibility
from ._candidates import Candidates, budget_rows, pad_lists

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
            queries = _numpy(p.queries)
            counts = np.asarray(tree.query_ball_point(queries, self.radius, workers=-1,
                                                      return_length=True), dtype=np.int64)
            width = max(int(counts.max()) if counts.size else 0, 1)  # as pad_lists makes them

            def fetch(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                found = tree.query_ball_point(queries[rows.cpu().numpy()], self.radius)
                return pad_lists(found, p.queries.device)

            bound.state["candidates"] = Candidates(
                p.n_queries, width, fetch, int(counts.sum()), device=p.queries.device)
        return bound.state["candidates"]  # type: ignore[return-value]

    def _params(self) -> str:
        return repr(self.radius)


class KNearest(Mask):
    """Query ``q`` sees its ``k`` nearest keys (all keys when ``k >= n_keys``).

    Ties at the k-th distance are broken by the KD-tree, as in scikit-learn.
    With ``k >= n_keys`` the mask hides nothing and holds no table. Otherwise
    the neighbour lists are searched a block of queries at a time, within the
    working-memory budget, when an engine asks for them: the whole ``(m, k)``
    table never exists at once. Each thread keeps the block it asked for
    last, since engines visit every key block of one query block in turn.
    """

    name = "k-nearest"

    def __init__(self, k: int) -> None:
        if not isinstance(k, int | np.integer) or k < 1:
            raise NadarayaError(f"k must be a positive integer; got {k!r}.")
        self.k = int(k)

    def _prepare(self, bound: BoundMask) -> None:
        p = bound.problem
        bound.state["everything"] = self.k >= p.n_keys
        if not bound.state["everything"]:
            from scipy.spatial import cKDTree

            bound.state["tree"] = cKDTree(_numpy(p.keys))
            bound.state["queries"] = _numpy(p.queries)  # a view of CPU tensors
            bound.state["local"] = threading.local()

    def _search(self, bound: BoundMask, rows: torch.Tensor) -> torch.Tensor:
        """The ``k`` nearest keys ``(len(rows), k)`` of queries ``rows``, in query blocks."""
        tree, queries = bound.state["tree"], bound.state["queries"]
        ids = rows.cpu().numpy()
        out = np.empty((ids.shape[0], self.k), dtype=np.int64)
        # per query: the distances and indices scipy returns (16 bytes a
        # neighbour), its search heap (about as much) and the copy made here
        step = budget_rows(40.0 * self.k)
        for a in range(0, ids.shape[0], step):
            block = np.asarray(queries[ids[a:a + step]], dtype=np.float64)  # type: ignore[index]
            _, found = tree.query(block, k=self.k)  # type: ignore[attr-defined]
            out[a:a + step] = np.asarray(found, dtype=np.int64).reshape(-1, self.k)
        return torch.from_numpy(out).to(bound.device)

    def _lists(self, bound: BoundMask, rows: slice | torch.Tensor, *,
               ordered: bool = False) -> torch.Tensor:
        """Neighbour lists of ``rows`` (sorted by key with ``ordered``), kept per thread."""
        local = bound.state["local"]
        hit = getattr(local, "hit", None)
        if hit is None or not _same(hit[0], rows):
            ids = (torch.arange(rows.start, rows.stop, device=bound.device)
                   if isinstance(rows, slice) else rows)
            key = rows if isinstance(rows, slice) else rows.clone()
            hit = local.hit = [key, self._search(bound, ids), None]
        if not ordered:
            return hit[1]
        if hit[2] is None:
            hit[2] = torch.sort(hit[1], dim=1).values
        return hit[2]

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        return Visibility.FULL if bound.state["everything"] else Visibility.PARTIAL

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        if bound.state["everything"]:
            return torch.ones(shape, dtype=torch.bool, device=bound.device)
        idx = self._lists(bound, rows)
        # neighbours outside the block go to one spare column, dropped after
        pos = idx - cols.start
        pos.masked_fill_((pos < 0) | (pos >= shape[1]), shape[1])
        out = torch.zeros(shape[0], shape[1] + 1, dtype=torch.bool, device=idx.device)
        return out.scatter_(1, pos, True)[:, :shape[1]]

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        if bound.state["everything"]:
            return torch.ones_like(index, dtype=torch.bool)
        if rows.shape[0] > budget_rows(16.0 * self.k):
            return self._many_pairs(bound, rows, index)
        table = self._lists(bound, rows, ordered=True)
        pos = torch.searchsorted(table, index.contiguous()).clamp_(max=table.shape[1] - 1)
        return table.gather(1, pos) == index

    def _many_pairs(self, bound: BoundMask, rows: torch.Tensor,
                    index: torch.Tensor) -> torch.Tensor:
        """:meth:`_pairs` for more rows than one table may hold (pairs of a neighbour search).

        The distinct queries are searched a block at a time; their sorted lists,
        keyed ``query * n_keys + key``, are looked up for the pairs of that block.
        """
        n = bound.problem.n_keys
        distinct, inverse = torch.unique(rows, return_inverse=True)
        inverse, perm = torch.sort(inverse)
        index = index[perm]
        out = torch.empty_like(index, dtype=torch.bool)
        step = budget_rows(32.0 * self.k)  # the lists, sorted, keyed, and their search
        for a in range(0, distinct.shape[0], step):
            lists = torch.sort(self._search(bound, distinct[a:a + step]), dim=1).values
            base = torch.arange(lists.shape[0], device=lists.device)[:, None] * n
            keyed = (lists + base).flatten()
            lo, hi = torch.searchsorted(inverse, torch.tensor([a, a + step], device=rows.device))
            want = (inverse[lo:hi, None] - a) * n + index[lo:hi]
            pos = torch.searchsorted(keyed, want.flatten()).clamp_(max=keyed.shape[0] - 1)
            out[lo:hi] = (keyed[pos] == want.flatten()).view(want.shape)
        result = torch.empty_like(out)
        result[perm] = out
        return result

    def _candidates(self, bound: BoundMask) -> Candidates | None:
        if bound.state["everything"]:
            return None  # every key: a dense mask
        if "candidates" not in bound.state:
            from scipy.spatial import cKDTree

            p = bound.problem
            # Searching in the queries' own tree order keeps neighbouring
            # searches in cache: several times faster than the given order.
            order = cKDTree(_numpy(p.queries), balanced_tree=False, compact_nodes=False).indices
            bound.state["candidates"] = Candidates(
                p.n_queries, self.k, lambda rows: self._fetch(bound, rows),
                p.n_queries * self.k, all_valid=True,
                order=torch.from_numpy(np.asarray(order, dtype=np.int64)).to(bound.device),
                device=bound.device)
        return bound.state["candidates"]  # type: ignore[return-value]

    def _fetch(self, bound: BoundMask, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index = self._search(bound, rows)
        return index, torch.ones_like(index, dtype=torch.bool)

    def _params(self) -> str:
        return str(self.k)


def _same(kept: slice | torch.Tensor, rows: slice | torch.Tensor) -> bool:
    """Whether two row selections are the same queries in the same order."""
    if isinstance(kept, slice) or isinstance(rows, slice):
        return isinstance(kept, slice) and isinstance(rows, slice) and kept == rows
    return kept.shape == rows.shape and bool(torch.equal(kept, rows))
