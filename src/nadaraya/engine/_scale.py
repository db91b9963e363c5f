"""Exact scaling by powers of two: values near the dtype's limits, smoothed safely.

A weighted mean of values near the largest number of a dtype is itself
representable, but the sums that form it (``sum_j w_j v_j`` with a total
``sum_j w_j`` in the thousands) are not; values near the smallest normal
number lose digits in the products ``w_j v_j``. So the engines smooth every
value column divided by a power of two, ``2^e``, that brings its largest
magnitude into ``[1/2, 1)``, and the result is multiplied back by ``2^e``.
Multiplying by a power of two only changes the exponent: it is exact (unless
the result itself over- or underflows), so the scaled problem is the same
problem, and the log-sum-exp and the merge rule of the state are untouched.
"""

from __future__ import annotations

import math

import torch

from ._job import Job

__all__ = ["column_exponents", "scale_values", "times_exp", "times_power_of_two"]

_BITS = {torch.float32: (torch.int32, 23, 127), torch.float64: (torch.int64, 52, 1023)}


def column_exponents(values: torch.Tensor) -> torch.Tensor:
    """Exponents ``e (p,)``, int64, with ``max_j |values[j, c]| * 2^-e[c]`` in ``[1/2, 1)``.

    Zero for a column of zeros (or an empty one).

    Parameters
    ----------
    values : torch.Tensor of shape (n, p)
        Finite values.
    """
    if values.shape[0] == 0:
        return torch.zeros(values.shape[1], dtype=torch.int64, device=values.device)
    top = values.detach().abs().amax(dim=0)
    return torch.frexp(top).exponent.to(torch.int64)


def _power_of_two(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``2^e`` built from its bits (exact), for ``|e| <`` the dtype's largest exponent."""
    itype, mantissa, bias = _BITS[dtype]
    return ((e + bias).to(itype) << mantissa).view(dtype)


def times_power_of_two(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``x * 2^e``, rounded once: exact unless the result is subnormal, 0 or inf.

    Parameters
    ----------
    x : torch.Tensor, float32 or float64
    e : torch.Tensor of int64, broadcastable to ``x``

    Returns
    -------
    torch.Tensor
        The shape of ``x`` broadcast with ``e``. Large exponents are applied in
        steps, the one that may leave the normal range last, so nothing is
        rounded twice.
    """
    limit = _BITS[x.dtype][2] - 1  # 2^±limit is a normal number
    largest = int(e.abs().max()) if e.numel() else 0
    steps = max(1, -(-largest // limit))
    for i in range(steps):
        # the part of e applied in steps i..steps-1, minus that of steps i+1..
        later = (steps - i - 1) * limit
        part = e.clamp(-(later + limit), later + limit) - e.clamp(-later, later)
        x = x * _power_of_two(part, x.dtype)
    return x


def times_exp(x: torch.Tensor, offset: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``x * exp(offset)[:, None] * 2^e``, with no intermediate overflow.

    ``exp(offset)`` is split as ``2^k exp(r)`` with ``|r| <= log(2) / 2``, and
    ``2^(k + e)`` is applied exactly: the result is inf (or 0) only when it
    is itself beyond the dtype's range.

    Parameters
    ----------
    x : torch.Tensor of shape (m, p)
    offset : torch.Tensor of shape (m,)
        Log-scale of each row; ``-inf`` gives 0 rows (where ``x`` is finite).
    e : torch.Tensor of shape (p,), int64
    """
    wide = offset.detach().to(torch.float64)
    finite = torch.isfinite(wide)
    k = torch.where(finite, torch.round(wide / math.log(2.0)), torch.zeros_like(wide))
    k = k.clamp(-(2**20), 2**20)
    r = (offset.to(torch.float64) - k * math.log(2.0)).to(x.dtype)
    rows = x * torch.exp(r)[:, None]
    return times_power_of_two(rows, k.to(torch.int64)[:, None] + e[None, :])


def scale_values(job: Job) -> None:
    """Divide each value column of ``job`` by ``2^e``, its largest magnitude's exponent.

    Sets ``job.values`` and ``job.exponents``; the result is multiplied back
    when it is finished. After this every value lies in ``(-1, 1)``. Jobs
    that record gradients are left as they are: the gradient of the result
    times ``2^e`` would pass through ``2^e`` times the incoming gradient,
    which overflows first (the autograd engine guards its own sums).
    """
    if job.requires_grad:
        return
    e = column_exponents(job.values)
    job.exponents = e
    if bool((e != 0).any()):
        job.values = times_power_of_two(job.values, -e[None, :])
