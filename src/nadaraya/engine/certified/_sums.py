"""What a certified method returns: the two sums and a proven bound on each.

For one query ``q`` and value column ``c`` the engine needs

    total(q)   = sum_j K(q, k_j)
    acc(q, c)  = sum_j K(q, k_j) v_jc

A certified method returns approximations of both and, for every query,
absolute bounds ``total_err >= |total' - total|`` and
``acc_err >= |acc' - acc|`` (rounding included). Sums over disjoint key sets
add, bounds included, so partial results over key blocks merge exactly
(:meth:`Sums.merge`): the property the cluster engine relies on.

A method may also be *prepared* once for a job (its key side: sorting,
binning, moments) and then *evaluated* block by block over the queries
(:class:`PreparedSums`); the runner does so when the method offers
``prepare`` (:func:`prepare_sums`), so its memory is the keys' structures and
one block of queries, not ``m`` rows of every temporary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ..._config import get_config
from .._job import Job

__all__ = ["Method", "PreparedSums", "Sums", "block_rows", "prepare_sums"]


@dataclass
class Sums:
    """Approximate kernel sums for ``m`` queries with absolute error bounds (float64).

    Parameters
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
        """Sums over the union of two disjoint key sets (bounds add).

        Parameters
        ----------
        other : Sums
            The sums over a key set disjoint from this one's, for the same queries.
        """
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
        """Why this method cannot serve ``job`` at ``tolerance`` (None if it can).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        ...

    def cost(self, job: Job, tolerance: float) -> float:
        """Rough operation count, comparable with ``m * n`` of the exact engines.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        ...

    def plan(self, job: Job, tolerance: float) -> dict[str, Any]:
        """The parameters chosen for ``job`` and the bound they give, for ``explain()``.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        ...

    def sums(self, job: Job, tolerance: float) -> Sums:
        """The sums over all keys for all queries of ``job``, with their bounds.

        A method may also offer ``prepare(job, tolerance) -> PreparedSums``: its key
        side built once, the queries then evaluated block by block (see
        :func:`prepare_sums`); ``sums`` stays the whole-job call the cluster engine
        makes on its own blocks.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        ...


class PreparedSums(Protocol):
    """A method made ready for one job: the sums of any block of its queries."""

    def evaluate(self, rows: slice) -> Sums:
        """The sums over all keys of the job's queries ``rows``, with their bounds.

        The rows of a query are the same (to the last bit) whatever the block it
        comes in.

        Parameters
        ----------
        rows : slice
            The queries of the block, a slice of ``range(job.m)``.
        """
        ...


class _Whole:
    """A method without ``prepare``: its sums of every query, computed once and sliced."""

    def __init__(self, method: Method, job: Job, tolerance: float) -> None:
        self.sums = method.sums(job, tolerance)

    def evaluate(self, rows: slice) -> Sums:
        return self.sums[rows]


def prepare_sums(method: Method, job: Job, tolerance: float) -> PreparedSums:
    """``method.prepare(job, tolerance)`` when the method has it, else its whole sums, sliced.

    Parameters
    ----------
    method : Method
        A certified method.
    job : Job
        The bound problem: kernel and points, mask, values and sizes.
    tolerance : float
        The caller's tolerance, already checked: a float in (0, 1).
    """
    prepare = getattr(method, "prepare", None)
    if prepare is None:
        return _Whole(method, job, tolerance)
    ready: PreparedSums = prepare(job, tolerance)
    return ready


def block_rows(job: Job) -> int:
    """Queries per block of a certified run: their temporaries take 1/8 of ``working_memory``.

    A query of the block holds a few dozen float64 numbers while it is evaluated
    and checked (its point and box, its sums and bounds per channel, the check's
    intermediates); the rows of the result are the only ``m``-sized arrays.

    Parameters
    ----------
    job : Job
        The bound problem: kernel and points, mask, values and sizes.
    """
    per_row = 8 * (8 + 2 * job.kernel.q.shape[1] + 16 * (job.p + 1))
    return max(1, int(get_config().working_memory * 2**20 / 8 / per_row))
