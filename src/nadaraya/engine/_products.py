"""Weighted sums of weight blocks: products in the job's dtype, sums in float64.

Every engine that multiplies a block of weights ``W (mb, nb)`` by the values
``[V, 1] (nb, p + 1)`` sums ``nb`` products per entry. A matrix product adds
them one after another, so in float32 its rounding grows with ``nb``
(``2e-6`` relative at 2048 keys, ``3e-5`` over ``10^5`` keys when blocks are
added into one float32 accumulator). Here each product covers at most
:data:`CHUNK` keys and is added into a float64 accumulator: the error no
longer grows with ``n``, and the result is rounded to the job's dtype once.

The product is taken as ``[V, 1]^T W^T``, ``(p + 1, mb)``: for the few value
columns of a regression it runs several times faster than ``W [V, 1]``.
"""

from __future__ import annotations

import torch

from ._state import SmoothState

__all__ = ["CHUNK", "WIDE", "RowSums", "augmented_values", "weighted_sum"]

# Keys per float32 product before it is added in float64.
CHUNK = 2048
WIDE = torch.float64


def augmented_values(values: torch.Tensor) -> torch.Tensor:
    """``[values, 1]`` transposed: ``(p + 1, n)``, contiguous, the last row ones.

    Parameters
    ----------
    values : torch.Tensor of shape (n, p)
    """
    ones = torch.ones(1, values.shape[0], dtype=values.dtype, device=values.device)
    return torch.cat([values.T, ones]).contiguous()


def _chunks(n: int) -> list[slice]:
    return [slice(a, min(a + CHUNK, n)) for a in range(0, n, CHUNK)] or [slice(0, 0)]


class RowSums:
    """Running ``sum_j w_ij [v_j, 1]`` of a block of queries, kept in float64.

    Parameters
    ----------
    width : int
        ``p + 1``: the value columns and the column of ones.
    rows : int
        Queries in the block.
    device : torch.device
    in_place : bool, default True
        Update ``sums`` in place; False keeps every step for autograd.

    Attributes
    ----------
    sums : torch.Tensor of shape (p + 1, rows), float64
        The weighted sums of the values, then the total weight.
    """

    def __init__(self, width: int, rows: int, device: torch.device, *,
                 in_place: bool = True) -> None:
        self.sums = torch.zeros(width, rows, dtype=WIDE, device=device)
        self.in_place = in_place

    def add(self, weights: torch.Tensor, vt: torch.Tensor) -> None:
        """Add ``weights (rows, nb)`` times ``vt (p + 1, nb)`` (from :func:`augmented_values`)."""
        for c in _chunks(weights.shape[1]):
            product = torch.mm(vt[:, c], weights[:, c].T)
            if self.in_place:
                self.sums.add_(product)
            else:
                self.sums = self.sums + product.to(WIDE)

    def rescale(self, factor: torch.Tensor) -> None:
        """Multiply every row's sums by ``factor (rows,)``."""
        self.sums.mul_(factor.to(WIDE))

    @property
    def total(self) -> torch.Tensor:
        """The total weight of each query, ``(rows,)``, float64."""
        return self.sums[-1]

    def state(self, offset: torch.Tensor, dtype: torch.dtype) -> SmoothState:
        """The :class:`SmoothState` with this ``offset (rows,)``, rounded to ``dtype``."""
        return SmoothState(offset, self.sums[-1].to(dtype), self.sums[:-1].T.to(dtype))


def weighted_sum(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``weights (mb, n) @ values (n, p)``, summed in float64, in the values' dtype.

    Differentiable (no in-place update), for the dense engine.
    """
    if values.dtype == WIDE:
        return (values.T @ weights.T).T
    out = None
    for c in _chunks(weights.shape[1]):
        part = (values[c].T @ weights[:, c].T).to(WIDE)
        out = part if out is None else out + part
    assert out is not None
    return out.T.to(values.dtype)
