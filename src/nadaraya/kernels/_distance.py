"""Distances of batched points, in the inputs' dtype, with exact gradients.

Used by the batched form of the radial kernels (:meth:`Kernel.prepare`): the
points of each ``(..., L, E)`` problem are divided by a power of two near
their largest magnitude before ``torch.cdist`` and the distances multiplied
back, so that neither the squares inside ``cdist`` nor their gradients
underflow or overflow; half precisions are measured in float32.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["distance", "distance2"]


def distance(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``||q - k||`` of every pair, in the inputs' dtype.

    ``torch.cdist`` has no float16 or bfloat16 kernel: half precisions are
    measured in float32 and rounded once. The points of each problem are
    divided by a power of two near their largest magnitude and the distances
    multiplied back: the squares inside ``cdist`` neither underflow (points
    of 1e-23 in float32 would be at distance 0, with no gradient) nor
    overflow.
    """
    if q.dtype in (torch.float16, torch.bfloat16):
        return distance(q.float(), k.float()).to(q.dtype)
    return _ScaledDistance.apply(q, k, _problem_scale(q, k))


def _cdist(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist")


class _ScaledDistance(torch.autograd.Function):
    """``||q - k||`` measured on the points divided by ``unit`` and multiplied back.

    The distance is homogeneous of degree one: its gradient at the scaled
    points is its gradient at the points. The backward takes it there
    directly; autograd through ``/ unit`` and ``* unit`` would first multiply
    the incoming gradient by ``unit`` (underflow for tiny points).
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor,
                unit: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(q, k, unit)
        return _cdist(q / unit, k / unit) * unit

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, unit = ctx.saved_tensors
        with torch.enable_grad():
            qs = (q.detach() / unit).requires_grad_(ctx.needs_input_grad[0])
            ks = (k.detach() / unit).requires_grad_(ctx.needs_input_grad[1])
            wrt = [t for t in (qs, ks) if t.requires_grad]
            grads = iter(torch.autograd.grad(_cdist(qs, ks), wrt, g) if wrt else ())
        dq = next(grads) if ctx.needs_input_grad[0] else None
        dk = next(grads) if ctx.needs_input_grad[1] else None
        return dq, dk, None


def _problem_scale(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A power of two ``(..., 1, 1)`` near the largest magnitude of each problem's points."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    top = q.new_zeros(*lead, 1, 1)
    for x in (q, k):
        if x.numel():
            top = torch.maximum(top, x.detach().abs().amax(dim=(-2, -1), keepdim=True))
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    _, exponent = torch.frexp(top)
    return torch.ldexp(torch.ones_like(top), exponent - 1)


def distance2(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return distance(q, k).square()
