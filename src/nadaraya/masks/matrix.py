"""A mask given as a boolean matrix, dense or sparse."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._base import BoundMask, Mask, Visibility
from ._candidates import Candidates, pad_flat

__all__ = ["MatrixMask"]


class MatrixMask(Mask):
    """Visibility given as an ``(n_queries, n_keys)`` boolean matrix.

    Parameters
    ----------
    matrix : array-like, torch.Tensor or scipy.sparse matrix
        True (or a stored nonzero, for sparse input) where the key is visible.
    """

    name = "matrix"

    def __init__(self, matrix: Any) -> None:
        import scipy.sparse as sp

        self.sparse = sp.issparse(matrix)
        if self.sparse:
            self.matrix = sp.csr_matrix(matrix, dtype=bool)
            self.matrix.eliminate_zeros()
            self.shape = self.matrix.shape
        else:
            t = matrix if isinstance(matrix, torch.Tensor) else torch.as_tensor(np.asarray(matrix))
            if t.dtype != torch.bool:
                raise NadarayaError(
                    f"mask matrix must be boolean; got dtype {t.dtype}. "
                    "Pass (matrix != 0) or an additive mask converted with (matrix == 0)."
                )
            if t.ndim != 2:
                raise NadarayaError(f"mask matrix must be 2-D; got shape {tuple(t.shape)}.")
            self.matrix = t
            self.shape = tuple(t.shape)

    def _prepare(self, bound: BoundMask) -> None:
        p = bound.problem
        if tuple(self.shape) != (p.n_queries, p.n_keys):
            raise NadarayaError(
                f"mask must have shape (n_queries, n_keys) = {(p.n_queries, p.n_keys)}; "
                f"got {tuple(self.shape)}."
            )
        if not self.sparse:
            bound.state["dense"] = self.matrix.to(bound.device)

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        if self.sparse:
            sub = self.matrix[rows, cols].toarray()
            return torch.from_numpy(sub).to(bound.device)
        return bound.state["dense"][rows, cols]  # type: ignore[index]

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        if self.sparse:
            if self.matrix[rows, cols].nnz == 0:
                return Visibility.EMPTY
        return Visibility.PARTIAL

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        if self.sparse:
            r = np.broadcast_to(rows.cpu().numpy()[:, None], index.shape)
            vals = np.asarray(self.matrix[r.ravel(), index.cpu().numpy().ravel()]).reshape(
                index.shape)
            return torch.from_numpy(vals.astype(bool)).to(index.device)
        dense: torch.Tensor = bound.state["dense"]  # type: ignore[assignment]
        return dense[rows[:, None], index]

    def _candidates(self, bound: BoundMask) -> Candidates | None:
        if not self.sparse:
            return None
        csr = self.matrix
        counts = np.diff(csr.indptr)
        width = max(int(counts.max()) if counts.size else 0, 1)  # as pad_flat makes them

        def fetch(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            sub = csr[rows.cpu().numpy()]
            return pad_flat(np.asarray(sub.indices, dtype=np.int64), np.diff(sub.indptr),
                            bound.device)

        return Candidates(csr.shape[0], width, fetch, int(csr.nnz), device=bound.device)
