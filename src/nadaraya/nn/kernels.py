"""Attention kernels: the similarity ``K(q, k)`` of a kernel smoother over tokens.

Each kernel is a :class:`torch.nn.Module` (its scale can train) and a
:class:`nadaraya.kernels.Kernel` (so :func:`nadaraya.smooth` accepts it on
2-D inputs). The formulas follow Tsai et al. (2019), *Transformer Dissection*,
with ``s`` the scale (``1 / sqrt(head_dim)`` by default, as in
``scaled_dot_product_attention``):

============  =====================================  ==========================
name          K(q, k)                                 notes
============  =====================================  ==========================
softmax       exp(s q.k)                              scaled dot-product attention
rbf           exp(-s ||q - k||^2 / 2)                 Gaussian Nadaraya-Watson, h = s^-1/2
laplacian     exp(-sqrt(s) ||q - k||)                 Laplacian, h = s^-1/2
cosine        exp(s cos(q, k))                        s = sqrt(head_dim) by default
polynomial    (s q.k + c)^degree                      not an exponential; degree 2
linear        s q.k                                   signed: the normaliser can vanish
============  =====================================  ==========================

A learnable scale is stored unconstrained, ``s = base * softplus(raw)`` with
``raw`` initialised so that ``s = base``. Products ``k_f * k_p`` of kernels on
different feature columns (``.on(columns)``) give Tsai's positional product
kernel ``k_F(f_q, f_k) k_P(t_q, t_k)``.

Scores come in the inputs' dtype, float16 and bfloat16 included (distances
are measured in float32 and rounded once: ``torch.cdist`` has no half
kernel); :func:`~nadaraya.nn.functional.kernel_attention` sums them in
float32 outside the fused kernel.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError
from ..engine.batched import PreparedKernel
from ..kernels import BoundKernel, Kernel
from ..kernels.dot import DotScores
from ..kernels.similarity import unit_rows

__all__ = [
    "ATTENTION_KERNELS",
    "AttentionKernel",
    "AttentionProduct",
    "CosineKernel",
    "LaplacianKernel",
    "LinearKernel",
    "PolynomialKernel",
    "RBFKernel",
    "SoftmaxKernel",
    "get_attention_kernel",
]

_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(_SOFTPLUS_ONE) == 1


def _select(x: torch.Tensor, columns: Any) -> torch.Tensor:
    if columns is None:
        return x
    if isinstance(columns, slice):
        return x[..., columns]
    return x[..., list(columns)]


class AttentionKernel(nn.Module, Kernel):
    """Base class of attention kernels.

    Parameters
    ----------
    scale : float, optional
        The kernel's scale ``s``; the kernel's default for the head dimension
        when None.
    learnable : bool, default False
        Train the scale: ``s = base * softplus(raw)``, ``raw`` a parameter.
    heads : int, optional
        With ``learnable``, one scale per head; inputs are then
        ``(..., heads, L, E)``.
    """

    name = "kernel"
    log_domain = True

    def __init__(self, scale: float | None = None, *, learnable: bool = False,
                 heads: int | None = None) -> None:
        nn.Module.__init__(self)
        if scale is not None:
            if isinstance(scale, torch.Tensor) or not (
                    isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
                raise NadarayaError(
                    f"scale must be a positive finite number; got {scale!r}. For a trainable "
                    "scale pass learnable=True (it is stored behind a positive transform)."
                )
        if heads is not None and (not isinstance(heads, int) or heads < 1):
            raise NadarayaError(f"heads must be a positive integer; got {heads!r}.")
        self.base = None if scale is None else float(scale)
        self.heads = heads
        self.raw_scale: nn.Parameter | None = None
        if learnable:
            shape = () if heads is None else (heads,)
            self.raw_scale = nn.Parameter(torch.full(shape, _SOFTPLUS_ONE))

    # -- scale -----------------------------------------------------------------
    def default_scale(self, dim: int) -> float:
        """Scale used when none is given, for ``dim`` features per head."""
        return 1.0 / math.sqrt(max(dim, 1))

    def scale(self, dim: int, like: torch.Tensor) -> torch.Tensor | float:
        """The scale for inputs like ``like`` ``(..., L, dim)``: a float or a tensor."""
        base = self.default_scale(dim) if self.base is None else self.base
        if self.raw_scale is None:
            return base
        s = base * nn.functional.softplus(self.raw_scale).to(like)
        if self.heads is not None:
            if like.ndim < 3 or like.shape[-3] != self.heads:
                raise NadarayaError(
                    f"this kernel has one scale per head ({self.heads} heads) and needs inputs "
                    f"(..., {self.heads}, L, E); got shape {tuple(like.shape)}."
                )
            s = s[:, None, None]
        return s

    # -- batched interface -----------------------------------------------------
    def prepare(self, queries: torch.Tensor, keys: torch.Tensor) -> PreparedKernel:
        """Move ``(..., m, E)`` queries and ``(..., n, E)`` keys into kernel coordinates."""
        q, k = _select(queries, self.columns), _select(keys, self.columns)
        return self._prepared(q, k)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        raise NotImplementedError

    def scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Log-weights ``(..., m, n)`` (the weights for non-exponential kernels)."""
        prep = self.prepare(queries, keys)
        out = prep.block(prep.queries, prep.keys)
        # a product of positive weights and exponentials is summed in the log domain
        return torch.exp(out) if prep.log_domain and not self.log_domain else out

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return self.scores(queries, keys)

    # -- engine (2-D) interface ------------------------------------------------
    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prep = self._prepared(q, k)
        return prep.queries, prep.keys

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        return self._formula(q, k)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._block(q[:, None, :], k)[:, 0, :]

    def on(self, columns: Any) -> AttentionKernel:
        """A kernel that reads only ``columns`` of the last dimension (shares parameters)."""
        other = copy.copy(self)
        other.__dict__["columns"] = columns
        return other

    def __mul__(self, other: Kernel) -> Kernel:
        if isinstance(other, AttentionKernel):
            left = self.parts if isinstance(self, AttentionProduct) else [self]
            right = other.parts if isinstance(other, AttentionProduct) else [other]
            return AttentionProduct([*left, *right])
        return Kernel.__mul__(self, other)

    def extra_repr(self) -> str:
        parts = [] if self.base is None else [f"scale={self.base:g}"]
        if self.raw_scale is not None:
            parts.append("learnable=True")
        if self.columns is not None:
            parts.append(f"columns={self.columns!r}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return nn.Module.__repr__(self)


class SoftmaxKernel(DotScores, AttentionKernel):
    """``K = exp(s q.k)``: scaled dot-product attention's kernel (runs through SDPA)."""

    name = "softmax"

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs = q * self.scale(q.shape[-1], q)
        return PreparedKernel(qs, k, _dot, dot=(qs, k), dot_error=0.0, is_dot=True,
                              name=self.name)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _dot(q, k)


def _dot(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-1, -2)


class _Radial(AttentionKernel):
    """Kernels of the distance ``||q - k|| / h`` with ``h = s^-1/2``."""

    def _coords(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        root = self.scale(q.shape[-1], q)
        root = math.sqrt(root) if isinstance(root, float) else torch.sqrt(root)
        # centre on the middle of the keys' range: distances do not change,
        # rounding shrinks (halved first, so that it cannot overflow)
        centre: torch.Tensor | float = 0.0
        if k.shape[-2]:
            kd = k.detach()
            centre = kd.amin(dim=-2, keepdim=True) / 2 + kd.amax(dim=-2, keepdim=True) / 2
        return (q - centre) * root, (k - centre) * root

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        return q.new_zeros(q.shape[0])

    def _metric_points(self, q: torch.Tensor,
                       k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return -_distance2(q, k)


def _distance(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``||q - k||`` of every pair, in the inputs' dtype.

    ``torch.cdist`` has no float16 or bfloat16 kernel: half precisions are
    measured in float32 and rounded once. The points of each problem are
    divided by a power of two near their largest magnitude and the distances
    multiplied back: the squares inside ``cdist`` neither underflow (points
    of 1e-23 in float32 would be at distance 0, with no gradient) nor
    overflow.
    """
    if q.dtype in (torch.float16, torch.bfloat16):
        return _distance(q.float(), k.float()).to(q.dtype)
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


def _distance2(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return _distance(q, k).square()


def _rbf(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return -0.5 * _distance2(q, k)


def _laplacian(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return -_distance(q, k)


class RBFKernel(_Radial):
    """``K = exp(-s ||q - k||^2 / 2)``: Gaussian Nadaraya-Watson with bandwidth ``s^-1/2``.

    It is softmax attention with a key bias,
    ``-||q - k||^2 / 2 = q.k - ||k||^2 / 2 - ||q||^2 / 2`` (the last term
    cancels in the normalisation), so it runs through SDPA when that form is
    as accurate as the dot product itself.
    """

    name = "rbf"

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._coords(q, k)
        qa = torch.cat([qs, qs.new_ones(*qs.shape[:-1], 1)], -1)
        ka = torch.cat([ks, -0.5 * ks.square().sum(-1, keepdim=True)], -1)
        eps = torch.finfo(qs.dtype).eps
        qn = float(qs.detach().square().sum(-1).max()) if qs.numel() else 0.0
        kn = float(ks.detach().square().sum(-1).max()) if ks.numel() else 0.0
        err = 2.0 * eps * (qs.shape[-1] + 2) * (math.sqrt(qn * kn) + kn)
        return PreparedKernel(qs, ks, _rbf, dot=(qa, ka), dot_error=err, name=self.name)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _rbf(q, k)


class LaplacianKernel(_Radial):
    """``K = exp(-||q - k|| / h)`` with ``h = s^-1/2`` (no dot form: the streamed pass)."""

    name = "laplacian"

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._coords(q, k)
        return PreparedKernel(qs, ks, _laplacian, name=self.name)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _laplacian(q, k)


class CosineKernel(AttentionKernel):
    """``K = exp(s cos(q, k))``; ``s = sqrt(head_dim)`` by default (runs through SDPA)."""

    name = "cosine"

    def default_scale(self, dim: int) -> float:
        return math.sqrt(max(dim, 1))

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs = unit_rows(q) * self.scale(q.shape[-1], q)
        ks = unit_rows(k)
        return PreparedKernel(qs, ks, _dot, dot=(qs, ks), dot_error=0.0, is_dot=True,
                              name=self.name)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _dot(q, k)

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        return q.detach().norm(dim=1) * (1 + 4 * q.shape[1] * torch.finfo(q.dtype).eps)


class PolynomialKernel(AttentionKernel):
    """``K = (s q.k + c)^degree``: a weight, not an exponential.

    Parameters
    ----------
    degree : int, default 2
        An even degree keeps the weights non-negative (Tsai et al. use 2).
    offset : float, default 0.0
        The constant ``c >= 0``.
    scale, learnable, heads
        As in :class:`AttentionKernel`.
    """

    name = "polynomial"
    log_domain = False
    signed = True

    def __init__(self, degree: int = 2, offset: float = 0.0, *, scale: float | None = None,
                 learnable: bool = False, heads: int | None = None) -> None:
        super().__init__(scale, learnable=learnable, heads=heads)
        if not isinstance(degree, int) or degree < 1:
            raise NadarayaError(f"degree must be a positive integer; got {degree!r}.")
        if not (isinstance(offset, int | float) and math.isfinite(offset) and offset >= 0):
            raise NadarayaError(f"offset must be a finite number >= 0; got {offset!r}.")
        self.degree = degree
        self.offset = float(offset)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        s = self.scale(q.shape[-1], q)
        root = math.sqrt(s) if isinstance(s, float) else torch.sqrt(s)
        qs, ks = q * root, k * root
        if self.offset > 0:
            c = math.sqrt(self.offset)
            qs = torch.cat([qs, qs.new_full((*qs.shape[:-1], 1), c)], -1)
            ks = torch.cat([ks, ks.new_full((*ks.shape[:-1], 1), c)], -1)
        return PreparedKernel(qs, ks, self._weights, log_domain=False, homogeneous=True,
                              name=self.name)

    def _weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _dot(q, k).pow(self.degree)

    @property
    def positive(self) -> bool:
        """Whether every weight is >= 0 (an even degree), so that it has a log-weight."""
        return self.degree % 2 == 0

    def _log_weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``degree log|q.k|`` (even degrees), the weight 0 of ``q.k = 0`` as ``tiny^degree``."""
        dot = _dot(q, k).abs()
        return self.degree * torch.log(dot.clamp(min=torch.finfo(dot.dtype).tiny))

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._weights(q, k)

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._weights(q, k)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        raise NadarayaError(
            "the polynomial kernel gives weights, not log-weights, so it cannot be a factor "
            "of an engine product kernel; use it alone, or in nadaraya.nn kernel products."
        )

    def extra_repr(self) -> str:
        return ", ".join(x for x in (f"degree={self.degree}", f"offset={self.offset:g}",
                                     super().extra_repr()) if x)


class LinearKernel(AttentionKernel):
    """``K = s q.k``: signed weights normalised by their sum.

    Not a valid smoothing kernel: the normaliser can be zero or negative, so
    training diverges (Tsai et al. report that it does not converge). It is
    here to show why.
    """

    name = "linear"
    log_domain = False
    signed = True

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs = q * self.scale(q.shape[-1], q)
        return PreparedKernel(qs, k, _dot, log_domain=False, is_dot=True, homogeneous=True,
                              name=self.name)

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _dot(q, k)

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return _dot(q, k)

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        raise NadarayaError(
            "the linear kernel gives signed weights and has no log-weight, so it cannot be a "
            "factor of an engine product kernel; use it alone, or in nadaraya.nn kernel products."
        )


class AttentionProduct(AttentionKernel):
    """``K = K_1 * K_2 * ...`` of kernels on different columns.

    Tsai et al.'s positional kernel ``k_F(f_q, f_k) k_P(t_q, t_k)`` is
    ``kernel_f.on(slice(0, E)) * kernel_p.on(slice(E, 2 E))``. Scores of
    exponential factors add; a product with a non-exponential factor
    (polynomial, linear) gives weights ``K_w * exp(sum of scores)``, which
    the batched engines sum in the log domain (``log K_w`` added to the
    scores) when every such factor is positive (an even polynomial), so
    that neither factor can overflow or underflow the other.
    """

    name = "product"

    def __init__(self, parts: Sequence[AttentionKernel]) -> None:
        super().__init__()
        if len(parts) < 2:
            raise NadarayaError("a product kernel needs at least two parts.")
        for p in parts:
            if p.columns is None:
                raise NadarayaError(
                    "each factor of a product kernel must read its own columns; build it as "
                    "k1.on(slice(0, d1)) * k2.on(slice(d1, d1 + d2))."
                )
        self.parts = nn.ModuleList(parts)
        self.log_domain = all(p.log_domain for p in parts)  # type: ignore[misc]
        self._widths: list[int] = []

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        preps = [p.prepare(q, k) for p in self.parts]
        widths = [p.queries.shape[-1] for p in preps]
        self._widths = widths
        bounds = [0]
        for w in widths:
            bounds.append(bounds[-1] + w)
        # positive weights (even polynomials) enter as log-weights next to the scores
        log_domain = all(p.log_domain or getattr(part, "positive", False)
                         for p, part in zip(preps, self.parts, strict=True))
        terms = [(p.block if p.log_domain or not log_domain else part._log_weights,
                  p.log_domain or log_domain, a, b)
                 for p, part, a, b in zip(preps, self.parts, bounds[:-1], bounds[1:],
                                          strict=True)]

        def block(qb: torch.Tensor, kb: torch.Tensor) -> torch.Tensor:
            score, weight = None, None
            for f, is_log, a, b in terms:
                s = f(qb[..., a:b], kb[..., a:b])
                if is_log:
                    score = s if score is None else score + s
                else:
                    weight = s if weight is None else weight * s
            if log_domain:
                assert score is not None
                return score
            assert weight is not None
            return weight if score is None else weight * torch.exp(score)

        qp = torch.cat([p.queries for p in preps], -1)
        kp = torch.cat([p.keys for p in preps], -1)
        dot = None
        err = math.inf
        if all(p.log_domain and p.dot is not None for p in preps):
            dot = (torch.cat([p.dot[0] for p in preps], -1),  # type: ignore[index]
                   torch.cat([p.dot[1] for p in preps], -1))  # type: ignore[index]
            err = sum(p.dot_error for p in preps)
        is_dot = all(p.is_dot and p.log_domain for p in preps)
        homogeneous = not log_domain and all(p.homogeneous for p in preps)
        return PreparedKernel(qp, kp, block, log_domain=log_domain, dot=dot, dot_error=err,
                              is_dot=is_dot, homogeneous=homogeneous,
                              name=" * ".join(p.name for p in preps))

    def _formula(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out, start = None, 0
        for p, w in zip(self.parts, self._widths, strict=True):
            s = p._formula(q[..., start:start + w], k[..., start:start + w])
            out = s if out is None else out + s
            start += w
        assert out is not None
        return out


ATTENTION_KERNELS: dict[str, type[AttentionKernel]] = {
    "softmax": SoftmaxKernel,
    "rbf": RBFKernel,
    "laplacian": LaplacianKernel,
    "polynomial": PolynomialKernel,
    "linear": LinearKernel,
    "cosine": CosineKernel,
}
_ALIASES = {"exp": "softmax", "exp-dot": "softmax", "exponential": "softmax",
            "gaussian": "rbf", "poly": "polynomial"}


def get_attention_kernel(kernel: str | AttentionKernel, *, scale: float | None = None,
                         learnable: bool = False, heads: int | None = None) -> AttentionKernel:
    """Turn a kernel name into an :class:`AttentionKernel` (objects pass through).

    Parameters
    ----------
    kernel : str or AttentionKernel
        One of ``softmax``, ``rbf``, ``laplacian``, ``polynomial``, ``linear``,
        ``cosine`` (aliases ``exp``, ``gaussian``), or a kernel object.
    scale : float, optional
        The scale ``s`` (SDPA's ``scale``); only with a name.
    learnable, heads
        As in :class:`AttentionKernel`; only with a name.

    Examples
    --------
    >>> from nadaraya.nn.kernels import get_attention_kernel
    >>> get_attention_kernel("rbf", scale=0.25)
    RBFKernel(scale=0.25)
    """
    if isinstance(kernel, AttentionKernel):
        if scale is not None or learnable:
            raise NadarayaError(
                "scale/learnable were given together with a kernel object, which carries its own; "
                "build the object with them, e.g. RBFKernel(scale=0.25, learnable=True)."
            )
        return kernel
    if isinstance(kernel, str):
        name = _ALIASES.get(kernel.lower(), kernel.lower())
        if name in ATTENTION_KERNELS:
            return ATTENTION_KERNELS[name](scale=scale, learnable=learnable, heads=heads)
        raise NadarayaError(
            f"kernel {kernel!r} is not known; use one of {', '.join(ATTENTION_KERNELS)} "
            "or an AttentionKernel object (nadaraya.nn.kernels)."
        )
    hint = (" A tensor here is probably a mask: pass it as mask= or attn_mask= (the fourth "
            "argument is the kernel)." if isinstance(kernel, torch.Tensor) else "")
    raise NadarayaError(
        f"kernel must be a name or an AttentionKernel; got {type(kernel).__name__}.{hint}"
    )
