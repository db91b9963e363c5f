"""Kernel objects: one formula each, written as a log-weight (score).

A kernel ``K(q, k)`` is given by its score ``s(q, k) = log K(q, k)``. Binding a
kernel to queries and keys moves both into the kernel's own coordinates once
(centred, scaled by the bandwidth or metric); engines then ask the bound kernel
for blocks of scores, pairs of scores, an upper bound of each query's scores,
or an equivalent dot-product form for fused attention kernels.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._errors import NadarayaError

__all__ = ["BoundKernel", "Kernel", "ProductKernel", "SumKernel"]

Columns = slice | Sequence[int] | None


def _select(x: torch.Tensor, columns: Columns) -> torch.Tensor:
    if columns is None:
        return x
    if isinstance(columns, slice):
        return x[:, columns]
    return x[:, list(columns)]


class Kernel:
    """Base class of all kernels.

    Subclasses implement :meth:`_prepare` (move raw points into kernel
    coordinates) and :meth:`_block` (scores of a block); the rest is optional
    and lets faster engines take over.

    Attributes
    ----------
    columns : slice or sequence of int or None
        The feature columns the kernel reads; ``None`` means all of them. Set
        with :meth:`on`; products of kernels on disjoint columns are the
        bilateral kernel and Tsai's content x position kernel.
    support : float or None
        Radius (in kernel coordinates) beyond which the weight is exactly zero;
        ``None`` for kernels with unbounded support.
    """

    columns: Columns = None
    support: float | None = None
    name: str = "kernel"

    # -- composition -----------------------------------------------------
    def on(self, columns: Columns) -> Kernel:
        """Return a copy of this kernel that reads only ``columns``.

        Examples
        --------
        >>> from nadaraya.kernels import Gaussian
        >>> bilateral = Gaussian(2.0).on([0, 1]) * Gaussian(0.1).on([2])
        """
        import copy

        other = copy.copy(self)
        other.columns = columns
        return other

    def __mul__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        return ProductKernel([*_parts(self, ProductKernel), *_parts(other, ProductKernel)])

    def __add__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        return SumKernel([*_parts(self, SumKernel), *_parts(other, SumKernel)])

    # -- binding -----------------------------------------------------------
    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        """Move queries ``(m, d)`` and keys ``(n, d)`` into kernel coordinates."""
        q, k = _select(queries, self.columns), _select(keys, self.columns)
        self._check(q, k)
        qp, kp = self._prepare(q, k)
        return BoundKernel(self, qp, kp)

    def score(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores ``log K`` of every query against every key, shape ``(m, n)``."""
        return self.bind(queries, keys).score()

    # -- to implement ------------------------------------------------------
    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """Validate parameters against the data (bandwidth shape and so on)."""

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of prepared queries ``(mb, e)`` against prepared keys ``(nb, e)``.

        ``out``, when given, is a ``(mb, nb)`` buffer the kernel may write the
        result into (engines reuse one buffer across blocks); the return value
        is the result either way.
        """
        raise NotImplementedError

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        """Scores of prepared queries ``(mb, e)`` against their own keys ``(mb, K, e)``."""
        return None

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        """An upper bound ``(mb,)`` of each query's score over all keys, or None."""
        return None

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Augmented ``(qa, ka)`` with ``qa @ ka.T`` equal to the scores, or None."""
        return None

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        """Bound on the absolute score error of the dot form in this dtype."""
        return float("inf")

    def _metric_points(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Points whose Euclidean distance is the kernel's radius ``r``, or None."""
        return None

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """A finite stand-in for the score used to find the nearest key."""
        return self._block(q, k)

    def __repr__(self) -> str:
        cols = "" if self.columns is None else f".on({self.columns!r})"
        return f"{type(self).__name__}({self._params()}){cols}"

    def _params(self) -> str:
        return ""


def _parts(kernel: Kernel, kind: type) -> list[Kernel]:
    if isinstance(kernel, kind) and kernel.columns is None:
        return list(kernel.parts)  # type: ignore[attr-defined]
    return [kernel]


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


class _Composite(Kernel):
    """Kernels made of parts that each read their own columns."""

    op = "?"

    def __init__(self, parts: Sequence[Kernel]) -> None:
        if len(parts) < 2:
            raise NadarayaError("a composite kernel needs at least two parts.")
        self.parts = list(parts)

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        import copy

        q, k = _select(queries, self.columns), _select(keys, self.columns)
        bound = [p.bind(q, k) for p in self.parts]
        offsets = [0]
        for b in bound:
            offsets.append(offsets[-1] + b.q.shape[1])
        # The column layout belongs to this binding: bind a copy, never mutate self.
        layout = copy.copy(self)
        layout.parts = [b.kernel for b in bound]
        layout._slices = [slice(a, b) for a, b in itertools.pairwise(offsets)]
        layout._bound_parts = bound
        qp = torch.cat([b.q for b in bound], dim=1)
        kp = torch.cat([b.k for b in bound], dim=1)
        return BoundKernel(layout, qp, kp)

    def _split(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [x[..., s] for s in self._slices]

    def _params(self) -> str:
        return f" {self.op} ".join(repr(p) for p in self.parts)

    def __repr__(self) -> str:
        cols = "" if self.columns is None else f".on({self.columns!r})"
        return f"({self._params()}){cols}"


class ProductKernel(_Composite):
    """``K = K_1 * K_2 * ...``: scores add. The bilateral kernel is one.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import Gaussian
    >>> k = Gaussian(1.0).on([0]) * Gaussian(0.5).on([1])
    >>> x = torch.zeros(1, 2, dtype=torch.float64)
    >>> float(k.score(x, x + 1.0)[0, 0])
    -2.5
    """

    op = "*"
    name = "product"

    @property
    def support(self) -> float | None:  # type: ignore[override]
        return None

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        total = None
        for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True):
            if total is None:
                total = p._block(qs, ks, out)
            else:
                total = total + p._block(qs, ks) if total.requires_grad else total.add_(
                    p._block(qs, ks))
        return total

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        total = None
        for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True):
            s = p._pairs(qs, ks)
            if s is None:
                return None
            total = s if total is None else total + s
        return total

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out = None
        for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True):
            s = p._rank(qs, ks)
            out = s if out is None else out + s
        return out

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        total = None
        for p, b, qs in zip(self.parts, self._bound_parts, self._split(q), strict=True):
            s = p._bound(qs, b)
            if s is None:
                return None
            total = s if total is None else total + s
        return total

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        forms = [
            p._dot(qs, ks)
            for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True)
        ]
        if any(f is None for f in forms):
            return None
        return torch.cat([f[0] for f in forms], 1), torch.cat([f[1] for f in forms], 1)

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        parts = zip(self.parts, self._split(q), self._split(k), strict=True)
        return sum(p._dot_error(qs, ks) for p, qs, ks in parts)


class SumKernel(_Composite):
    """``K = K_1 + K_2 + ...``: scores combine by log-sum-exp."""

    op = "+"
    name = "sum"

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        scores = [
            p._block(qs, ks)
            for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True)
        ]
        return torch.logsumexp(torch.stack(scores), dim=0)

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        # The nearest key of any part: finite where the scores of compact parts are not.
        ranks = [
            p._rank(qs, ks)
            for p, qs, ks in zip(self.parts, self._split(q), self._split(k), strict=True)
        ]
        return torch.stack(ranks).amax(dim=0)

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        bounds = [
            p._bound(qs, b)
            for p, b, qs in zip(self.parts, self._bound_parts, self._split(q), strict=True)
        ]
        if any(b is None for b in bounds):
            return None
        return torch.logsumexp(torch.stack(bounds), dim=0)
