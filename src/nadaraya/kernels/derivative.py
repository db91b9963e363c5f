"""Derivatives of the Gaussian density: signed kernels for density functionals.

The ``r``-th derivative of the normal density of standard deviation ``g`` is

    phi_g^(r)(u) = (-1)^r He_r(u / g) phi(u / g) / g^(r + 1),

with ``He_r`` the probabilists' Hermite polynomial and ``phi`` the standard
normal density. Its weights change sign, so it is a *signed* kernel (no
log-weight): the engine sums it directly, in the weight domain (dense or
streamed engine, bounded memory); engines that work on log-weights or need
``K >= 0`` (sweep, neighbours, pruned, compiled, fused, autograd, and the
certified transforms fgt and binned) refuse it with a reason that names it;
with ``tolerance=`` the exact weight-domain sum runs.

* :class:`GaussianDerivative` is the partial derivative of multi-index
  ``(r_1, ..., r_d)`` of the product of normal densities,
  ``prod_i phi_{g_i}^(r_i)(q_i - k_i)``;
* :class:`GaussianLaplacian` is the ``s``-th power of the Laplacian of the
  ``d``-dimensional normal density of covariance ``g^2 I``, ``Delta^s phi_g
  (q - k) = g^(-2 s) P_s(||q - k||^2 / g^2) phi_g(q - k)``, one radial
  polynomial ``P_s`` (``P_1(t) = t - d``) instead of a sum over multi-indices.

Density functionals are the unnormalized sums of these kernels with the
sample weights as values: ``psi_r = sum_kl w_k w_l phi_g^(r)(x_k - x_l) / W^2``
is ``w @ nadaraya.smooth(x, x, w, GaussianDerivative(r, g), normalize=False)
/ W^2``.

With ``normalize=True`` (:func:`nadaraya.smooth`'s default) the engine
divides by the signed row sum ``sum_j K(q, k_j)``, as for every signed
kernel; a row whose sum is zero to rounding is an empty row (``empty=``).
That ratio is not a weighted mean (its weights are not all positive); these
kernels are meant for ``normalize=False``. :func:`nadaraya.weights` (rows of a
normalized smoother), ``return_lse=True`` and the regression estimators
(which ask for the log row sums) refuse them, as do products ``k1 * k2``
with log-domain kernels: a product of derivatives is one
:class:`GaussianDerivative` of a multi-index.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from .._validation import all_finite
from .linear import SignedKernel
from .radial import _as_param

__all__ = ["GaussianDerivative", "GaussianLaplacian", "hermite_coefficients",
           "laplacian_coefficients"]

_HORNER = 8  # highest order evaluated from its coefficients


def _check_count(value: Any, name: str) -> int:
    """``value`` as an integer ``>= 0`` (integral floats refused too: they hide mistakes)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise NadarayaError(
            f"{name} must be an integer >= 0; got {value!r}. Pass a whole number such as 2."
        )
    return int(value)


def hermite_coefficients(order: int) -> list[int]:
    """Coefficients of ``He_order(u)`` in powers of ``u^2``, highest first.

    ``He_r(u) = u^(r mod 2) sum_m c_m u^(2 (M - m))`` with ``M = r // 2`` and
    ``c_m = (-1)^m r! / (m! (r - 2m)! 2^m)``.

    Examples
    --------
    >>> hermite_coefficients(4)
    [1, -6, 3]
    """
    r = _check_count(order, "order")
    return [(-1) ** m * math.factorial(r) // (math.factorial(m) * math.factorial(r - 2 * m)
                                             * 2**m) for m in range(r // 2 + 1)]


def laplacian_coefficients(power: int, dim: int) -> list[float]:
    """Coefficients of ``P_s(t)``, highest first: ``Delta^s exp(-r^2/2) = P_s(r^2) exp(-r^2/2)``.

    From ``P_0 = 1`` and, in ``d`` dimensions, ``P_{s+1} = 2 d G + 4 t G' - 2 t G``
    with ``G = P_s' - P_s / 2`` (the Laplacian of a radial function), in
    exact rational arithmetic.

    Examples
    --------
    >>> laplacian_coefficients(1, 3)
    [1.0, -3.0]
    """
    s, d = _check_count(power, "power"), _check_count(dim, "dim")
    p = [Fraction(1)]  # lowest power first
    for _ in range(s):
        g = [(k + 1) * c for k, c in enumerate(p[1:])] + [Fraction(0)]
        g = [a - c / 2 for a, c in zip(g, p, strict=True)]  # G = P' - P / 2
        nxt = [Fraction(0)] * (len(p) + 1)
        for k, c in enumerate(g):  # 2 d G + 4 t G' - 2 t G, term by term
            nxt[k] += (2 * d + 4 * k) * c
            nxt[k + 1] -= 2 * c
        p = nxt
    while len(p) > 1 and p[-1] == 0:
        p.pop()
    return [float(c) for c in reversed(p)]


def _horner(t: torch.Tensor, coefs: list[Any], inplace: bool) -> torch.Tensor:
    """``sum_m coefs[m] t^(M - m)`` by Horner's rule (a fresh tensor; ``t`` is not changed)."""
    if len(coefs) == 1:
        return torch.full_like(t, float(coefs[0]))
    acc = (t if coefs[0] == 1 else t * float(coefs[0])) + float(coefs[1])
    for c in coefs[2:]:
        acc = acc.mul_(t).add_(float(c)) if inplace else acc * t + float(c)
    return acc


def _hermite(u: torch.Tensor, t: torch.Tensor, order: int, inplace: bool) -> torch.Tensor:
    """``He_order(u)`` (``t = u^2``): Horner's rule in ``u^2`` up to order ``_HORNER``, above
    it the three-term recurrence ``He_{n+1} = u He_n - n He_{n-1}``, whose rounding does not
    grow with the order as that of the alternating coefficients does."""
    if order <= _HORNER:
        term = _horner(t, hermite_coefficients(order), inplace)
        if order % 2:
            term = term.mul_(u) if inplace else term * u
        return term
    prev, cur = torch.ones_like(u), u
    for n in range(1, order):
        prev, cur = cur, u * cur - n * prev
    return cur


def _gaussian_times(poly: torch.Tensor | None, r2: torch.Tensor, const: Any,
                    inplace: bool) -> torch.Tensor:
    """``poly * exp(-r2 / 2) * const`` (``poly`` None: 1), overwriting ``r2`` when allowed."""
    if inplace:
        out = r2.mul_(-0.5).exp_()
        if poly is not None:
            out.mul_(poly)
        return out.mul_(const)
    out = torch.exp(-0.5 * r2)
    if poly is not None:
        out = poly * out
    return out * const


class _NormalFamily(SignedKernel):
    """Shared parts: a positive bandwidth (scalar or per feature), centred scaled points."""

    vector_bandwidth = True

    def _set_bandwidth(self, bandwidth: Any, learnable: bool) -> None:
        h = _as_param(bandwidth, "bandwidth")
        if h.ndim > (1 if self.vector_bandwidth else 0):
            raise NadarayaError(
                f"bandwidth of {type(self).__name__} must be "
                f"{'a number or one value per feature' if self.vector_bandwidth else 'a number'}"
                f"; got shape {tuple(h.shape)}. Pass the standard deviation g > 0."
            )
        if not bool((h > 0).all()):
            raise NadarayaError(
                f"bandwidth of {type(self).__name__} must be > 0 (the normal density's "
                f"standard deviation); got {bandwidth!r}. Pass a positive number."
            )
        self.bandwidth = bandwidth
        self._learn(learnable, None)

    def _h(self, like: torch.Tensor, d: int) -> torch.Tensor:
        """The bandwidth ``(d,)`` in ``like``'s dtype, the learned factor applied."""
        h = _as_param(self.bandwidth, "bandwidth").to(like)
        factor = self._factor(like)
        if factor is not None:
            h = h * factor
        return h.expand(d) if h.ndim == 0 or h.shape[0] == 1 else h

    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        h = _as_param(self.bandwidth, "bandwidth")
        d = q.shape[-1]
        if h.ndim == 1 and h.shape[0] not in (1, d):
            raise NadarayaError(
                f"bandwidth vector must have one value per feature ({d}); got {h.shape[0]} "
                "values."
            )

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # centred on the keys' median (differences unchanged, less rounding), then scaled
        if k.shape[0]:
            centre = k.detach().median(dim=0).values
            q, k = q - centre, k - centre
        h = self._h(q, q.shape[-1])
        return q / h, k / h

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        for x in (q, k):
            if not all_finite(x):
                raise NadarayaError(
                    f"bandwidth of {self!r} is too small for these points: their distances "
                    "in its units overflow. Rescale the features (and the bandwidth) or "
                    "compute in float64."
                )

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._formula(q[:, None, :], k[None, :, :])

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._formula(q[:, None, :], k)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Weights ``(mb, nb)`` of scaled queries ``(mb, 1, e)`` and keys ``(mb or 1, nb, e)``."""
        raise NotImplementedError

    def _params(self) -> str:
        h = self.bandwidth
        if isinstance(h, torch.Tensor) and h.numel() == 1:
            h = float(h.detach())
        return f"bandwidth={h!r}"


class GaussianDerivative(_NormalFamily):
    """Partial derivative ``prod_i phi_{g_i}^(r_i)(q_i - k_i)`` of the normal density (signed).

    ``phi_g^(r)(u) = (-1)^r He_r(u / g) phi(u / g) / g^(r + 1)``, ``He_r`` the
    probabilists' Hermite polynomial; order 0 is the normal density itself.

    Parameters
    ----------
    order : int or sequence of int
        The derivative's order ``r >= 0`` on every feature, or a multi-index
        ``(r_1, ..., r_d)``, one order per feature (``(2, 2)`` is
        ``d^4 phi / dx_1^2 dx_2^2``).
    bandwidth : float or array of shape (n_features,), default 1.0
        The standard deviation ``g > 0`` (one per feature or one for all).
    learnable : bool, default False
        Train the bandwidth: ``g * softplus(raw_scale)``.

    Notes
    -----
    Signed: summed in the weight domain by the dense and streamed engines;
    the others refuse it (see the module). Meant for ``normalize=False``.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> from nadaraya.kernels import GaussianDerivative
    >>> x = np.random.default_rng(0).normal(size=200)
    >>> w = np.ones(200)
    >>> psi4 = w @ nadaraya.smooth(x, x, w, GaussianDerivative(4, 0.5), normalize=False) / 200**2
    >>> bool(psi4 > 0)
    True
    """

    name = "gaussian-derivative"

    def __init__(self, order: Any = 0, bandwidth: Any = 1.0, *,
                 learnable: bool = False) -> None:
        if isinstance(order, numbers.Real | bool):
            orders: tuple[int, ...] | int = _check_count(order, "order")
        else:
            seq = order.tolist() if isinstance(order, np.ndarray) else order
            if not isinstance(seq, list | tuple) or not seq:
                raise NadarayaError(
                    f"order must be an integer >= 0 or a non-empty sequence of them (one per "
                    f"feature); got {order!r}."
                )
            orders = tuple(_check_count(r, "order") for r in seq)
        self.order = order
        self._orders = orders
        self._set_bandwidth(bandwidth, learnable)

    def orders(self, d: int) -> tuple[int, ...]:
        """The multi-index for ``d`` features."""
        if isinstance(self._orders, int):
            return (self._orders,) * d
        return self._orders

    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        super()._check(q, k)
        d = q.shape[-1]
        if not isinstance(self._orders, int) and len(self._orders) != d:
            raise NadarayaError(
                f"order of {self!r} has {len(self._orders)} entries but the points have {d} "
                f"feature(s); give one order per feature (or one integer for all)."
            )

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        e = q.shape[-1]
        orders = self.orders(e)
        h = self._h(q, e)
        inplace = not (q.requires_grad or k.requires_grad or h.requires_grad)
        poly: torch.Tensor | None = None
        r2: torch.Tensor | None = None
        for i, r in enumerate(orders):
            u = q[..., i] - k[..., i]
            t = u * u
            if r:
                term = _hermite(u, t, r, inplace)
                poly = term if poly is None else (poly.mul_(term) if inplace else poly * term)
            r2 = t if r2 is None else (r2.add_(t) if inplace else r2 + t)
        if r2 is None:
            return q.new_ones(q.shape[0], k.shape[-2])
        power = torch.tensor([r + 1 for r in orders], dtype=h.dtype, device=h.device)
        const = (2.0 * math.pi) ** (-e / 2) * (-1) ** sum(orders) / torch.prod(h**power)
        return _gaussian_times(poly, r2, const, inplace)

    def _params(self) -> str:
        return f"order={self.order!r}, {super()._params()}"


class GaussianLaplacian(_NormalFamily):
    """``Delta^s phi_g(q - k)``: a power of the Laplacian of the normal density (signed).

    ``phi_g`` is the ``d``-dimensional normal density of covariance ``g^2 I``;
    ``Delta^s phi_g(u) = g^(-2 s) P_s(||u||^2 / g^2) phi_g(u)`` with the
    polynomial of :func:`laplacian_coefficients` (``P_1(t) = t - d``,
    ``P_2(t) = t^2 - 2 (d + 2) t + d (d + 2)``). It equals the sum over
    multi-indices of :class:`GaussianDerivative` terms, ``sum_{|a| = s}
    s! / prod a_i! prod_i d^(2 a_i) / du_i^(2 a_i)``, in one pass.

    Parameters
    ----------
    power : int, default 1
        ``s >= 0``; 0 is the normal density.
    bandwidth : float, default 1.0
        The standard deviation ``g > 0`` (one for all features: the Laplacian
        of an anisotropic density is not radial).
    learnable : bool, default False
        Train the bandwidth: ``g * softplus(raw_scale)``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import GaussianLaplacian
    >>> x = torch.zeros(1, 2, dtype=torch.float64)
    >>> float(GaussianLaplacian(1, 1.0).weights(x, x)[0, 0]) * 2 * 3.141592653589793
    -2.0
    """

    name = "gaussian-laplacian"
    vector_bandwidth = False

    def __init__(self, power: int = 1, bandwidth: Any = 1.0, *,
                 learnable: bool = False) -> None:
        self.power = _check_count(power, "power")
        self._set_bandwidth(bandwidth, learnable)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        e = q.shape[-1]
        h = self._h(q, 1)[0]
        inplace = not (q.requires_grad or k.requires_grad or h.requires_grad)
        r2: torch.Tensor | None = None
        for i in range(e):
            u = q[..., i] - k[..., i]
            t = u.mul_(u) if inplace else u * u
            r2 = t if r2 is None else (r2.add_(t) if inplace else r2 + t)
        if r2 is None:
            return q.new_ones(q.shape[0], k.shape[-2])
        poly = _horner(r2, laplacian_coefficients(self.power, e), inplace)
        const = (2.0 * math.pi) ** (-e / 2) / h ** (e + 2 * self.power)
        return _gaussian_times(poly, r2, const, inplace)

    def _params(self) -> str:
        return f"power={self.power}, {super()._params()}"
