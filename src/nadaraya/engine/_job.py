"""One smoothing request as the engines see it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernels import BoundKernel
from ..masks import BoundMask

__all__ = ["Job", "exp_floor"]


@dataclass
class Job:
    """Queries, keys and values already bound to a kernel and a mask.

    Attributes
    ----------
    kernel : BoundKernel
        The kernel with queries ``(m, e)`` and keys ``(n, e)`` in its coordinates.
    mask : BoundMask or None
        The visible sets; None when every key is visible to every query.
    values : torch.Tensor of shape (n, p)
        Values to smooth, in the compute dtype.
    queries, keys : torch.Tensor
        The raw points ``(m, d)`` and ``(n, d)``.
    """

    kernel: BoundKernel
    mask: BoundMask | None
    values: torch.Tensor
    queries: torch.Tensor
    keys: torch.Tensor

    @property
    def m(self) -> int:
        return self.queries.shape[0]

    @property
    def n(self) -> int:
        return self.keys.shape[0]

    @property
    def p(self) -> int:
        return self.values.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def requires_grad(self) -> bool:
        return torch.is_grad_enabled() and any(
            t.requires_grad for t in (self.kernel.q, self.kernel.k, self.values)
        )


def exp_floor(dtype: torch.dtype) -> float:
    """Lowest exponent whose ``exp`` is still a normal number in ``dtype``.

    Scores are clamped here before ``exp``: below it CPUs take a slow path
    (subnormals) while the weight is already negligible.
    """
    return math.log(torch.finfo(dtype).tiny) + 1.0
