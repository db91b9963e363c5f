"""Kernels made of kernels on their own columns: products (scores add) and sums."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import torch
from torch import nn

from .._errors import NadarayaError
from ._bound import BoundKernel
from ._kernel import Kernel, select
from ._module import own_copy
from ._prepared import PreparedKernel

__all__ = ["ProductKernel", "SumKernel", "add_scores", "flat_parts", "join_dots", "multiply"]


def flat_parts(kernel: Kernel, kind: type) -> list[Kernel]:
    """The parts of ``kernel`` if it is a ``kind`` on all columns, else ``[kernel]``."""
    if isinstance(kernel, kind) and kernel.columns is None:
        return list(kernel.parts)  # type: ignore[attr-defined]
    return [kernel]


class _Composite(Kernel):
    """Kernels made of parts that each read their own columns."""

    op = "?"

    def __init__(self, parts: Sequence[Kernel]) -> None:
        if len(parts) < 2:
            raise NadarayaError("a composite kernel needs at least two parts.")
        for p in parts:
            if not isinstance(p, Kernel):
                raise NadarayaError(f"each part of a composite kernel must be a Kernel; got "
                                    f"{type(p).__name__}.")
        self.parts = nn.ModuleList(parts)

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        q, k = select(queries, self.columns), select(keys, self.columns)
        bound = [p.bind(q, k) for p in self.parts]
        offsets = [0]
        for b in bound:
            offsets.append(offsets[-1] + b.q.shape[1])
        # The column layout belongs to this binding: bind a copy, never mutate self.
        layout = own_copy(self)
        layout.parts = nn.ModuleList([b.kernel for b in bound])
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


def add_scores(scores: Iterable[torch.Tensor | None],
               in_place: bool = False) -> torch.Tensor | None:
    """The product rule: ``log(K_1 K_2 ...) = log K_1 + log K_2 + ...``.

    Parameters
    ----------
    scores : iterable of torch.Tensor or None
        Each part's scores (blocks ``(..., mb, nb)``, pairs ``(mb, K)`` or
        bounds ``(mb,)``), evaluated one at a time; a part without them
        (None) makes the product have none.
    in_place : bool, default False
        Accumulate into the first part's tensor (a fresh block) unless a
        gradient is recorded.

    Returns
    -------
    torch.Tensor or None
    """
    total = None
    for s in scores:
        if s is None:
            return None
        if total is None:
            total = s
        elif in_place and not (total.requires_grad or s.requires_grad):
            total = total.add_(s)
        else:
            total = total + s
    return total


def join_dots(forms: Iterable[tuple[torch.Tensor, torch.Tensor] | None],
              ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The product rule in dot form: ``(qa, ka)`` of each part side by side (last axis)."""
    forms = list(forms)
    if not forms or any(f is None for f in forms):
        return None
    return (torch.cat([f[0] for f in forms], -1),  # type: ignore[index]
            torch.cat([f[1] for f in forms], -1))  # type: ignore[index]


def multiply(scores: list[torch.Tensor], weights: list[torch.Tensor]) -> torch.Tensor:
    """Weights ``K_w1 K_w2 ... exp(sum of scores)`` of weight factors times exponential ones."""
    out = weights[0]
    for w in weights[1:]:
        out = out * w
    total = add_scores(scores)
    return out if total is None else out * torch.exp(total)


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

    @property
    def batched(self) -> bool:  # type: ignore[override]
        return all(p.batched for p in self.parts)

    @property
    def log_domain(self) -> bool:  # type: ignore[override]
        return all(p.log_domain for p in self.parts)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        """Parts prepared side by side; their scores add (:func:`add_scores`).

        A factor that is not an exponential (polynomial, linear) gives weights
        ``K_w * exp(sum of scores)`` (:func:`multiply`), summed in the log
        domain (``log K_w`` one more score) when every such factor is positive
        (an even polynomial), so that neither factor can overflow or underflow
        the other.
        """
        if not self.batched:
            return super()._prepared(q, k)
        preps = [p.prepare(q, k) for p in self.parts]
        bounds = [0]
        for p in preps:
            bounds.append(bounds[-1] + p.queries.shape[-1])
        log_domain = all(p.log_domain or getattr(part, "positive", False)
                         for p, part in zip(preps, self.parts, strict=True))
        terms = [(p.block if p.log_domain or not log_domain else part._log_weights,
                  p.log_domain or log_domain, slice(a, b))
                 for p, part, a, b in zip(preps, self.parts, bounds[:-1], bounds[1:],
                                          strict=True)]

        def block(qb: torch.Tensor, kb: torch.Tensor) -> torch.Tensor:
            if log_domain:
                out = add_scores(f(qb[..., s], kb[..., s]) for f, _, s in terms)
                assert out is not None
                return out
            scores = [f(qb[..., s], kb[..., s]) for f, is_log, s in terms if is_log]
            weights = [f(qb[..., s], kb[..., s]) for f, is_log, s in terms if not is_log]
            return multiply(scores, weights)

        qp = torch.cat([p.queries for p in preps], -1)
        kp = torch.cat([p.keys for p in preps], -1)
        exponential = all(p.log_domain for p in preps)
        dot = join_dots(p.dot for p in preps) if exponential else None
        err = sum(p.dot_error for p in preps) if dot is not None else math.inf
        is_dot = all(p.is_dot and p.log_domain for p in preps)
        homogeneous = not log_domain and all(p.homogeneous for p in preps)
        return PreparedKernel(qp, kp, block, log_domain=log_domain, dot=dot, dot_error=err,
                              is_dot=is_dot, homogeneous=homogeneous,
                              name=" * ".join(p.name for p in preps))

    def _each(self, q: torch.Tensor, k: torch.Tensor,
              ) -> Iterator[tuple[Kernel, torch.Tensor, torch.Tensor]]:
        return zip(self.parts, self._split(q), self._split(k), strict=True)

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        scores = (p._block(qs, ks, out if i == 0 else None)
                  for i, (p, qs, ks) in enumerate(self._each(q, k)))
        total = add_scores(scores, in_place=True)
        assert total is not None
        return total

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        return add_scores(p._pairs(qs, ks) for p, qs, ks in self._each(q, k))

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        total = add_scores(p._rank(qs, ks) for p, qs, ks in self._each(q, k))
        assert total is not None
        return total

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        parts = zip(self.parts, self._bound_parts, self._split(q), strict=True)
        return add_scores(p._bound(qs, b) for p, b, qs in parts)

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        return join_dots(p._dot(qs, ks) for p, qs, ks in self._each(q, k))

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        return sum(p._dot_error(qs, ks) for p, qs, ks in self._each(q, k))


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
