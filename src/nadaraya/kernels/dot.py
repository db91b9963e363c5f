"""The exponentiated dot product: softmax attention's kernel."""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ._base import BoundKernel, Kernel

__all__ = ["DotScores", "ExpDot"]


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

    def __init__(self, scale: Any = None) -> None:
        if scale is not None and not isinstance(scale, torch.Tensor):
            if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
                raise NadarayaError(f"scale must be a positive finite number; got {scale!r}.")
        self.scale = scale

    def _scale(self, d: int) -> Any:
        return 1.0 / math.sqrt(max(d, 1)) if self.scale is None else self.scale

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q * self._scale(q.shape[1]), k

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        if out is None or q.requires_grad or k.requires_grad:
            return q @ k.T
        return torch.mm(q, k.T, out=out)

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k * q[:, None, :]).sum(-1)

    def _params(self) -> str:
        return "" if self.scale is None else f"scale={self.scale!r}"
