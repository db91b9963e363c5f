"""Distances of points in kernel coordinates: one routine for 2-D and batched points.

:func:`sqdist` (``coef * ||q - k||^2``) and :func:`distance` (``||q - k||``)
take queries ``(..., m, e)`` and keys ``(..., n, e)`` whose leading
dimensions broadcast; a 2-D binding is the case with none, the pairs of a
query with its own keys the case ``m = 1``. Both the 2-D engines
(:meth:`Kernel.bind`) and attention (:meth:`Kernel.prepare`) use them:

* up to ``DIRECT_MAX_FEATURES`` features, differences are taken feature by
  feature (no cancellation) and each squared and scaled in one fused pass,
  into the caller's buffer when given;
* beyond, ``torch.cdist`` without the matrix-product shortcut; for the
  distance itself and for gradients, on the points of each problem divided
  by a power of two near their largest magnitude (the distances multiplied
  back), so that the squares inside ``cdist`` neither underflow (points of
  1e-23 in float32 would be at distance 0, with no gradient) nor overflow;
* half precisions are measured in float32 and rounded once;
* gradients are exact: feature by feature through autograd, and through
  ``cdist`` taken at the scaled points (:class:`_ScaledDistance`).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DIRECT_MAX_FEATURES", "distance", "sqdist"]

# Up to this many features the squared distance is formed feature by feature
# (exact and as fast); beyond, with cdist.
DIRECT_MAX_FEATURES = 4

_HALF = (torch.float16, torch.bfloat16)


def sqdist(q: torch.Tensor, k: torch.Tensor, *, coef: float = 1.0,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """``coef * ||q - k||^2`` of every pair, shape ``(..., m, n)``.

    Parameters
    ----------
    q : torch.Tensor of shape (..., m, e)
    k : torch.Tensor of shape (..., n, e)
    coef : float, default 1.0
        A factor applied in the same pass (``-0.5`` gives the Gaussian's scores).
    out : torch.Tensor of shape (..., m, n), optional
        A buffer to write into (without a gradient); the result is returned either way.

    Returns
    -------
    torch.Tensor of shape (..., m, n)
    """
    if q.dtype in _HALF:
        return _rounded(sqdist(q.float(), k.float(), coef=coef), q.dtype, out)
    grad = q.requires_grad or k.requires_grad
    e = q.shape[-1]
    if e == 0:
        shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        return q.new_zeros(shape) if out is None else out.zero_()
    if e <= DIRECT_MAX_FEATURES:
        return _direct(q, k, coef, None if grad else out)
    if grad:
        return coef * distance(q, k).square()
    # r^2 itself under- or overflows where the squares inside cdist do: no scaling
    r = _cdist(q, k).square_()
    return torch.mul(r, coef, out=out) if out is not None else r.mul_(coef)


def distance(q: torch.Tensor, k: torch.Tensor, *,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """``||q - k||`` of every pair, shape ``(..., m, n)``, in the inputs' dtype.

    Measured on each problem's points divided by a power of two near their
    largest magnitude and multiplied back, so that tiny and huge points keep
    their distances and gradients. Parameters as :func:`sqdist`.
    """
    if q.dtype in _HALF:
        return _rounded(distance(q.float(), k.float()), q.dtype, out)
    unit = _problem_scale(q, k)
    if q.requires_grad or k.requires_grad:
        return _ScaledDistance.apply(q, k, unit)
    return _scaled(q, k, unit, out)


def _scaled(q: torch.Tensor, k: torch.Tensor, unit: torch.Tensor,
            out: torch.Tensor | None) -> torch.Tensor:
    """``||q / unit - k / unit|| * unit`` without a gradient (into ``out`` when given).

    The one formula of the distance's value, with or without a gradient: a
    differentiable pass that recomputes a block (the autograd engine's
    backward) must round as the forward did, or a score one ulp above the
    forward's maximum (1e23 for scores of 1e39 in float64) makes
    ``exp(s - max)`` overflow.
    """
    if 0 < q.shape[-1] <= DIRECT_MAX_FEATURES:
        return _direct(q / unit, k / unit, 1.0, out).sqrt_().mul_(unit)
    r = _cdist(q / unit, k / unit)
    return torch.mul(r, unit, out=out) if out is not None else r.mul_(unit)


def _rounded(x: torch.Tensor, dtype: torch.dtype, out: torch.Tensor | None) -> torch.Tensor:
    """``x`` measured in float32, rounded once to the half precision ``dtype`` (into ``out``)."""
    return out.copy_(x) if out is not None else x.to(dtype)


def _direct(q: torch.Tensor, k: torch.Tensor, coef: float,
            out: torch.Tensor | None) -> torch.Tensor:
    """``coef * sum_f (q_f - k_f)^2`` feature by feature (``e >= 1``)."""
    qt, kt = q.movedim(-1, 0), k.movedim(-1, 0)
    if q.requires_grad or k.requires_grad:
        # the same operations as below, out of place: a differentiable pass that
        # recomputes a block (the autograd engine's backward) must round as the
        # forward did, or a score above the forward's maximum (by one ulp of 2e9 in
        # float32: 128) makes exp(s - max) overflow
        zero = torch.zeros((), dtype=q.dtype, device=q.device)
        total = zero
        for a, b in zip(qt, kt, strict=True):
            diff = a[..., :, None] - b[..., None, :]
            total = torch.addcmul(total, diff, diff, value=coef)
        return total
    qt, kt = qt.contiguous(), kt.contiguous()
    zero = torch.zeros((), dtype=q.dtype, device=q.device)
    out = torch.sub(qt[0][..., :, None], kt[0][..., None, :], out=out)
    torch.addcmul(zero, out, out, value=coef, out=out)
    if qt.shape[0] > 1:
        tmp = torch.empty_like(out)
        for f in range(1, qt.shape[0]):
            torch.sub(qt[f][..., :, None], kt[f][..., None, :], out=tmp)
            out.addcmul_(tmp, tmp, value=coef)
    return out


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
        return _scaled(q.detach(), k.detach(), unit, None)

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
