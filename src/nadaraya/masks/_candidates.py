"""Candidate lists of sparse masks, produced a block of queries at a time.

A sparse mask (k-nearest, radius, a sparse matrix, an ``&`` with one of them)
knows, for each query, the few keys it may let through. All queries' lists
together can be far larger than the working-memory budget (``m`` queries
times ``k`` neighbours), so they are handed out block by block: an engine
asks for the rows it is about to reduce, within its budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from .._config import get_config

__all__ = ["Candidates", "budget_rows", "merge_lists", "pad_flat", "pad_lists"]

Rows = slice | torch.Tensor
Fetch = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class Candidates:
    """For each query, the keys a sparse mask may let through.

    Parameters
    ----------
    n_rows : int
        Number of queries.
    width : int
        Most candidates of one query: no block is wider.
    fetch : callable
        ``fetch(rows)``, with ``rows`` an int64 tensor of query indices, gives
        ``(index, valid)``: key indices ``(len(rows), w)``, int64, with
        ``w <= width``, and which of them are real (the rest is padding).
    count : int
        Number of candidates of all queries; an upper bound where counting
        them would mean producing every list (an ``&`` of masks).
    all_valid : bool, default False
        Every entry of every block is a candidate (no padding).
    order : torch.Tensor of shape (n_rows,), optional
        An order of the queries in which consecutive blocks are cheapest to
        produce (nearby queries together, for a tree search).
    device : torch.device, optional
        Where the blocks live.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.masks import KNearest, Problem
    >>> x = torch.arange(5.0)[:, None]
    >>> cand = KNearest(2).bind(Problem(5, 5, x, x)).candidates()
    >>> index, valid = cand.rows(slice(0, 2))
    >>> index.shape, cand.count
    (torch.Size([2, 2]), 10)
    """

    def __init__(self, n_rows: int, width: int, fetch: Fetch, count: int, *,
                 all_valid: bool = False, order: torch.Tensor | None = None,
                 device: torch.device | None = None) -> None:
        self.n_rows, self.width, self.count = n_rows, width, count
        self.all_valid, self.order = all_valid, order
        self.device = device if device is not None else torch.device("cpu")
        self._fetch = fetch

    @classmethod
    def from_table(cls, index: torch.Tensor, valid: torch.Tensor) -> Candidates:
        """Candidates given as whole tables ``index`` and ``valid`` of shape ``(m, K)``."""
        def fetch(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return index[rows], valid[rows]

        return cls(index.shape[0], index.shape[1], fetch, int(valid.sum()),
                   all_valid=bool(valid.all()), device=index.device)

    def rows(self, rows: Rows) -> tuple[torch.Tensor, torch.Tensor]:
        """``(index, valid)`` of the queries ``rows`` (a slice or an int64 tensor)."""
        if isinstance(rows, slice):
            start, stop, _ = rows.indices(self.n_rows)
            rows = torch.arange(start, stop, device=self.device)
        return self._fetch(rows)

    def table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every query's list at once: ``(index, valid)`` of shape ``(n_rows, width)``.

        Its size is the mask's; for small problems and tests.
        """
        index, valid = self.rows(slice(None))
        pad = self.width - index.shape[1]
        if pad > 0:
            index = torch.nn.functional.pad(index, (0, pad))
            valid = torch.nn.functional.pad(valid, (0, pad))
        return index, valid


def budget_rows(bytes_per_row: float) -> int:
    """Rows whose temporaries of ``bytes_per_row`` each fit in a quarter of the budget."""
    budget = get_config().working_memory * 2**20 / 4
    return max(1, int(budget // max(bytes_per_row, 1.0)))


def pad_lists(lists: Sequence[Sequence[int]] | np.ndarray,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Lists of key indices as a padded ``(index, valid)`` pair of tables."""
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    flat = (np.concatenate([np.asarray(x, dtype=np.int64) for x in lists if len(x)])
            if counts.sum() else np.zeros(0, dtype=np.int64))
    return pad_flat(flat, counts, device)


def pad_flat(flat: np.ndarray, counts: np.ndarray,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Lists given end to end (``flat``, ``counts[i]`` for row ``i``) as padded tables."""
    width = max(int(counts.max()) if counts.size else 0, 1)
    index = np.zeros((counts.shape[0], width), dtype=np.int64)
    valid = np.arange(width)[None, :] < counts[:, None]
    index[valid] = flat
    return torch.from_numpy(index).to(device), torch.from_numpy(valid).to(device)


def merge_lists(a: tuple[torch.Tensor, torch.Tensor],
                b: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The union of two candidate blocks, each key listed once.

    Rows are sorted (padding last) and a key equal to its left neighbour is
    dropped: memory follows the two widths added, not multiplied.
    """
    index = torch.cat([a[0], b[0]], 1)
    valid = torch.cat([a[1], b[1]], 1)
    if index.shape[1] == 0:
        return index, valid
    past = torch.iinfo(torch.int64).max
    keyed = torch.where(valid, index, torch.full_like(index, past))
    keyed, _ = torch.sort(keyed, dim=1)
    valid = keyed != past
    valid[:, 1:] &= keyed[:, 1:] != keyed[:, :-1]
    return torch.where(valid, keyed, torch.zeros_like(keyed)), valid
