"""A kernel given by a user function of query and key blocks."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._errors import NadarayaError
from ._kernel import Kernel

__all__ = ["CallableKernel"]


class CallableKernel(Kernel):
    """Wrap ``fn(q_block, k_block) -> scores`` as a kernel.

    Parameters
    ----------
    fn : callable
        Takes queries ``(mb, d)`` and keys ``(nb, d)`` as torch tensors and
        returns ``(mb, nb)``: the log-weights, or the weights themselves when
        ``log=False`` (then they must be >= 0).
    log : bool, default True
        Whether ``fn`` returns log-weights.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import CallableKernel
    >>> k = CallableKernel(lambda q, k: -torch.cdist(q, k, p=1))
    """

    name = "callable"

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *,
                 log: bool = True) -> None:
        if not callable(fn):
            raise NadarayaError(f"kernel function must be callable; got {type(fn).__name__}.")
        self.fn = fn
        self.log = log

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               buffer: torch.Tensor | None = None) -> torch.Tensor:
        out = self.fn(q, k)
        out = torch.as_tensor(out, dtype=q.dtype, device=q.device)
        if out.shape != (q.shape[0], k.shape[0]):
            raise NadarayaError(
                f"kernel function must return shape (n_queries, n_keys) = "
                f"{(q.shape[0], k.shape[0])} for a block; got {tuple(out.shape)}."
            )
        if torch.isnan(out).any():
            raise NadarayaError("kernel function returned NaN; it must return finite scores "
                                "(or -inf for zero weight).")
        if self.log:
            if (out == float("inf")).any():
                raise NadarayaError("kernel function returned +inf as a log-weight.")
            return out
        if (out < 0).any():
            raise NadarayaError("kernel function with log=False returned a negative weight.")
        return torch.log(out)

    def _params(self) -> str:
        return getattr(self.fn, "__name__", "fn")
