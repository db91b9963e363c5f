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
    normalize : bool
        Divide by the row sums (the weighted mean); False for ``sum_j K v_j``.
    exponents : torch.Tensor of shape (p,), int64, or None
        When set, ``values`` holds the caller's values divided by ``2^exponents``
        column by column (see :mod:`nadaraya.engine._scale`); the result is
        multiplied back when it is finished.
    """

    kernel: BoundKernel
    mask: BoundMask | None
    values: torch.Tensor
    queries: torch.Tensor
    keys: torch.Tensor
    normalize: bool = True
    exponents: torch.Tensor | None = None

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
    """Lowest exponent the engines pass to ``exp``: scores below it are clamped here.

    ``exp(floor)`` is ``e^50`` times the smallest normal number of ``dtype``,
    so neither the weight nor its product with any value above ``e^-49`` is
    subnormal: CPUs take a slow path on subnormals (in ``exp`` and in the
    matrix product with the values), while such weights are already
    negligible, as the streamed engine's row test proves.
    """
    return math.log(torch.finfo(dtype).tiny) + 50.0
