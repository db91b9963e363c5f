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

from collections.abc import Sequence

import torch

from ._bound import BoundKernel
from ._module import ParameterModule, own_copy
from ._prepared import PreparedKernel

__all__ = ["Columns", "Kernel", "select"]

Columns = slice | Sequence[int] | None


def select(x: torch.Tensor, columns: Columns) -> torch.Tensor:
    """The ``columns`` of points ``(..., m, d)`` (all of them for None)."""
    if columns is None:
        return x
    if isinstance(columns, slice):
        return x[..., columns]
    return x[..., list(columns)]


class Kernel(ParameterModule):
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
        other = own_copy(self)
        other.__dict__["columns"] = columns
        return other

    def __mul__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        from ._composite import ProductKernel, flat_parts

        return ProductKernel([*flat_parts(self, ProductKernel), *flat_parts(other, ProductKernel)])

    def __add__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        from ._composite import SumKernel, flat_parts

        return SumKernel([*flat_parts(self, SumKernel), *flat_parts(other, SumKernel)])

    # -- binding (2-D engines) -----------------------------------------------
    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        """Move queries ``(m, d)`` and keys ``(n, d)`` into kernel coordinates."""
        q, k = select(queries, self.columns), select(keys, self.columns)
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
        q, k = select(queries, self.columns), select(keys, self.columns)
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
