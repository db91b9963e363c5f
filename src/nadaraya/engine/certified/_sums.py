"""What a certified method returns: the two sums and a proven bound on each.

For one query ``q`` and value column ``c`` the engine needs

    total(q)   = sum_j K(q, k_j)
    acc(q, c)  = sum_j K(q, k_j) v_jc

A certified method returns approximations of both and, for every query,
absolute bounds ``total_err >= |total' - total|`` and
``acc_err >= |acc' - acc|`` (rounding included). Sums over disjoint key sets
add, bounds included, so partial results over key blocks merge exactly
(:meth:`Sums.merge`): the property the cluster engine relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .._job import Job

__all__ = ["Method", "Sums"]


@dataclass
class Sums:
    """Approximate kernel sums for ``m`` queries with absolute error bounds (float64).

    Attributes
    ----------
    total : torch.Tensor of shape (m,)
        ``sum_j K(q, k_j)``.
    acc : torch.Tensor of shape (m, p)
        ``sum_j K(q, k_j) v_j``.
    total_err : torch.Tensor of shape (m,)
        Proven bound on the absolute error of ``total``.
    acc_err : torch.Tensor of shape (m, p)
        Proven bound on the absolute error of ``acc``.
    """

    total: torch.Tensor
    acc: torch.Tensor
    total_err: torch.Tensor
    acc_err: torch.Tensor

    def merge(self, other: Sums) -> Sums:
        """Sums over the union of two disjoint key sets (bounds add)."""
        return Sums(self.total + other.total, self.acc + other.acc,
                    self.total_err + other.total_err, self.acc_err + other.acc_err)

    def __getitem__(self, rows: Any) -> Sums:
        return Sums(self.total[rows], self.acc[rows], self.total_err[rows], self.acc_err[rows])


class Method(Protocol):
    """A fast way to compute :class:`Sums`, chosen by the certified dispatcher.

    ``tolerance`` is the caller's: every output must end within
    ``tolerance * max_j |v_jc|`` of the exact one. A method picks its
    parameters (expansion order, cell size, grid size) so that its bounds
    are about ``tolerance / 4`` of ``total`` and of ``max|v| * total`` for
    queries in the bulk of the keys; the dispatcher checks every query's
    bound and recomputes exactly the few it does not prove (a query far
    from every key, whose ``total`` is tiny).
    """

    name: str

    def refuse(self, job: Job, tolerance: float) -> str | None:
        """Why this method cannot serve ``job`` at ``tolerance`` (None if it can)."""
        ...

    def cost(self, job: Job, tolerance: float) -> float:
        """Rough operation count, comparable with ``m * n`` of the exact engines."""
        ...

    def plan(self, job: Job, tolerance: float) -> dict[str, Any]:
        """The parameters chosen for ``job`` and the bound they give, for ``explain()``."""
        ...

    def sums(self, job: Job, tolerance: float) -> Sums:
        """The sums over all keys for all queries of ``job``, with their bounds."""
        ...
