"""Unnormalized smoothing and signed kernels: the weight domain.

``normalize=False`` asks for ``out(q) = sum_j K(q, k_j) v_j`` without the
division by ``sum_j K(q, k_j)``. For an ordinary (log-domain) kernel the
engines' state already holds it: ``acc * exp(offset)``. A *signed* kernel
(``kernel.signed = True``, such as the linear kernel ``q^T M k``) has weights
that may be negative, so it has no log-weight and no log-sum-exp: it is
summed directly, block by block, in bounded memory (:class:`WeightDomainEngine`,
which the dense and streamed engines become for such a job). With
``normalize=True`` a signed smoother divides by the signed row sum, and a row
whose sum is zero (to rounding) is an empty row, handled by ``empty=``.

Engines other than dense and streamed refuse these jobs with a reason,
unless they declare ``signed = True`` or ``unnormalized = True`` themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..._config import block_elements, get_config
from ..._errors import NadarayaError
from ..._validation import all_finite
from ...masks import Visibility
from .._empty import _NO_WEIGHT, _describe, _nearest, apply_empty_policy
from .._job import Job
from .._products import WIDE, RowSums, augmented_values
from .._scale import times_exp, times_power_of_two
from .._state import MeanState, SmoothState
from .._threads import map_blocks

__all__ = [
    "SignedState",
    "WeightDomainEngine",
    "adapt_engines",
    "check_options",
    "finish",
    "is_signed",
]

# Engines that run signed and unnormalized jobs (others may opt in with attributes).
_WEIGHT_DOMAIN = ("streamed", "dense")


def is_signed(kernel: Any) -> bool:
    """Whether a kernel object gives signed weights rather than log-weights."""
    return bool(getattr(kernel, "signed", False))


def _signed_parts(kernel: Any) -> list[Any]:
    parts = getattr(kernel, "parts", None)
    if parts is None:
        return []
    found = []
    for p in parts:
        found += [p] if is_signed(p) else _signed_parts(p)
    return found


@dataclass
class SignedState(SmoothState):
    """The state of a signed sum: ``offset`` is 0, ``total`` the signed row sum.

    Attributes
    ----------
    magnitude : torch.Tensor of shape (m,)
        ``sum_j |K(q, k_j)|``: the scale against which a row sum counts as zero.
    """

    magnitude: torch.Tensor | None = None

    def merge(self, other: SmoothState) -> SignedState:
        """Combine two signed states over disjoint key sets (plain sums)."""
        mag = other.magnitude if isinstance(other, SignedState) else other.total.abs()
        return SignedState(self.offset, self.total + other.total, self.acc + other.acc,
                           self.magnitude + mag)

    @property
    def empty_rows(self) -> torch.Tensor:
        """Bool ``(m,)``: rows whose signed sum is zero to rounding."""
        eps = torch.finfo(self.total.dtype).eps
        return ~(self.total.abs() > 16 * eps * self.magnitude)


class WeightDomainEngine:
    """Sums signed weights ``K`` block by block: ``acc = sum_j K v_j``, ``total = sum_j K``.

    Parameters
    ----------
    name : {"dense", "streamed"}
        ``"dense"`` takes whole rows of keys per block of queries (as the dense
        engine); ``"streamed"`` folds key blocks (as the streamed engine). Both
        stay within the working-memory budget and are differentiable. On the
        CPU, without gradients, the blocks of queries (one per thread at least)
        run side by side in the engine's threads, torch's ops on one thread each
        (:mod:`nadaraya.engine._threads`).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def refuse(self, job: Job) -> str | None:
        return None

    def cost(self, job: Job) -> float:
        return 1.0 * job.m * job.n * (job.p + job.kernel.q.shape[1] + 2)

    def _blocks(self, job: Job) -> tuple[int, int]:
        budget = block_elements(job.dtype.itemsize, buffers=3)
        if self.name == "dense":
            return max(1, budget // max(job.n, 1)), max(job.n, 1)
        config = get_config()
        nb = max(1, min(config.key_block, job.n, budget))
        return max(1, min(config.query_block, job.m, budget // nb)), nb

    def run(self, job: Job) -> SignedState:
        """Sum the weights block by block; blocks of queries run side by side (:func:`map_blocks`)
        unless gradients are recorded."""
        kernel, bound = job.kernel.kernel, job.kernel
        mb, nb = self._blocks(job)
        vt = augmented_values(job.values)
        grad = job.requires_grad
        if not grad and job.device.type == "cpu":  # a block of queries per thread, at least
            mb = min(mb, max(1, -(-job.m // torch.get_num_threads())))

        def query_block(start: int) -> tuple[torch.Tensor, torch.Tensor]:
            rows = slice(start, min(start + mb, job.m))
            sums = RowSums(job.p + 1, rows.stop - start, job.device, in_place=not grad)
            mag = torch.zeros(rows.stop - start, dtype=WIDE, device=job.device)
            for cstart in range(0, job.n, nb):
                cols = slice(cstart, min(cstart + nb, job.n))
                status = Visibility.FULL if job.mask is None else job.mask.status(rows, cols)
                if status is Visibility.EMPTY:
                    continue
                w = kernel._weights_block(bound.q[rows], bound.k[cols])
                if status is Visibility.PARTIAL:
                    w = w.masked_fill(~job.mask.block(rows, cols), 0.0)
                if not all_finite(w):
                    raise NadarayaError(
                        f"kernel {kernel!r} gave non-finite weights (overflow or NaN) for "
                        f"queries {start}..{rows.stop - 1}. Rescale the inputs or lower the "
                        "kernel's exponent."
                    )
                sums.add(w, vt[:, cols])
                mag = mag + w.detach().abs().sum(1, dtype=WIDE)
            state = sums.state(torch.zeros(rows.stop - start, dtype=job.dtype,
                                           device=job.device), job.dtype)
            return torch.cat([state.acc, state.total[:, None]], 1), mag.to(job.dtype)

        def untracked(start: int) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.no_grad():  # a worker thread's grad mode is its own
                return query_block(start)

        starts = range(0, job.m, mb)
        parts = ([query_block(s) for s in starts] if grad
                 else map_blocks(untracked, starts, device=job.device))
        if not parts:
            empty = SmoothState.empty(0, job.p, dtype=job.dtype, device=job.device)
            return SignedState(empty.offset, empty.total, empty.acc, empty.total)
        acc = torch.cat([a for a, _ in parts])
        return SignedState(torch.zeros(job.m, dtype=job.dtype, device=job.device),
                           acc[:, -1], acc[:, :-1], torch.cat([m for _, m in parts]))


class _Refusing:
    """An engine as seen by a job it cannot run."""

    def __init__(self, engine: Any, reason: str) -> None:
        self.engine, self.name, self.reason = engine, engine.name, reason

    def refuse(self, job: Job) -> str | None:
        return self.reason

    def cost(self, job: Job) -> float:
        return math.inf

    def run(self, job: Job) -> SmoothState:
        raise NadarayaError(f"engine {self.name!r} cannot run this problem: {self.reason}.")


def adapt_engines(job: Job, engines: dict[str, Any]) -> dict[str, Any]:
    """The engines as they stand for ``job``: signed and unnormalized jobs narrow the field.

    A signed kernel replaces the dense and streamed engines by their weight-domain
    versions; every other engine refuses (unless it declares ``signed = True``).
    ``normalize=False`` with a log-domain kernel is run by the dense and streamed
    engines (and by any engine declaring ``unnormalized = True``).
    """
    kernel = job.kernel.kernel
    parts = _signed_parts(kernel)
    if parts:
        raise NadarayaError(
            f"kernel {kernel!r} combines the signed kernel {parts[0]!r} with * or +; products "
            "and sums combine log-weights, which a signed kernel does not have. Use the "
            "signed kernel on its own."
        )
    signed = is_signed(kernel)
    if not signed and job.normalize:
        return engines
    if signed:
        reason = (f"signed kernel {kernel!r}: its weights can be negative, so it needs the "
                  "weight domain (dense or streamed engine), not the log domain")
        attr = "signed"
    else:
        reason = ("normalize=False: the unnormalized sum is run by the dense and streamed "
                  "engines only")
        attr = "unnormalized"
    adapted = {}
    for name, engine in engines.items():
        if name in _WEIGHT_DOMAIN:
            adapted[name] = WeightDomainEngine(name) if signed else engine
        elif getattr(engine, attr, False):
            adapted[name] = engine
        else:
            adapted[name] = _Refusing(engine, reason)
    return adapted


def check_options(job: Job, return_lse: bool) -> None:
    """Refuse option combinations a signed kernel cannot honour."""
    if return_lse and is_signed(job.kernel.kernel):
        raise NadarayaError(
            f"return_lse=True needs positive weights, but kernel {job.kernel.kernel!r} is "
            "signed (its row sums can be zero or negative). Drop return_lse, or smooth a "
            "column of ones with normalize=False to get the row sums themselves."
        )


def finish(job: Job, state: SmoothState, empty: str) -> torch.Tensor:
    """The smoothed values ``(m, p)`` from an engine's state.

    * normalized, log-domain: ``acc / total`` with the ``empty`` policy;
    * unnormalized, log-domain: ``acc * exp(offset)``; a row with no weight
      is the empty sum, 0, whatever ``empty`` says;
    * unnormalized, signed: ``acc`` (offset 0);
    * normalized, signed: ``acc / total``, with rows whose signed sum is zero
      handled by ``empty`` (``"nearest"``: the mean value of the keys with
      the largest weight).

    Columns the job scaled (``job.exponents``) are multiplied back exactly. A
    weighted mean lies within the range of the values, so it cannot
    overflow; a sum that does (unnormalized, or the mean of a signed kernel)
    raises :class:`NadarayaError`.
    """
    signed = isinstance(state, SignedState)
    e = job.exponents
    if e is None:
        e = torch.zeros(job.p, dtype=torch.int64, device=job.device)
    if isinstance(state, MeanState):
        return _finish_means(job, state, empty, e)
    if job.normalize and not signed:
        out = apply_empty_policy(job, state, empty)
        if job.p and job.n:
            # rounding may take a mean past the values' range, and 2^e past the dtype's;
            # the clamp corrects rounding only, so the gradient is the mean's own
            # (straight through: a clamp's zero gradient would drop it at the edges)
            values = job.values.detach()
            clamped = torch.clamp(out.detach(), values.amin(dim=0), values.amax(dim=0))
            out = clamped + (out - out.detach()) if out.requires_grad else clamped
        return times_power_of_two(out, e)
    if job.normalize:
        out = times_power_of_two(apply_empty_policy(job, state, empty, problem=(
            "have a signed weight sum of zero (to rounding), so normalize=True cannot divide "
            "by it. Use normalize=False, or pass empty='nan' (NaN there) or empty='nearest' "
            "(the value of the key with the largest weight).")), e)
        _check_overflow(job, out, "the weighted means of")
        return out
    if signed:
        out = times_power_of_two(state.acc, e)
        _check_overflow(job, out, "the weighted sums of")
        return out
    out = times_exp(state.acc, state.offset, e)
    _check_overflow(job, out, "the unnormalized sums of", lse=state.lse)
    return out


def _finish_means(job: Job, state: MeanState, empty: str, e: torch.Tensor) -> torch.Tensor:
    """:func:`finish` of a :class:`MeanState`, written over its ``acc`` block by block.

    The same arithmetic as for any state (the ``empty`` policy, the clamp to the
    values' range, ``2^e``; or ``acc * exp(offset) * 2^e`` unnormalized), with
    temporaries of one block of rows.
    """
    out = state.acc
    step = max(1, block_elements(8, buffers=64) // max(job.p, 1))
    if not job.normalize:
        for start in range(0, job.m, step):
            rows = slice(start, start + step)
            out[rows] = times_exp(out[rows], state.offset[rows], e)
        _check_overflow(job, out, "the unnormalized sums of", lse=state.lse)
        return out
    # a zero-stride total is 1 on every row: none is empty
    rows = (torch.nonzero(state.empty_rows).flatten() if state.total.stride(0)
            else torch.zeros(0, dtype=torch.int64))
    if rows.numel():
        if empty == "raise":
            raise NadarayaError(f"{_describe(rows, job.m)} {_NO_WEIGHT}")
        if empty == "nan":
            out[rows] = torch.nan
        else:
            near, lost = _nearest(job, rows)
            if lost.numel():
                raise NadarayaError(
                    f"empty='nearest' cannot help {_describe(lost, job.m)}: the mask hides "
                    "every key from them. Relax the mask or pass empty='nan'."
                )
            out[rows] = near.to(out.dtype)
    low = high = None
    if job.p and job.n:
        values = job.values.detach()
        low, high = torch.aminmax(values, dim=0)
    for start in range(0, job.m, step):
        rows = slice(start, start + step)
        block = out[rows] if low is None else torch.clamp(out[rows], low, high)
        out[rows] = times_power_of_two(block, e)
    return out


def _check_overflow(job: Job, out: torch.Tensor, what: str,
                    lse: torch.Tensor | None = None) -> None:
    """Raise when some results are beyond the dtype's range (``lse``: the log row sums)."""
    over = torch.isinf(out).any(dim=1)
    if not bool(over.any()):
        return
    rows = torch.nonzero(over).flatten()
    name = str(job.dtype).replace("torch.", "")
    wider = ", compute in float64" if job.dtype != torch.float64 else ""
    more = "" if lse is None else (
        ", or use normalize=True with return_lse=True for the log of the row sums "
        f"(here up to {float(lse.detach().max()):.4g})")
    raise NadarayaError(
        f"normalize={job.normalize}: {what} {_describe(rows, job.m)} overflow {name} (their "
        f"magnitude exceeds {torch.finfo(job.dtype).max:.4g}). Rescale the values or the "
        f"kernel (a smaller scale or a larger bandwidth){wider}{more}."
    )
