"""Kernel objects: one formula each, written as a log-weight (score).

A kernel ``K(q, k)`` is given by its score ``s(q, k) = log K(q, k)``. Binding a
kernel to queries and keys moves both into the kernel's own coordinates once
(centred, scaled by the bandwidth or metric); engines then ask the bound kernel
for blocks of scores, pairs of scores, an upper bound of each query's scores,
or an equivalent dot-product form for fused attention kernels.

One object serves every face, through one mechanism: :class:`Kernel` is a
:class:`torch.nn.Module` (as in gpytorch).

* As a torch module, a kernel assigned to a module attribute registers its
  parameters; ``kernel.parameters()``, ``.to()``, ``.double()`` and
  ``state_dict`` work. With ``learnable=True`` its scale (the bandwidth of a
  radial kernel, the scale of a dot kernel) trains: the value given to
  ``__init__`` stays as it was, and a learned factor ``softplus(raw_scale)``
  (``raw_scale`` a parameter, initialised so that the factor is one) multiplies
  it, one per head with ``heads=H`` (inputs ``(..., H, L, E)``). Products hold
  their parts in an :class:`torch.nn.ModuleList`.
* As an estimator parameter, it follows scikit-learn's parameter protocol:
  ``get_params`` returns the arguments given to ``__init__`` (recorded when
  the object is made, whatever the class stores), ``set_params`` rebuilds the
  kernel from them, and ``sklearn.base.clone`` gives an untrained copy with
  the same arguments (and columns). Kernels pickle like any module.
* For the engines, :meth:`Kernel.bind` prepares 2-D points ``(m, d)`` for
  :func:`nadaraya.smooth` and :meth:`Kernel.prepare` batched points
  ``(..., m, E)`` for attention (a :class:`~nadaraya.kernels.PreparedKernel`).
  Both use the kernel's one score formula.

Binding and :meth:`Kernel.on` never change the kernel: they work on a copy
whose module dictionaries are its own (so assigning to the copy cannot reach
the original); the copy shares the parameter tensors, so ``k.on(cols)``
trains with ``k``.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError
from ._prepared import PreparedKernel

__all__ = ["BoundKernel", "Kernel", "ProductKernel", "SumKernel"]

Columns = slice | Sequence[int] | None

_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(_SOFTPLUS_ONE) == 1


def _select(x: torch.Tensor, columns: Columns) -> torch.Tensor:
    if columns is None:
        return x
    if isinstance(columns, slice):
        return x[..., columns]
    return x[..., list(columns)]


def _own_copy(module: nn.Module) -> Any:
    """A shallow copy of ``module`` whose dictionaries (parameters, children...) are its own."""
    other = copy.copy(module)
    for name, value in list(other.__dict__.items()):
        if type(value) in (dict, type(module._parameters)):
            other.__dict__[name] = copy.copy(value)
    return other


def _clone_value(value: Any) -> Any:
    if isinstance(value, Kernel):
        return value.__sklearn_clone__()
    if isinstance(value, list | tuple) and any(isinstance(v, Kernel) for v in value):
        return type(value)(_clone_value(v) for v in value)
    return copy.deepcopy(value)


class Kernel(nn.Module):
    """Base class of all kernels.

    Subclasses implement :meth:`_prepare` (move raw points into kernel
    coordinates) and :meth:`_block` (scores of a block); the rest is optional
    and lets faster engines take over. A subclass whose formula works on
    batched points ``(..., m, e)`` overrides :meth:`_prepared` and sets
    ``batched = True``; any other kernel is prepared problem by problem.

    Attributes
    ----------
    columns : slice or sequence of int or None
        The feature columns the kernel reads; ``None`` means all of them. Set
        with :meth:`on`; products of kernels on disjoint columns are the
        bilateral kernel and Tsai's content x position kernel.
    support : float or None
        Radius (in kernel coordinates) beyond which the weight is exactly zero;
        ``None`` for kernels with unbounded support.
    batched : bool
        Whether :meth:`prepare` has a native batched form (used by attention's
        fused and streamed engines); otherwise each problem is bound alone.
    """

    columns: Columns = None
    support: float | None = None
    name: str = "kernel"
    signed: bool = False
    log_domain: bool = True
    batched: bool = False
    heads: int | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Kernel:
        obj = super().__new__(cls)
        # the module machinery first, so that subclasses may set parameters at once
        nn.Module.__init__(obj)
        try:
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        except TypeError:
            bound = None  # __init__ itself will say what is wrong
        if bound is not None:
            bound.apply_defaults()
            params = dict(bound.arguments)
            params.pop(next(iter(params)))  # self
            obj.__dict__["_init_params"] = {
                k: v for k, v in params.items()
                if inspect.signature(cls.__init__).parameters[k].kind
                not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
        return obj

    def __init__(self) -> None:
        """Nothing to do: ``__new__`` set up the module (subclasses may omit this call)."""

    # -- parameters (scikit-learn protocol) --------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The arguments this kernel was made with (scikit-learn's protocol).

        Parameters
        ----------
        deep : bool, default True
            Accepted for scikit-learn; kernel arguments are returned as given.

        Returns
        -------
        dict of str to object
        """
        return dict(self.__dict__.get("_init_params", {}))

    def set_params(self, **params: Any) -> Kernel:
        """Rebuild this kernel, in place, with some arguments changed.

        The learned factor of a learnable kernel starts again at one; the
        columns stay.

        Examples
        --------
        >>> from nadaraya.kernels import Gaussian
        >>> Gaussian(1.0).set_params(bandwidth=0.5)
        Gaussian(bandwidth=0.5)
        """
        current = self.get_params()
        for key in params:
            if key not in current:
                raise NadarayaError(
                    f"{key!r} is not a parameter of {type(self).__name__}; its parameters are "
                    f"{', '.join(current) or 'none'}."
                )
        fresh = type(self)(**{**current, **params})
        columns = self.__dict__.get("columns")
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)
        if columns is not None:
            self.__dict__["columns"] = columns
        return self

    def __sklearn_clone__(self) -> Kernel:
        """An untrained copy with the same arguments and columns (``sklearn.base.clone``)."""
        fresh = type(self)(**{k: _clone_value(v) for k, v in self.get_params().items()})
        if "columns" in self.__dict__:
            fresh.__dict__["columns"] = copy.deepcopy(self.columns)
        return fresh

    # -- the learned factor ---------------------------------------------------
    def _learn(self, learnable: bool, heads: int | None) -> None:
        """Register ``raw_scale`` (the learned factor ``softplus(raw_scale)``) if asked."""
        if not isinstance(learnable, bool):
            raise NadarayaError(f"learnable must be True or False; got {learnable!r}.")
        if heads is not None and (isinstance(heads, bool) or not isinstance(heads, int)
                                  or heads < 1):
            raise NadarayaError(f"heads must be a positive integer or None; got {heads!r}.")
        self.learnable = learnable
        self.heads = heads
        if learnable:
            shape = () if heads is None else (heads,)
            self.raw_scale = nn.Parameter(torch.full(shape, _SOFTPLUS_ONE))

    def _factor(self, like: torch.Tensor) -> torch.Tensor | None:
        """The learned factor for points like ``like`` ``(..., L, E)``, or None if fixed.

        Per head it has shape ``(heads, 1, 1)``, which needs inputs
        ``(..., heads, L, E)``.
        """
        raw = self._parameters.get("raw_scale")
        if raw is None:
            return None
        f = nn.functional.softplus(raw).to(like)
        if self.heads is not None:
            if like.ndim < 3 or like.shape[-3] != self.heads:
                raise NadarayaError(
                    f"this kernel has one scale per head ({self.heads} heads) and needs inputs "
                    f"(..., {self.heads}, L, E); got shape {tuple(like.shape)}. Build it "
                    "without heads= to use it on other shapes."
                )
            f = f[:, None, None]
        return f

    # -- composition -----------------------------------------------------
    def on(self, columns: Columns) -> Kernel:
        """Return a copy of this kernel that reads only ``columns``.

        The copy shares this kernel's parameters (it trains with it); this
        kernel itself is not changed.

        Examples
        --------
        >>> from nadaraya.kernels import Gaussian
        >>> bilateral = Gaussian(2.0).on([0, 1]) * Gaussian(0.1).on([2])
        """
        other = _own_copy(self)
        other.__dict__["columns"] = columns
        return other

    def __mul__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        return ProductKernel([*_parts(self, ProductKernel), *_parts(other, ProductKernel)])

    def __add__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        return SumKernel([*_parts(self, SumKernel), *_parts(other, SumKernel)])

    # -- binding (2-D engines) -----------------------------------------------
    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        """Move queries ``(m, d)`` and keys ``(n, d)`` into kernel coordinates."""
        q, k = _select(queries, self.columns), _select(keys, self.columns)
        self._check(q, k)
        qp, kp = self._prepare(q, k)
        self._check_prepared(qp, kp)
        return BoundKernel(self, qp, kp)

    def score(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores ``log K`` of every query against every key, shape ``(m, n)``."""
        return self.bind(queries, keys).score()

    # -- batched form (attention) ----------------------------------------------
    def prepare(self, queries: torch.Tensor, keys: torch.Tensor) -> PreparedKernel:
        """Move queries ``(..., m, E)`` and keys ``(..., n, E)`` into kernel coordinates.

        Parameters
        ----------
        queries : torch.Tensor of shape (..., m, E)
        keys : torch.Tensor of shape (..., n, E)
            Leading dimensions broadcast (batch, heads).

        Returns
        -------
        PreparedKernel
            Whose ``block(q, k)`` gives scores ``(..., mb, nb)`` of prepared
            points (weights for signed kernels).

        Examples
        --------
        >>> import torch
        >>> from nadaraya.kernels import Gaussian
        >>> x = torch.zeros(2, 3, 1, 4)
        >>> prep = Gaussian(1.0).prepare(x, x + 1.0)
        >>> prep.block(prep.queries, prep.keys).shape
        torch.Size([2, 3, 1, 1])
        """
        q, k = _select(queries, self.columns), _select(keys, self.columns)
        self._check(q, k)
        return self._prepared(q, k)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        """The batched form, by default each problem bound alone (no native batched form)."""
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        qf = q.expand(*lead, *q.shape[-2:]).reshape(-1, *q.shape[-2:])
        kf = k.expand(*lead, *k.shape[-2:]).reshape(-1, *k.shape[-2:])
        bound = [self.bind(qf[g], kf[g]) for g in range(qf.shape[0])]
        if not bound:
            empty = qf.new_zeros(*lead, q.shape[-2], q.shape[-1])
            return PreparedKernel(empty, kf.new_zeros(*lead, k.shape[-2], k.shape[-1]),
                                  lambda a, b: a.new_zeros(*a.shape[:-1], b.shape[-2]),
                                  log_domain=self.log_domain, name=self.name)
        layout = bound[0].kernel
        rule = layout._weights_block if self.signed else layout._block  # type: ignore[attr-defined]

        def block(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            front = a.shape[:-2]
            a2, b2 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
            out = torch.stack([rule(a2[g], b2[g]) for g in range(a2.shape[0])])
            return out.reshape(*front, a.shape[-2], b.shape[-2])

        qp = torch.stack([b.q for b in bound]).reshape(*lead, q.shape[-2], -1)
        kp = torch.stack([b.k for b in bound]).reshape(*lead, k.shape[-2], -1)
        return PreparedKernel(qp, kp, block, log_domain=self.log_domain, name=self.name)

    def scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Log-weights ``(..., m, n)`` of batched points (weights for signed kernels)."""
        prep = self.prepare(queries, keys)
        out = prep.block(prep.queries, prep.keys)
        # a product of positive weights and exponentials is summed in the log domain
        return torch.exp(out) if prep.log_domain and not self.log_domain else out

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """:meth:`scores`: calling the module gives the scores ``(..., m, n)``."""
        return self.scores(queries, keys)

    # -- to implement ------------------------------------------------------
    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """Validate parameters against the data (bandwidth shape and so on)."""

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """Refuse prepared 2-D points the engines cannot use (attention lets them through)."""

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
        for p in parts:
            if not isinstance(p, Kernel):
                raise NadarayaError(f"each part of a composite kernel must be a Kernel; got "
                                    f"{type(p).__name__}.")
        self.parts = nn.ModuleList(parts)

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        q, k = _select(queries, self.columns), _select(keys, self.columns)
        bound = [p.bind(q, k) for p in self.parts]
        offsets = [0]
        for b in bound:
            offsets.append(offsets[-1] + b.q.shape[1])
        # The column layout belongs to this binding: bind a copy, never mutate self.
        layout = _own_copy(self)
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
        """Parts prepared side by side; exponential factors add their scores.

        A factor that is not an exponential (polynomial, linear) gives weights
        ``K_w * exp(sum of scores)``, summed in the log domain (``log K_w``
        added to the scores) when every such factor is positive (an even
        polynomial), so that neither factor can overflow or underflow the other.
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
        dot, err = None, math.inf
        if all(p.log_domain and p.dot is not None for p in preps):
            dot = (torch.cat([p.dot[0] for p in preps], -1),  # type: ignore[index]
                   torch.cat([p.dot[1] for p in preps], -1))  # type: ignore[index]
            err = sum(p.dot_error for p in preps)
        is_dot = all(p.is_dot and p.log_domain for p in preps)
        homogeneous = not log_domain and all(p.homogeneous for p in preps)
        return PreparedKernel(qp, kp, block, log_domain=log_domain, dot=dot, dot_error=err,
                              is_dot=is_dot, homogeneous=homogeneous,
                              name=" * ".join(p.name for p in preps))

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
