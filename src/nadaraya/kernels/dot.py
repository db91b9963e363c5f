"""The dot-product family: exp-dot (softmax attention's kernel) and the polynomial.

The cosine kernel ``exp(s cos(q, k))`` is
``Exponential(Cosine(), beta)`` and the linear one ``s q.k`` is
:class:`~nadaraya.kernels.LinearKernel` (see :mod:`nadaraya.kernels.similarity`
and :mod:`nadaraya.kernels.linear`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ._bound import BoundKernel
from ._kernel import Kernel
from ._prepared import PreparedKernel
from .linear import SignedKernel

__all__ = ["DotScores", "ExpDot", "Polynomial"]


def check_scale(scale: Any, name: str = "scale") -> None:
    """Refuse a scale that is not None, a positive finite number or a tensor."""
    if scale is not None and not isinstance(scale, torch.Tensor):
        if isinstance(scale, bool) or not (isinstance(scale, int | float)
                                           and math.isfinite(scale) and scale > 0):
            raise NadarayaError(
                f"{name} must be a positive finite number; got {scale!r}. For a trainable "
                "scale pass learnable=True (it is stored behind a positive transform)."
            )


def dot(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``q @ k^T`` of batched points ``(..., m, e)`` and ``(..., n, e)``."""
    return q @ k.mT


class DotScores:
    """For kernels whose score is the dot product of prepared points, ``s = q.k``.

    Mixed into a :class:`~nadaraya.kernels.Kernel`: the score bound (Cauchy-Schwarz)
    and the dot form (the points themselves, exact) that the engines use.
    """

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        kmax = bound.cached("key_norm_max", lambda: bound.k.detach().norm(dim=1).max())
        # Cauchy-Schwarz, widened by the rounding of the product itself.
        qn = q.detach().norm(dim=1)
        return qn * kmax * (1 + 4 * q.shape[1] * torch.finfo(q.dtype).eps)

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        return 0.0  # the dot form is the kernel itself


class ExpDot(DotScores, Kernel):
    """``K(q, k) = exp(scale * q.k)``: the kernel of softmax attention.

    Parameters
    ----------
    scale : float or torch.Tensor, optional
        Multiplies the dot product; ``1 / sqrt(n_features)`` when None, as in
        ``scaled_dot_product_attention``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import ExpDot
    >>> q = torch.ones(1, 4, dtype=torch.float64)
    >>> float(ExpDot().score(q, q)[0, 0])
    2.0
    """

    name = "softmax"
    batched = True

    def __init__(self, scale: Any = None, *, learnable: bool = False,
                 heads: int | None = None) -> None:
        check_scale(scale)
        self.scale = scale
        self._learn(learnable, heads)

    def _scale(self, d: int, like: torch.Tensor | None = None) -> Any:
        s = 1.0 / math.sqrt(max(d, 1)) if self.scale is None else self.scale
        factor = None if like is None else self._factor(like)
        return s if factor is None else s * factor

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q * self._scale(q.shape[-1], q), k

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._prepare(q, k)
        return PreparedKernel(qs, ks, dot, dot=(qs, ks), dot_error=0.0, is_dot=True,
                              name=self.name)

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        if out is None or q.requires_grad or k.requires_grad:
            return dot(q, k)
        return torch.mm(q, k.T, out=out)

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k * q[:, None, :]).sum(-1)

    def _params(self) -> str:
        return "" if self.scale is None else f"scale={self.scale!r}"


class Polynomial(SignedKernel):
    """``K(q, k) = (s q.k + c) ** degree``: a weight, not an exponential.

    Tsai et al. (2019) use it as an attention kernel (degree 2). An even
    degree keeps the weights non-negative: then it has a log-weight and may
    be a factor of a product with exponential kernels in attention.

    Parameters
    ----------
    degree : int, default 2
    offset : float, default 0.0
        The constant ``c >= 0``.
    scale : float, optional
        ``s``; ``1 / sqrt(n_features)`` when None (SDPA's default).
    learnable, heads
        Train ``s`` (``s * softplus(raw_scale)``), one per head with ``heads``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import Polynomial
    >>> q = torch.ones(1, 1, 4)
    >>> float(Polynomial(2, 1.0, scale=0.5).scores(q, q)[0, 0, 0])
    9.0
    """

    name = "polynomial"
    batched = True

    def __init__(self, degree: int = 2, offset: float = 0.0, *, scale: Any = None,
                 learnable: bool = False, heads: int | None = None) -> None:
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise NadarayaError(f"degree must be a positive integer; got {degree!r}.")
        if not (isinstance(offset, int | float) and math.isfinite(offset) and offset >= 0):
            raise NadarayaError(f"offset must be a finite number >= 0; got {offset!r}.")
        check_scale(scale)
        self.degree = degree
        self.offset = float(offset)
        self.scale = scale
        self._learn(learnable, heads)

    @property
    def positive(self) -> bool:
        """Whether every weight is >= 0 (an even degree), so that it has a log-weight."""
        return self.degree % 2 == 0

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s: Any = 1.0 / math.sqrt(max(q.shape[-1], 1)) if self.scale is None else self.scale
        factor = self._factor(q)
        if factor is not None:
            s = s * factor
        root = torch.sqrt(s) if isinstance(s, torch.Tensor) else math.sqrt(s)
        qs, ks = q * root, k * root
        if self.offset > 0:
            c = math.sqrt(self.offset)
            qs = torch.cat([qs, qs.new_full((*qs.shape[:-1], 1), c)], -1)
            ks = torch.cat([ks, ks.new_full((*ks.shape[:-1], 1), c)], -1)
        return qs, ks

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._prepare(q, k)
        return PreparedKernel(qs, ks, self._weights_block, log_domain=False, homogeneous=True,
                              name=self.name)

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return dot(q, k).pow(self.degree)

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k * q[:, None, :]).sum(-1).pow(self.degree)

    def _log_weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``degree log|q.k|`` (even degrees), the weight 0 of ``q.k = 0`` as ``tiny^degree``."""
        d = dot(q, k).abs()
        return self.degree * torch.log(d.clamp(min=torch.finfo(d.dtype).tiny))

    def _params(self) -> str:
        parts = [f"degree={self.degree}"]
        if self.offset:
            parts.append(f"offset={self.offset:g}")
        if self.scale is not None:
            parts.append(f"scale={self.scale!r}")
        return ", ".join(parts)
