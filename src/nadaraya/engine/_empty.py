"""What to do for a query whose visible keys carry no weight."""

from __future__ import annotations

import torch

from .._config import block_elements
from .._errors import NadarayaError
from ._job import Job
from ._state import SmoothState

__all__ = ["EMPTY_POLICIES", "apply_empty_policy"]

EMPTY_POLICIES = ("raise", "nan", "nearest")


def _describe(rows: torch.Tensor, m: int) -> str:
    shown = ", ".join(str(int(i)) for i in rows[:10])
    more = "" if rows.numel() <= 10 else f", ... ({rows.numel() - 10} more)"
    return f"{rows.numel()} of {m} queries (indices {shown}{more})"


def check_policy(empty: str) -> None:
    if empty not in EMPTY_POLICIES:
        raise NadarayaError(
            f"empty must be one of {', '.join(map(repr, EMPTY_POLICIES))}; got {empty!r}."
        )


_NO_WEIGHT = (
    "see no key with positive weight: every visible key is masked or outside the kernel's "
    "support. Widen the bandwidth, relax the mask, or pass empty='nan' (NaN there) or "
    "empty='nearest' (the nearest visible key)."
)


def apply_empty_policy(job: Job, state: SmoothState, empty: str, *,
                       problem: str = _NO_WEIGHT) -> torch.Tensor:
    """Smoothed values ``(m, p)`` with the empty rows handled by ``empty``.

    ``"raise"`` raises :class:`NadarayaError` naming the queries, followed by
    ``problem`` (what is wrong with those rows and the fixes); ``"nan"`` puts
    NaN there; ``"nearest"`` gives the value of the nearest visible key (the
    mean of the tied ones): the limit of the kernel as its bandwidth goes to
    zero.
    """
    out = state.mean()
    rows = torch.nonzero(state.empty_rows).flatten()
    if rows.numel() == 0:
        return out
    if empty == "raise":
        raise NadarayaError(f"{_describe(rows, job.m)} {problem}")
    out = out.clone()
    if empty == "nan":
        out[rows] = torch.nan
        return out
    values, lost = _nearest(job, rows)
    if lost.numel():
        raise NadarayaError(
            f"empty='nearest' cannot help {_describe(lost, job.m)}: the mask hides every key "
            "from them. Relax the mask or pass empty='nan'."
        )
    out[rows] = values
    return out


def _nearest(job: Job, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean value of the nearest visible keys of ``rows``; and rows with none visible.

    Rows go in chunks whose rank blocks fit the working-memory budget.
    """
    cols_step = min(4096, max(job.n, 1))
    # a rank block, its mask, and the hits (in the values' dtype)
    rows_step = max(1, block_elements(job.dtype.itemsize, buffers=3) // cols_step)
    values, lost = [], []
    for start in range(0, rows.numel(), rows_step):
        chunk = rows[start:start + rows_step]
        mean, count = _nearest_chunk(job, chunk, cols_step)
        values.append(mean)
        lost.append(chunk[count == 0])
    if not values:
        return job.values.new_zeros(0, job.p), rows
    return torch.cat(values), torch.cat(lost)


def _nearest_chunk(job: Job, rows: torch.Tensor,
                   step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean value of the nearest visible keys of ``rows``, and their count."""
    best = torch.full((rows.numel(),), -torch.inf, dtype=job.dtype, device=job.device)
    # first pass: the best rank; second pass: average the keys at that rank
    for phase in ("best", "mean"):
        acc = torch.zeros(rows.numel(), job.p, dtype=job.dtype, device=job.device)
        count = torch.zeros(rows.numel(), dtype=job.dtype, device=job.device)
        for start in range(0, job.n, step):
            cols = slice(start, min(start + step, job.n))
            r = job.kernel.rank(rows, cols)
            if job.mask is not None:
                index = torch.arange(cols.start, cols.stop, device=job.device)
                visible = job.mask.pairs(rows, index.expand(rows.numel(), -1))
                r = r.masked_fill(~visible, -torch.inf)
            if phase == "best":
                best = torch.maximum(best, r.max(dim=1).values)
            else:
                hit = ((r == best[:, None]) & torch.isfinite(r)).to(job.dtype)
                acc += hit @ job.values[cols]
                count += hit.sum(1)
    return acc / count.clamp(min=1)[:, None], count
