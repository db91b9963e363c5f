"""The online log-sum-exp state: a monoid over disjoint key sets.

For one query, keys with scores ``s_j`` and values ``v_j`` reduce to

    offset  c
    total   t = sum_j exp(s_j - c)
    acc     a = sum_j exp(s_j - c) v_j

so that ``log sum_j K = c + log t`` and the smoothed value is ``a / t``. Two
states over disjoint key sets merge exactly by rescaling to the larger offset.
This one rule gives bounded memory (fold key blocks), parallel and GPU tiling,
and the cluster engine (reduce partial states).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SmoothState"]


@dataclass
class SmoothState:
    """Partial reduction of the keys seen so far, for ``m`` queries.

    Attributes
    ----------
    offset : torch.Tensor of shape (m,)
        Log-scale of ``total`` and ``acc``; ``-inf`` where no key has weight.
    total : torch.Tensor of shape (m,)
        Sum of the weights, divided by ``exp(offset)``.
    acc : torch.Tensor of shape (m, p)
        Weighted sum of the values, divided by ``exp(offset)``.
    """

    offset: torch.Tensor
    total: torch.Tensor
    acc: torch.Tensor

    @classmethod
    def empty(cls, m: int, p: int, *, dtype: torch.dtype, device: torch.device) -> SmoothState:
        """The identity of :meth:`merge`: no keys seen."""
        return cls(
            torch.full((m,), -torch.inf, dtype=dtype, device=device),
            torch.zeros(m, dtype=dtype, device=device),
            torch.zeros(m, p, dtype=dtype, device=device),
        )

    def merge(self, other: SmoothState) -> SmoothState:
        """Combine two states over disjoint key sets (exact, associative, commutative)."""
        top = torch.maximum(self.offset, other.offset)
        safe = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        a = torch.exp(self.offset - safe)
        b = torch.exp(other.offset - safe)
        return SmoothState(
            top,
            self.total * a + other.total * b,
            self.acc * a[:, None] + other.acc * b[:, None],
        )

    @property
    def lse(self) -> torch.Tensor:
        """``log sum_j K(q, k_j)`` per query, shape ``(m,)``; ``-inf`` when empty."""
        return self.offset + torch.log(self.total)

    @property
    def empty_rows(self) -> torch.Tensor:
        """Bool ``(m,)``: queries whose visible keys carry no weight."""
        return ~(self.total > 0)

    def mean(self) -> torch.Tensor:
        """The smoothed values ``acc / total``, shape ``(m, p)`` (NaN where empty)."""
        return self.acc / self.total[:, None]

    def __getitem__(self, rows: slice | torch.Tensor) -> SmoothState:
        return SmoothState(self.offset[rows], self.total[rows], self.acc[rows])
