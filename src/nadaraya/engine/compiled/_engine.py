"""The compiled engine: exact dense sums in a vectorized C loop.

Every query meets every key, as in the dense and streamed engines, but the
score, its exponential and the weighted accumulation are one pass of a C loop
(``dense.c``) over a block of keys held in the cache, with the arithmetic in
vector registers: no score block is written to memory. Query blocks run side
by side in :func:`~nadaraya.engine._threads.map_blocks` threads, as many as
torch's thread count (with few queries, key ranges do, and their states
merge). Float32 sums each key block in float32 and the blocks in float64, so
its error does not grow with the number of keys.

Two passes, as in the streamed engine: the bounded pass takes each key
block's offset from its bounding box (the largest score a point of the box
could have); a query whose total is then too small for its clamped weights to
be negligible is redone by the exact pass, which takes each block's largest
score itself. Either way a query far from every key keeps exact weights.

It runs the Gaussian (any bandwidth or metric, and products of Gaussians),
the Laplacian and the softmax (exp-dot) kernel and its products, without a
mask or with the leave-one-out mask, in float32 and float64 on the CPU, when
native code is available (:mod:`nadaraya.engine.native`).
"""

from __future__ import annotations

import torch

from ...kernels import ExpDot, Gaussian, Laplacian, ProductKernel
from ...masks import LeaveOneOut
from .._job import Job, exp_floor
from .._state import SmoothState
from .._threads import map_blocks
from ..streamed import StreamedEngine
from . import _library

__all__ = ["MAX_FEATURES", "MAX_VALUES", "CompiledEngine"]

# Above these the scores (a dot product per pair) or the products with the
# values dominate the exponential, and the matrix products of the fused and
# streamed engines run them faster.
MAX_FEATURES = 16
MAX_VALUES = 16
# Below this many query-key pairs the work runs in the calling thread.
_SERIAL_PAIRS = 1 << 20
# Work items per thread (dynamic balance on a busy machine), and their least sizes.
_ITEMS_PER_THREAD = 4
_MIN_ROWS = 64
_KEY_RANGE = 4096

_Item = tuple[torch.Tensor | slice, slice]


def kernel_code(kernel: object) -> int | None:
    """The code of ``kernel`` in ``dense.c``, or None when the loop does not compute it."""
    kind = type(kernel)
    if kind is Gaussian:
        return _library.KERNELS["gaussian"]
    if kind is Laplacian:
        return _library.KERNELS["laplacian"]
    if kind is ExpDot:
        return _library.KERNELS["softmax"]
    if kind is ProductKernel:
        # scores add over column groups: a product of Gaussians is the Gaussian of the
        # concatenated prepared points, a product of exp-dot kernels their exp-dot
        codes = {kernel_code(part) for part in kernel.parts}  # type: ignore[attr-defined]
        if len(codes) == 1 and codes < {_library.KERNELS["gaussian"],
                                         _library.KERNELS["softmax"]}:
            return codes.pop()
    return None


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


class CompiledEngine:
    """Exact sums of the exponential kernels in a compiled, vectorized loop (CPU).

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 6, 2000)
    >>> fit = nadaraya.smooth(x, x, np.sin(x), "gaussian", bandwidth=0.3, engine="compiled")
    >>> fit.shape
    (2000,)
    """

    name = "compiled"
    # the state holds the row sums too (offset, total), so normalize=False is exact
    unnormalized = True

    def refuse(self, job: Job) -> str | None:
        if job.device.type != "cpu":
            return f"it runs on the CPU only, and the inputs are on {job.device.type}"
        if job.dtype not in (torch.float32, torch.float64):
            return f"it computes in float32 or float64, not {str(job.dtype).replace('torch.', '')}"
        if job.requires_grad:
            return "inputs require grad and the compiled loop records no gradient"
        if job.mask is not None and type(job.mask.mask) is not LeaveOneOut:
            return f"it applies only the leave-one-out mask, and this mask is {job.mask.mask!r}"
        kernel = job.kernel.kernel
        code = kernel_code(kernel)
        if code is None:
            return (f"the kernel {kernel!r} is not one it computes (the Gaussian, products "
                    "of Gaussians, the Laplacian and the softmax kernel)")
        e = job.kernel.q.shape[1]
        if e > MAX_FEATURES:
            return (f"the points have {e} coordinates (at most {MAX_FEATURES}): their dot "
                    "products, not the exponential, dominate, and the matrix products of "
                    "the fused and streamed engines are faster")
        if job.p > MAX_VALUES:
            return (f"the values have {job.p} columns (at most {MAX_VALUES}): the products "
                    "with the values dominate, and matrix products are faster")
        if code == _library.KERNELS["softmax"] and job.m and job.n:
            bound = job.kernel.upper_bound()
            if bound is None or not bool(torch.isfinite(bound).all()):
                return "some scores q.k may overflow (their Cauchy-Schwarz bound is not finite)"
        if _library.load() is None:
            return _library.unavailable() or "its compiled loop is unavailable"
        return None

    def cost(self, job: Job) -> float:
        return 0.25 * job.m * job.n * (job.kernel.q.shape[1] + job.p + 8)

    def run(self, job: Job) -> SmoothState:
        code = kernel_code(job.kernel.kernel)
        assert code is not None
        m, n, p, dtype = job.m, job.n, job.p, job.dtype
        q = job.kernel.q.detach().contiguous()
        ldk = _round_up(max(n, 1), _library.PAD)
        kt = torch.zeros(q.shape[1], ldk, dtype=dtype)
        kt[:, :n] = job.kernel.k.detach().T
        vt = torch.zeros(p, ldk, dtype=dtype)
        vt[:, :n] = job.values.detach().T
        hide = _hidden_keys(job)
        floor = exp_floor(dtype)

        def states(rows: torch.Tensor | slice, exact: bool) -> SmoothState:
            """The float64 state of queries ``rows`` over every key."""
            count = m if isinstance(rows, slice) else rows.numel()
            items = _items(count, n, rows)

            def part(item: _Item) -> SmoothState:
                sel, cols = item
                hidden = None if hide is None else (hide[sel] - cols.start).contiguous()
                offset, total, acc = _library.dense_state(
                    code, exact, q[sel].contiguous(), kt[:, cols.start:], vt[:, cols.start:],
                    cols.stop - cols.start, ldk, hidden, floor)
                return SmoothState(offset.to(torch.float64), total, acc)

            parts = map_blocks(part, items, device=job.device)
            return _gather(parts, items, count, p)

        state = states(slice(0, m), exact=False)
        weak = torch.nonzero(StreamedEngine._too_small(job, state)).flatten()
        if weak.numel():
            redo = states(weak, exact=True)
            state.offset[weak], state.total[weak], state.acc[weak] = (
                redo.offset, redo.total, redo.acc)
        return SmoothState(state.offset.to(dtype), state.total.to(dtype), state.acc.to(dtype))


def _hidden_keys(job: Job) -> torch.Tensor | None:
    """The key each query may not see under a leave-one-out mask ``(m,)``; None unmasked."""
    if job.mask is None:
        return None
    rows = getattr(job.mask.mask, "rows", None)  # LeaveOneOut(rows=...): given keys
    if rows is None:
        return torch.arange(job.m)
    return torch.as_tensor(rows, dtype=torch.int64).reshape(-1).contiguous()


def _items(count: int, n: int, rows: torch.Tensor | slice) -> list[_Item]:
    """Blocks of queries (each over one range of keys) that run side by side."""
    threads = torch.get_num_threads()
    if count * n < _SERIAL_PAIRS or threads < 2 or count == 0:
        return [(rows, slice(0, n))]
    target = _ITEMS_PER_THREAD * threads
    row_blocks = max(1, min(target, count // _MIN_ROWS))
    key_ranges = 1 if row_blocks >= threads else max(1, min(-(-target // row_blocks),
                                                            n // _KEY_RANGE))
    step = _round_up(-(-count // row_blocks), 16)
    kstep = _round_up(-(-n // key_ranges), _library.PAD)
    items: list[_Item] = []
    for start in range(0, count, step):
        stop = min(start + step, count)
        sel = (slice(rows.start + start, rows.start + stop) if isinstance(rows, slice)
               else rows[start:stop])
        items += [(sel, slice(k, min(k + kstep, n))) for k in range(0, n, kstep)]
    return items


def _gather(parts: list[SmoothState], items: list[_Item], count: int, p: int) -> SmoothState:
    """The state of all ``count`` queries: key ranges merged, query blocks in order."""
    blocks: list[SmoothState] = []
    for part, (_, cols) in zip(parts, items, strict=True):
        if cols.start == 0 or not blocks:
            blocks.append(part)
        else:
            blocks[-1] = blocks[-1].merge(part)
    if not blocks:
        return SmoothState.empty(count, p, dtype=torch.float64, device=torch.device("cpu"))
    if len(blocks) == 1:
        return blocks[0]
    return SmoothState(*(torch.cat(x) for x in zip(
        *((s.offset, s.total, s.acc) for s in blocks), strict=True)))
