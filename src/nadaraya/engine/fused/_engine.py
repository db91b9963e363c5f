"""The fused engine: torch's fused attention kernels for the exp-dot family.

Softmax attention computes ``softmax(Q K^T) V`` without forming the score
matrix. Every kernel whose score is a dot product of augmented vectors is
that operator: the softmax kernel itself, and the Gaussian through its key
bias, ``-||q - k||^2 / 2 = [q, -||q||^2 / 2, 1] . [k, 1, -||k||^2 / 2]``
(products of both on column groups concatenate their vectors). The bound
kernel gives these vectors as ``dot_form()`` and bounds their rounding error
as ``dot_error()``; the engine runs only where that error is within the
dtype's tolerance.

The kernels used are the ones that also return the per-query log-sum-exp:
``_scaled_dot_product_flash_attention_for_cpu`` on CPU and
``_scaled_dot_product_efficient_attention`` on CUDA. A mask becomes
``is_causal`` for causal masks (any offset, by shifting rows or splitting
keys) or an additive bias of one block of query rows; key ranges a block
cannot see are skipped, and the partial results of several key ranges merge
through the log-sum-exp state. Outputs are differentiable; so is the
log-sum-exp, through one more attention pass in the backward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

from ..._config import block_elements, get_config
from ...masks import Causal, Visibility
from .._job import Job
from .._products import WIDE
from .._state import SmoothState
from .._threads import map_blocks
from ..streamed import dot_form_tolerance

__all__ = ["FusedEngine"]

_CPU_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
_CUDA_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Keys per tile when looking for the key ranges a block of queries cannot see.
_TILE = 1024
# Fewest query rows per block: the memory floor is this many rows by one tile.
_MIN_ROWS = 32
# Above this many value columns (and four times the dot form's width) the CPU
# kernel's padding of queries and keys to the values' width loses to streaming.
_CPU_WIDE_VALUES = 256
# Width (head size) limit of the CUDA memory-efficient kernel used here.
_CUDA_MAX_WIDTH = 256
# Keys per kernel call below float64: runs merge in float64 (see _pieces).
_RUN = 1024

Segment = tuple[slice, str]  # key range and "full" | "causal" | "partial"


def _cpu_kernel() -> Callable[..., tuple[torch.Tensor, torch.Tensor]] | None:
    return getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _cuda_kernel() -> Callable[..., tuple[torch.Tensor, ...]] | None:
    return getattr(torch.ops.aten, "_scaled_dot_product_efficient_attention", None)


def _width(e: int, p: int, device: torch.device) -> tuple[int, int]:
    """Head sizes ``(of queries and keys, of values)`` after zero padding."""
    if device.type == "cuda":
        return -(-e // 8) * 8, -(-max(p, 1) // 8) * 8
    w = max(e, p, 1)  # the CPU kernel wants one head size for all three
    return w, w


def _bias(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask ``(1, 1, mb, nb)``: 0 where visible, -inf elsewhere."""
    if visible.device.type != "cuda":
        zero = torch.zeros((), dtype=dtype)
        return torch.where(visible, zero, zero - torch.inf)[None, None]
    # the CUDA kernel wants rows aligned to 16 elements; slicing keeps that stride
    mb, nb = visible.shape
    bias = torch.zeros(mb, -(-nb // 16) * 16, dtype=dtype, device=visible.device)[:, :nb]
    bias.masked_fill_(~visible, -torch.inf)
    return bias[None, None]


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
            bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of ``q (mb, w)`` over ``k (nb, w)``, ``v (nb, wv)``, scale 1.

    Widths are already padded for the device (see :func:`_width`). Returns
    the output ``(mb, wv)`` and the log-sum-exp ``(mb,)`` of the scores.
    """
    mb = q.shape[0]
    if mb == 1 and q.device.type == "cpu":  # torch's CPU kernel is slow for one row
        q = q.expand(2, -1)
        bias = None if bias is None else bias.expand(-1, -1, 2, -1)
    q4, k4, v4 = (t.contiguous()[None, None] for t in (q, k, v))
    if q.device.type == "cuda":
        out, lse = _cuda_kernel()(q4, k4, v4, bias, True, 0.0, causal, scale=1.0)[:2]
    else:
        out, lse = _cpu_kernel()(q4, k4, v4, 0.0, causal, attn_mask=bias, scale=1.0)
    return out[0, 0, :mb], lse[0, 0, :mb].to(q.dtype)


class _LogSumExp(torch.autograd.Function):
    """Attaches the gradient to a log-sum-exp the fused kernels return detached.

    ``d lse_i = sum_j w_ij d(q_i . k_j)``, so the gradient for ``q_i`` is the
    attention output with the keys as values, and for ``k_j`` the transposed
    weights applied to ``g_i q_i``: one more attention pass and its backward.
    """

    @staticmethod
    def forward(ctx, lse, q, k, attend):  # type: ignore[override]
        ctx.attend = attend
        ctx.save_for_backward(q, k)
        return lse.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        q, k = ctx.saved_tensors
        with torch.enable_grad():
            keys = k.detach().requires_grad_(True)
            mean_key, _ = ctx.attend(q.detach(), k.detach(), keys)
            grad_k = torch.autograd.grad(mean_key, keys, grad[:, None] * q.detach())[0]
        grad_q = grad[:, None] * mean_key.detach()
        return None, grad_q, grad_k, None


def _segment(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
             visible: torch.Tensor | None) -> SmoothState:
    """The state of queries ``q`` over one key range (``visible``: its bool mask)."""
    empty = None
    bias = None
    if visible is not None:
        empty = ~visible.any(dim=1)
        # rows that see nothing attend to everything and are discarded below:
        # no kernel then meets a row of -inf, forward or backward
        bias = _bias(visible | empty[:, None] if bool(empty.any()) else visible, q.dtype)

    def attend(qq: torch.Tensor, kk: torch.Tensor,
               vv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _attend(qq, kk, vv, causal, bias)

    out, lse = attend(q, k, v)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        lse = _LogSumExp.apply(lse, q, k, attend)
    if empty is None:
        return SmoothState(lse, torch.ones_like(lse.detach()), out)
    lse = torch.where(empty, -torch.inf, lse)
    out = torch.where(empty[:, None], 0.0, out)
    return SmoothState(lse, (~empty).to(q.dtype), out)


def _pieces(cols: slice, kind: str, dtype: torch.dtype) -> list[slice]:
    """Key runs of a segment given to one kernel call each.

    The kernels add the keys' products one after another in the inputs'
    dtype; in float32 that rounding grows with the keys, so the keys of a
    full or partial segment go in runs of :data:`_RUN` whose states merge in
    float64. (A causal segment is aligned to its first key: it stays whole.)
    """
    if dtype == torch.float64 or kind == "causal":
        return [cols]
    return [slice(a, min(a + _RUN, cols.stop)) for a in range(cols.start, cols.stop, _RUN)]


def _wide(state: SmoothState) -> SmoothState:
    """``state`` in float64, for merging without rounding."""
    return SmoothState(state.offset.to(WIDE), state.total.to(WIDE), state.acc.to(WIDE))


def _tiles(job: Job, rows: slice, budget: int) -> Iterator[Segment]:
    """Key ranges of a query block, fully visible or partial; hidden ones left out."""
    mask = job.mask
    cap = max(_TILE, budget // max(rows.stop - rows.start, 1))
    start, kind = 0, None
    for c in range(0, job.n, _TILE):
        cols = slice(c, min(c + _TILE, job.n))
        status = mask.status(rows, cols)
        now = {Visibility.FULL: "full", Visibility.PARTIAL: "partial"}.get(status)
        if now != kind or (kind == "partial" and cols.stop - start > cap):
            if kind is not None:
                yield slice(start, c), kind
            start, kind = c, now
    if kind is not None:
        yield slice(start, job.n), kind


def _causal(rows: slice, offset: int, n: int) -> Iterator[tuple[slice, list[Segment]]]:
    """Query ``i`` sees keys ``j <= i + offset``: torch's top-left ``is_causal`` on
    the keys from ``s = first row + offset`` on, and every key before ``s``."""
    first = min(max(rows.start, -offset), rows.stop)
    if first > rows.start:
        yield slice(rows.start, first), []  # rows that see no key
    if first < rows.stop:
        s = first + offset
        segments = [(slice(0, min(s, n)), "full")] if s > 0 else []
        if s < n:
            segments.append((slice(s, n), "causal"))
        yield slice(first, rows.stop), segments


def _threads(job: Job) -> int:
    """Threads the engine runs query blocks on."""
    return torch.get_num_threads() if job.device.type == "cpu" and not job.requires_grad else 1


def _layout(job: Job) -> Iterator[tuple[slice, Iterable[Segment]]]:
    """Blocks of query rows, each with the key ranges it is attended over."""
    m, n, mask = job.m, job.n, job.mask
    config = get_config()
    if mask is None or type(mask.mask) is Causal:
        # blocks bound the padded copies of the queries and the outputs, and
        # give each of the engine's threads (see run) a share of the rows
        wq, wv = _width(job.kernel.q.shape[1], job.p, job.device)
        mb = max(_MIN_ROWS, min(block_elements(job.dtype.itemsize, buffers=1) // (wq + wv),
                                -(-m // _threads(job))))
        for start in range(0, m, mb):
            rows = slice(start, min(start + mb, m))
            if mask is None:
                yield rows, [(slice(0, n), "full")]
            else:
                yield from _causal(rows, mask.mask.offset, n)
        return
    # a block's bool mask (1 byte) and additive mask (itemsize) within the budget
    budget = max(1, int(config.working_memory * 2**20) // (job.dtype.itemsize + 1))
    mb = max(1, min(m, config.query_block, max(_MIN_ROWS, budget // n)))
    for start in range(0, m, mb):
        rows = slice(start, min(start + mb, m))
        yield rows, _tiles(job, rows, budget)


class FusedEngine:
    """Softmax attention kernels of torch (CPU flash, CUDA memory-efficient).

    Runs the softmax kernel, the Gaussian (scalar, per-feature or metric
    bandwidth) and their products on column groups, under any mask, where
    the dot-product form of the kernel is exact to the dtype's tolerance.
    Memory beyond the inputs and outputs is a zero-padded copy of the keys
    and values (torch's CPU kernel wants one width for queries, keys and
    values) and one block of the mask; it is differentiable in the queries,
    keys, values and kernel parameters, the log-sum-exp included.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 6, 200)
    >>> nadaraya.explain(x, x, np.sin(x), "gaussian", bandwidth=0.3, engine="fused").engine
    'fused'
    """

    name = "fused"
    # the state holds the row sums too (offset = lse), so normalize=False is exact
    unnormalized = True

    def refuse(self, job: Job) -> str | None:
        device, dtype = job.device, job.dtype
        if device.type == "cpu":
            if _cpu_kernel() is None:
                return ("this PyTorch has no fused CPU attention kernel that returns the "
                        "log-sum-exp; upgrade PyTorch to use it")
            if dtype not in _CPU_DTYPES:
                return f"no fused CPU attention kernel for {_name(dtype)}"
        elif device.type == "cuda":
            if _cuda_kernel() is None:
                return ("this PyTorch has no memory-efficient CUDA attention kernel; "
                        "upgrade PyTorch to use it")
            if dtype not in _CUDA_DTYPES:
                return (f"no fused CUDA attention kernel computes in {_name(dtype)} (torch's "
                        "would fall back to forming every query-key score); use float32")
        else:
            return f"no fused attention kernel is used on {device.type} devices"
        kernel = job.kernel.kernel
        form = job.kernel.dot_form()
        if form is None:
            return (f"the kernel {kernel!r} is not softmax attention: only the softmax kernel, "
                    "the Gaussian and their products on column groups have the dot-product "
                    "form that fused attention computes")
        error, limit = job.kernel.dot_error(), dot_form_tolerance(dtype)
        if not error <= limit:
            wider = error * torch.finfo(torch.float64).eps / torch.finfo(dtype).eps
            hint = ("; in float64 it would be exact enough" if dtype != torch.float64
                    and wider <= dot_form_tolerance(torch.float64) else "")
            return (f"the {kernel.name} kernel's dot form would lose up to {error:.2g} in the "
                    f"log-weights at {_name(dtype)} (limit {limit:.2g}): the points lie too "
                    f"many bandwidths from their centre for this precision{hint}")
        e = form[0].shape[1]
        if device.type == "cpu" and job.p > max(_CPU_WIDE_VALUES, 4 * e):
            return (f"the values have {job.p} columns and the kernel's dot form {e}: the CPU "
                    f"kernel wants one width for both, and padding the queries and keys to "
                    f"{job.p} columns makes it slower than the streamed engine")
        if device.type == "cuda":
            width = max(_width(e, job.p, device))
            if width > _CUDA_MAX_WIDTH:
                return (f"the fused CUDA kernel takes at most {_CUDA_MAX_WIDTH} columns per "
                        f"query, key or value; this problem needs {width}")
        return None

    def cost(self, job: Job) -> float:
        wq, wv = _width(job.kernel.q.shape[1], job.p, job.device)
        return 0.5 * job.m * job.n * (wq + wv + 4)

    def run(self, job: Job) -> SmoothState:
        qa, ka = job.kernel.dot_form()
        wq, wv = _width(qa.shape[1], job.p, job.device)
        qa, ka = (F.pad(t, (0, wq - t.shape[1])) for t in (qa, ka))
        values = F.pad(job.values, (0, wv - job.p))

        def block(item: tuple[slice, Iterable[Segment]]) -> SmoothState:
            rows, segments = item
            state = None
            for cols, kind in segments:
                visible = job.mask.block(rows, cols) if kind == "partial" else None
                for piece in _pieces(cols, kind, job.dtype):
                    seen = None if visible is None else visible[
                        :, piece.start - cols.start:piece.stop - cols.start]
                    part = _wide(_segment(qa[rows], ka[piece], values[piece], kind == "causal",
                                          seen))
                    state = part if state is None else state.merge(part)
            if state is None:
                state = SmoothState.empty(rows.stop - rows.start, job.p, dtype=job.dtype,
                                          device=job.device)
            # a copy of the first p columns frees the padded ones block by block
            return SmoothState(state.offset.to(job.dtype), state.total.to(job.dtype),
                               state.acc[:, :job.p].to(job.dtype).contiguous())

        # Query blocks run in the engine's own threads, each kernel call on one
        # thread: on a busy machine torch's intra-op threads stall each other
        # on the many small calls a mask makes (see engine/_threads.py).
        # Autograd records its graph in the calling thread.
        if job.requires_grad:
            parts = [block(item) for item in _layout(job)]
        else:
            parts = map_blocks(block, _layout(job), device=job.device)
        if len(parts) == 1:
            return parts[0]
        return SmoothState(*(torch.cat(x) for x in zip(
            *((s.offset, s.total, s.acc) for s in parts), strict=True)))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
