"""Differentiable smoothing in bounded memory: a flash-attention style autograd function.

The forward pass folds key blocks into the online log-sum-exp state and keeps
only the output and, per query, the running maximum ``c`` and total ``t``
(``lse = c + log t``); the backward pass recomputes each score block and turns
the incoming gradient into a gradient of the scores::

    dS = P * (g . (v_j - out_i) + g_lse)          P = exp(s - c) / t

which it hands to the kernel's own block formula through autograd. Memory is
``O(block)`` instead of the ``O(m n)`` graph of the dense engine, for any
kernel whose block formula is a function of prepared queries and keys, and
for any mask (blocks that are fully hidden cost nothing).

Inputs carry any number of leading (batch, head) dimensions: queries
``(..., m, e)``, keys ``(..., n, e)``, values ``(..., n, p)``, so attention's
``(B, H, L, E)`` tensors run without a Python loop over heads.

Kernels whose weights are not exponentials (polynomial, signed linear) run
with ``log_domain=False``: the block gives the weights ``K`` themselves and
the output is ``sum K v / sum K``.

The values are summed as ``(v - c) / S``: centred on their midpoint and
divided by a power of two per problem, so that values near the dtype's
largest number give their representable mean instead of an overflowed sum,
and the backward pass forms ``dS`` in the same frame (no product of a
gradient and a huge value, no cancellation of a common offset), multiplying
by ``S`` once, after the kernel's own backward, whose products of ``dS``
and coordinates would otherwise overflow (or underflow). A block that
does not depend on the points through autograd (the uniform kernel, an
arg-max: weights that are piecewise constant) has a zero gradient with
respect to queries and keys almost everywhere; the values' gradient is
still the weights.
"""

from __future__ import annotations

from typing import Any

import torch

from .._job import Job
from .._state import SmoothState

__all__ = ["AutogradEngine", "BlockMask", "BlockProblem", "gradient_unit", "rescaled_gradient",
           "smooth_blocks"]

from ._passes import _backward, _forward
from ._problem import (
    Block,
    BlockMask,
    BlockProblem,
    _block_sizes,
    gradient_unit,
    rescaled_gradient,
)


class _SmoothBlocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor,
                bias: torch.Tensor | None, spec: BlockProblem) -> tuple[torch.Tensor, torch.Tensor]:
        out, frame, stat, top, total = _forward(spec, qp, kp, v, bias)
        ctx.spec = spec
        ctx.save_for_backward(qp, kp, v, bias, frame, stat, top, total)
        return out, stat

    @staticmethod
    def backward(ctx: Any, g_out: torch.Tensor, g_stat: torch.Tensor | None) -> tuple[Any, ...]:
        qp, kp, v, bias, frame, stat, top, total = ctx.saved_tensors
        needs = tuple(ctx.needs_input_grad[:4])
        if g_out is None:
            g_out = torch.zeros_like(frame)
        dq, dk, dv, db = _backward(ctx.spec, qp, kp, v, bias, frame, stat, top, total,
                                   g_out.contiguous(),
                                   g_stat, needs)  # type: ignore[arg-type]
        return dq, dk, dv, db, None


def smooth_blocks(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                  block: Block, *, mask: BlockMask | None = None,
                  bias: torch.Tensor | None = None, log_domain: bool = True, dot: bool = False,
                  dropout_p: float = 0.0,
                  point_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel smoothing of prepared points in bounded memory, differentiable.

    Parameters
    ----------
    queries : torch.Tensor of shape (..., m, e)
        Queries in the kernel's coordinates.
    keys : torch.Tensor of shape (..., n, e)
        Keys in the kernel's coordinates.
    values : torch.Tensor of shape (..., n, p)
        Values; the leading dimensions of all three must match.
    block : callable
        ``block(q, k) -> (..., mb, nb)`` log-weights (or weights when
        ``log_domain=False``); it must hold no parameter that needs a gradient.
    mask : BlockMask, optional
        Which keys each query sees.
    bias : torch.Tensor, optional
        Additive log-weights broadcastable to ``(..., m, n)``; ``-inf`` hides a
        key. Differentiable.
    log_domain : bool, default True
        Whether ``block`` returns log-weights.
    dot : bool, default False
        Whether ``block(q, k) == q @ k.mT`` exactly (faster backward).
    dropout_p : float, default 0.0
        Attention dropout on the weights (the normaliser is unaffected).
    point_scales : tuple of torch.Tensor, optional
        Powers of two ``(sq, sk)`` broadcastable to ``(..., 1, 1)``: the block
        is evaluated on ``queries / sq`` and ``keys / sk``, which changes
        homogeneous weights (``(q.k)^d``) by one factor per problem that the
        normalisation cancels; the gradients come back in the caller's
        coordinates without forming them in the scaled ones.

    Returns
    -------
    out : torch.Tensor of shape (..., m, p)
        The smoothed values; rows that see no weight are zero.
    stat : torch.Tensor of shape (..., m)
        ``log sum_j K`` (``-inf`` for empty rows) in the log domain; the
        normaliser ``sum_j K`` (zero for empty rows) otherwise.

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(2, 5, 3), torch.randn(2, 7, 3), torch.randn(2, 7, 4)
    >>> out, lse = smooth_blocks(q, k, v, lambda a, b: a @ b.mT, dot=True)
    >>> torch.allclose(out, torch.softmax(q @ k.mT, -1) @ v, atol=1e-6)
    True
    """
    lead = queries.shape[:-2]
    if bias is not None:
        bias = bias.expand(*bias.shape[:-2], queries.shape[-2], keys.shape[-2])
    sizes = _block_sizes(lead, queries.shape[-2], keys.shape[-2], queries.element_size())
    seed = 0
    if dropout_p > 0:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    spec = BlockProblem(block, mask, log_domain, dot, float(dropout_p), seed, sizes,
                        point_scales)
    return _SmoothBlocks.apply(queries, keys, values, bias, spec)


class AutogradEngine:
    """Differentiable engine with bounded memory for any kernel and mask.

    The forward pass keeps only the output and ``lse``; the backward pass
    recomputes score blocks (flash-attention style). It runs when inputs
    require grad; it refuses kernel functions, which may hold parameters its
    backward cannot see.
    """

    name = "autograd"

    def refuse(self, job: Job) -> str | None:
        from ...kernels import CallableKernel

        if not job.requires_grad:
            return "inputs do not require grad; the streamed engine is faster without a backward"
        if isinstance(job.kernel.kernel, CallableKernel):
            return ("a kernel function may hold parameters that a recomputing backward "
                    "cannot see; the dense engine keeps the whole graph")
        return None

    def cost(self, job: Job) -> float:
        return 1.0 * job.m * job.n * (job.p + job.kernel.q.shape[1] + 4)

    def run(self, job: Job) -> SmoothState:
        kernel = job.kernel
        mask = BlockMask(job.mask, (), job.m, job.n) if job.mask is not None else None
        out, lse = smooth_blocks(kernel.q, kernel.k, job.values, kernel.kernel._block,
                                 mask=mask)
        empty = torch.isinf(lse)
        total = (~empty).to(out.dtype)
        return SmoothState(lse, total, out)
