"""A kernel bound to 2-D queries and keys in its coordinates: what the engines ask for scores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ["BoundKernel"]


@dataclass
class BoundKernel:
    """A kernel together with queries ``(m, e)`` and keys ``(n, e)`` in its coordinates."""

    kernel: Kernel
    q: torch.Tensor
    k: torch.Tensor
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def n_queries(self) -> int:
        return self.q.shape[0]

    @property
    def n_keys(self) -> int:
        return self.k.shape[0]

    def score(self, qi: Any = slice(None), kj: Any = slice(None),
              out: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of queries ``qi`` against keys ``kj`` (slices or index tensors).

        ``out`` is an optional ``(mb, nb)`` buffer to write into.
        """
        return self.kernel._block(self.q[qi], self.k[kj], out)

    def pairs(self, qi: Any, index: torch.Tensor) -> torch.Tensor | None:
        """Scores ``(mb, K)`` of queries ``qi`` against keys ``index[i, :]`` each."""
        return self.kernel._pairs(self.q[qi], self.k[index])

    def rank(self, qi: Any = slice(None), kj: Any = slice(None)) -> torch.Tensor:
        """Finite ranking of keys for each query (higher is nearer)."""
        return self.kernel._rank(self.q[qi], self.k[kj])

    def upper_bound(self, qi: Any = slice(None)) -> torch.Tensor | None:
        """Upper bound ``(mb,)`` of the scores of queries ``qi`` over all keys."""
        return self.kernel._bound(self.q[qi], self)

    def dot_form(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(qa, ka)`` with ``qa @ ka.T`` equal to the scores, or None."""
        if "dot" not in self._cache:
            self._cache["dot"] = self.kernel._dot(self.q, self.k)
        return self._cache["dot"]

    def dot_error(self) -> float:
        """Bound on the absolute score error of :meth:`dot_form` in this dtype."""
        if "dot_error" not in self._cache:
            self._cache["dot_error"] = self.kernel._dot_error(self.q, self.k)
        return self._cache["dot_error"]

    def metric_points(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Queries and keys in the space where the kernel is radial, or None."""
        return self.kernel._metric_points(self.q, self.k)

    def cached(self, name: str, make: Any) -> Any:
        """Memoize a per-binding quantity (key norms, for example)."""
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]
