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

__all__ = ["MeanState", "SmoothState"]


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


@dataclass
class MeanState(SmoothState):
    """A state whose rows are already divided out: ``acc`` holds the means themselves.

    ``total`` is 1 on every row with weight and 0 on empty rows (it may be a
    zero-stride view when no row is empty), so :meth:`mean` is ``acc``; the
    certified methods and the sweeps return their results this way, one
    ``(m, p)`` array in the job's dtype instead of sums and scales. ``offset``
    is ``log sum_j K`` (the log-sum itself, as ``total`` is 1) when the run
    kept it (``keeps_offset``; for ``return_lse`` and ``normalize=False``;
    always for the sweeps), and then the state merges as any other; otherwise
    it is a zero-stride placeholder, and :attr:`lse` and :meth:`merge` raise.
    The state owns ``acc``: :func:`~nadaraya.engine.unnormalized.finish`
    turns it into the output in place, block by block, so finishing allocates
    no second ``(m, p)`` array.

    Attributes
    ----------
    keeps_offset : bool
        Whether ``offset`` holds the log-sums.
    """

    keeps_offset: bool = True

    @property
    def lse(self) -> torch.Tensor:
        """``log sum_j K(q, k_j)`` per query, shape ``(m,)``; ``-inf`` when empty."""
        if not self.keeps_offset:
            raise RuntimeError("this state was computed without its log-sums (lse=False)")
        return self.offset + torch.log(self.total)

    def merge(self, other: SmoothState) -> SmoothState:
        """Combine with a state over disjoint keys, where both kept their log-sums.

        Means with their log-sums are a state like any other (offset ``log sum K``,
        total 1); means without them are a finished result, not a partial one.
        """
        if not (self.keeps_offset and getattr(other, "keeps_offset", True)):
            raise TypeError("a MeanState without its log-sums (keeps_offset=False) holds "
                            "finished means; merge the states before dividing")
        return SmoothState(self.offset, self.total, self.acc).merge(other)
