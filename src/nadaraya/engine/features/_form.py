"""The exp-dot form of a kernel: ``K(q, k) = exp(a . b + bias(q) + bias(k))``.

Positive random features estimate ``exp(a . b)``; the per-point biases are
exact factors. Kernels of this form, in their prepared coordinates:

* :class:`~nadaraya.kernels.ExpDot`: ``a = scale q``, ``b = k``, no bias;
* :class:`~nadaraya.kernels.Gaussian`: ``-||q - k||^2 / 2 = q.k - ||q||^2 / 2 - ||k||^2 / 2``;
* products of these on column groups (:class:`~nadaraya.kernels.ProductKernel`):
  the dot vectors concatenate and the biases add.

Two exact rewrites lower the variance of the estimate without changing the
kernel. The estimate of ``exp(a . b)`` from one feature has relative variance
``exp(||a + b||^2) - 1`` (Choromanski et al. 2021, Lemma 1), so:

* each Gaussian part is centred on the midpoint of the queries' and the keys'
  means (a common shift leaves ``||q - k||`` unchanged);
* the dot vectors are balanced, ``a -> c a``, ``b -> b / c`` with
  ``c^2 = rms ||b|| / rms ||a||``, which minimizes the mean of
  ``||c a||^2 + ||b / c||^2`` (``a . b`` is unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._errors import NadarayaError
from ...kernels import BoundKernel, ExpDot, Gaussian, Kernel, ProductKernel

__all__ = ["ExpDotForm", "exp_dot_form", "unsupported"]

# Largest squared norm of a point accepted: the log-features w.x - ||x||^2 / 2 then
# stay far inside float64's range for any drawn w (||w|| is about sqrt(e)).
_MAX_SQNORM = 1e290


@dataclass
class ExpDotForm:
    """Queries and keys as dot vectors and biases, in float64.

    ``K(q_i, k_j) = exp((c a_i) . (b_j / c) + bias_a[i] + bias_b[j])``: the
    balance ``c`` is kept apart so the points need no scaled copy.

    Attributes
    ----------
    a : torch.Tensor of shape (m, e)
        Query dot vectors, before the balance.
    b : torch.Tensor of shape (n, e)
        Key dot vectors, before the balance.
    bias_a : torch.Tensor of shape (m,)
        Query log-factors.
    bias_b : torch.Tensor of shape (n,)
        Key log-factors.
    scale : torch.Tensor, 0-d
        The balance ``c`` (in the graph when the points record gradients).
    """

    a: torch.Tensor
    b: torch.Tensor
    bias_a: torch.Tensor
    bias_b: torch.Tensor
    scale: torch.Tensor

    @property
    def balance(self) -> float:
        return float(self.scale.detach())


def _parts(kernel: Kernel) -> list[Kernel] | None:
    """The exp-dot parts of ``kernel``, or None when one part is of another kind."""
    if type(kernel) is ProductKernel:
        parts = list(kernel.parts)
        return parts if all(type(p) in (ExpDot, Gaussian) for p in parts) else None
    return [kernel] if type(kernel) in (ExpDot, Gaussian) else None


def unsupported(bound: BoundKernel) -> str | None:
    """Why ``bound`` has no exp-dot form here (None when it has one)."""
    if _parts(bound.kernel) is None:
        return (f"random features need an exp-dot kernel (ExpDot, Gaussian, or their "
                f"product on column groups); got {bound.kernel!r}")
    for x in (bound.q, bound.k):
        if x.numel() and float(_sqnorm(x.detach()).max()) > _MAX_SQNORM:
            return ("the points' squared norms in kernel coordinates exceed 1e290, beyond "
                    "the range where the float64 log-features are finite")
    return None


def exp_dot_form(bound: BoundKernel) -> ExpDotForm:
    """Split a bound exp-dot kernel into dot vectors and biases (float64).

    Parameters
    ----------
    bound : BoundKernel
        A kernel for which :func:`unsupported` returns None; queries
        ``(m, e)`` and keys ``(n, e)`` in its coordinates.

    Returns
    -------
    ExpDotForm
        Differentiable in the prepared points when they record gradients.
    """
    parts = _parts(bound.kernel)
    if parts is None:
        raise NadarayaError(f"kernel: {unsupported(bound)}.")
    q = bound.q.to(torch.float64)
    k = bound.k.to(torch.float64)
    if type(bound.kernel) is ProductKernel:
        slices = bound.kernel._slices
    else:
        slices = [slice(0, q.shape[1])]
    a, b = [], []
    bias_a = q.new_zeros(q.shape[0])
    bias_b = k.new_zeros(k.shape[0])
    for part, cols in zip(parts, slices, strict=True):
        qs, ks = q[:, cols], k[:, cols]
        if type(part) is Gaussian:
            centre = (qs.mean(0) + ks.mean(0)) / 2
            qs, ks = qs - centre, ks - centre
            bias_a = bias_a - 0.5 * _sqnorm(qs)
            bias_b = bias_b - 0.5 * _sqnorm(ks)
        a.append(qs)
        b.append(ks)
    aa = a[0] if len(a) == 1 else torch.cat(a, 1)
    bb = b[0] if len(b) == 1 else torch.cat(b, 1)
    # the balance stays in the graph: gradients are those of the estimate returned
    qn, kn = _sqnorm(aa).mean(), _sqnorm(bb).mean()
    if float(qn.detach()) > 0 and float(kn.detach()) > 0:
        scale = (kn / qn) ** 0.25
    else:
        scale = torch.ones((), dtype=torch.float64, device=q.device)
    return ExpDotForm(aa, bb, bias_a, bias_b, scale)


def _sqnorm(x: torch.Tensor) -> torch.Tensor:
    """Squared row norms ``(b,)`` in float64, without a squared copy of ``x``."""
    return torch.linalg.vector_norm(x, dim=1, dtype=torch.float64).square()
