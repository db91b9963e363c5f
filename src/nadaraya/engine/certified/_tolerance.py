"""The caller's ``tolerance``: what it promises and how each query is checked.

With ``tolerance=t`` every smoothed value ends within ``t * max_j |v_jc|``
of the exact one, column by column (``max`` over all keys of that column;
a column of zeros is smoothed exactly). A certified method returns the two
sums ``total = sum_j K`` and ``acc_c = sum_j K v_jc`` with proven absolute
bounds ``e_t`` and ``e_c``. With ``total' >= e_t`` the exact mean
``acc / total`` differs from ``acc' / total'`` by at most

    (e_c + |acc' / total'| e_t) / (total' - e_t)

(write ``acc = acc' + a``, ``total = total' + b`` with ``|a| <= e_c``,
``|b| <= e_t``; then ``acc/total - acc'/total' = (a - (acc'/total') b) / total``
and ``total >= total' - e_t``). So the denominator's error enters twice:
scaled by the output itself, and through the smallest denominator it
allows. A query whose bound exceeds the tolerance (one far from every key,
whose tiny ``total`` the absolute bounds do not resolve) is computed again
by the exact engines. With ``normalize=False`` the weighted sum ends within
``t * max_j |v_jc| * total``; the log-sum of ``return_lse`` within ``t``
(its relative bound ``e_t / (total' - e_t)``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..._errors import NadarayaError
from ._sums import Sums

__all__ = ["check_tolerance", "unproven_rows"]


def check_tolerance(tolerance: Any) -> float | None:
    """``tolerance`` as a float in ``(0, 1)``, or None; refuses anything else by name.

    Parameters
    ----------
    tolerance : Any
        The caller's ``tolerance=``: a number in (0, 1) or None.
    """
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or (not isinstance(tolerance, (int, float)) and not (
            hasattr(tolerance, "__float__") and getattr(tolerance, "ndim", 0) == 0)):
        raise NadarayaError(
            f"tolerance must be a number in (0, 1) or None; got {tolerance!r}. "
            "Pass for example tolerance=1e-8 (None computes exactly)."
        )
    t = float(tolerance)
    if not (math.isfinite(t) and 0.0 < t < 1.0):
        raise NadarayaError(
            f"tolerance must be in (0, 1); got {tolerance!r}. It bounds each output's error "
            "relative to the largest |value|: pass for example 1e-8, or None for exact sums."
        )
    return t


def unproven_rows(sums: Sums, scale: torch.Tensor, tolerance: float, *,
                  normalize: bool, lse: bool) -> torch.Tensor:
    """Bool ``(m,)``: queries whose proven output bound exceeds the tolerance.

    Parameters
    ----------
    sums : Sums
        The method's sums and bounds (float64).
    scale : torch.Tensor of shape (p,)
        ``max_j |v_jc|`` per column.
    tolerance : float
    normalize : bool
        Whether the outputs are means (``acc / total``) or sums (``acc``).
    lse : bool
        Whether the log-sum is returned too (it needs ``total`` within ``tolerance``
        relative).
    """
    total, err = sums.total, sums.total_err
    low = total - err
    bad = ~(low > 0) | ~torch.isfinite(total) | ~torch.isfinite(err)
    live = scale > 0
    if sums.acc.shape[1] and bool(live.any()):
        acc, acc_err = sums.acc[:, live], sums.acc_err[:, live]
        allowed = tolerance * scale[live]
        safe_low = torch.where(bad, torch.ones_like(low), low)[:, None]
        if normalize:
            out = acc / torch.where(bad, torch.ones_like(total), total)[:, None]
            bound = (acc_err + out.abs() * err[:, None]) / safe_low
            over = ~(bound <= allowed)
        else:
            over = ~(acc_err <= allowed * safe_low)
        bad |= over.any(dim=1)
    if lse:
        bad |= ~(err <= tolerance * torch.where(bad, torch.ones_like(low), low))
    return bad
