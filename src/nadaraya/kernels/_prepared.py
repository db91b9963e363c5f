"""The batched prepared form of a kernel: points in kernel coordinates and a block rule.

:meth:`nadaraya.kernels.Kernel.prepare` returns it for queries ``(..., m, E)``
and keys ``(..., n, E)`` (attention's ``(batch, heads, L, E)`` tensors); the
batched engine (``smooth_batched``) asks it for blocks of scores. It is a part,
like the kernel itself: it knows nothing of the engines that consume it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Block", "PreparedKernel"]

Block = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class PreparedKernel:
    """A kernel with its queries and keys already in kernel coordinates.

    Attributes
    ----------
    queries : torch.Tensor of shape (..., m, e)
    keys : torch.Tensor of shape (..., n, e)
    block : callable
        ``block(q, k) -> (..., mb, nb)`` scores (log-weights), or the weights
        themselves when ``log_domain`` is False. Holds no trainable parameter.
    log_domain : bool
        Whether ``block`` gives log-weights.
    dot : tuple of torch.Tensor, optional
        ``(qa, ka)`` with ``qa @ ka.mT`` equal to the scores up to a constant
        per query (which cancels in the normalisation).
    dot_error : float
        Bound on the absolute score error of ``dot`` in this dtype.
    is_dot : bool
        Whether ``block(q, k)`` is exactly ``q @ k.mT``.
    homogeneous : bool
        Whether scaling the queries or the keys of a problem scales its
        weights by one positive factor (``(q.k)^d``; weight domain only): the
        engine then divides each problem's points by a power of two near
        their largest magnitude, so that the weights of points near the
        dtype's largest number, or subnormal, neither overflow nor underflow.
    negative_distance : bool
        Whether ``block(q, k)`` is exactly ``-||q - k||`` (the Laplacian): the
        batched engine then measures the distances by matrix products.
    name : str
        For explanations.
    """

    queries: torch.Tensor
    keys: torch.Tensor
    block: Block
    log_domain: bool = True
    dot: tuple[torch.Tensor, torch.Tensor] | None = None
    dot_error: float = math.inf
    is_dot: bool = False
    homogeneous: bool = False
    negative_distance: bool = False
    name: str = "kernel"


