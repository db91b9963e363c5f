"""Similarities and separations: the kernels of associative memories.

Millidge et al. (2022, "Universal Hopfield Networks") write one retrieval
step of an associative memory as ``z = P^T sep(sim(M, q))``: a *similarity*
of the query to every stored pattern, a *separation* that sharpens the
scores, and a projection onto the stored values. Here the similarity is a
signed kernel and the separation turns it into the kernel the engine sums:

* :class:`Cosine`, :class:`NegativeDistance` (and the dot product,
  :class:`~nadaraya.kernels.linear.LinearKernel`) are signed similarities;
* :class:`Exponential` ``exp(beta * sim)`` is the softmax separation, a
  log-domain kernel;
* :class:`Power` ``sim ** beta`` is the polynomial separation, signed;
* :class:`ArgMax` is the max separation, the limit ``beta -> inf`` of
  :class:`Exponential`: all weight on the most similar keys, ties shared.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from .._config import block_elements
from .._errors import NadarayaError
from ._bound import BoundKernel
from ._kernel import Kernel
from ._prepared import PreparedKernel
from .linear import LinearKernel, SignedKernel

__all__ = ["ArgMax", "Cosine", "Exponential", "NegativeDistance", "Power"]


def _check_similarity(similarity: Any) -> SignedKernel:
    if not isinstance(similarity, SignedKernel):
        raise NadarayaError(
            f"similarity must be a signed similarity kernel (LinearKernel, Cosine, "
            f"NegativeDistance); got {similarity!r}."
        )
    return similarity


def _check_beta(beta: Any, name: str = "beta") -> float:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or \
            not math.isfinite(beta) or beta <= 0:
        raise NadarayaError(f"{name} must be a positive finite number; got {beta!r}.")
    return float(beta)


def _bilinear(similarity: Kernel) -> bool:
    return isinstance(similarity, LinearKernel | Cosine)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` ``(..., d)`` divided by their norm (zero rows stay zero, gradient 0).

    Each row is first divided by a power of two near its largest magnitude:
    the norm of a row near the dtype's largest number would overflow (and
    give zeros), that of a subnormal row underflow (and give infinities).
    Half precisions are normalised in float32 and rounded once: the gradient
    of that division by a power of two (``2^18`` for rows near ``4e-6``)
    would overflow float16 on its way back even where the true gradient is 0.
    """
    if x.numel() == 0:
        return x
    if x.dtype in (torch.float16, torch.bfloat16):
        return unit_rows(x.float()).to(x.dtype)
    top = x.detach().abs().amax(dim=-1, keepdim=True)
    zero = top == 0
    top = torch.where(torch.isfinite(top) & ~zero, top, torch.ones_like(top))
    _, exponent = torch.frexp(top)
    x = x / torch.ldexp(torch.ones_like(top), exponent - 1)
    out = torch.nn.functional.normalize(x, dim=-1)
    # a zero row has no direction: it stays zero, with no gradient (normalize's would be
    # 1 / its eps, 1e12, which overflows half precisions on the way back)
    if torch.compiler.is_compiling() or bool(zero.any()):  # compiled: no data-dependent branch
        return torch.where(zero, out.detach(), out)
    return out


class Cosine(SignedKernel):
    """Cosine similarity ``K(q, k) = q.k / (|q| |k|)``, in ``[-1, 1]`` (signed).

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels.similarity import Cosine
    >>> x = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    >>> round(float(Cosine().weights(x, x)[0, 1]), 4)
    0.7071
    """

    name = "cosine"

    batched = True

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return unit_rows(q), unit_rows(k)

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        # the 2-D engines refuse zero rows; attention keeps them (their weights are exp(0))
        for name, x in (("queries", q), ("keys", k)):
            zero = torch.nonzero((x.detach() == 0).all(dim=1)).flatten()
            if zero.numel():
                raise NadarayaError(
                    f"cosine similarity is undefined for a zero vector: {name} row(s) "
                    f"{zero[:5].tolist()} are all zeros. Remove them or use similarity='dot'."
                )

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._prepare(q, k)
        return PreparedKernel(qs, ks, self._weights_block, log_domain=False, is_dot=True,
                              name=self.name)

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return q @ k.mT

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k * q[:, None, :]).sum(-1)


class NegativeDistance(SignedKernel):
    """Negative distance ``K(q, k) = -||q - k||_p`` (signed, at most 0).

    Parameters
    ----------
    p : {1, 2}, default 2
        2: Euclidean distance; 1: Manhattan (city-block) distance.
    """

    name = "negative-distance"

    def __init__(self, p: int = 2) -> None:
        if p not in (1, 2) or isinstance(p, bool):
            raise NadarayaError(f"p must be 1 (Manhattan) or 2 (Euclidean); got {p!r}.")
        self.p = int(p)

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        if self.p == 2:
            return -torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist")
        return -torch.cdist(q, k, p=1.0)

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return -torch.linalg.vector_norm(k - q[:, None, :], ord=self.p, dim=-1)

    def _params(self) -> str:
        return f"p={self.p}"


class _OfSimilarity:
    """A kernel made from a signed similarity: reads and checks the data as it does."""

    similarity: SignedKernel

    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        self.similarity._check(q, k)

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.similarity._prepare(q, k)

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        self.similarity._check_prepared(q, k)


class Exponential(_OfSimilarity, Kernel):
    """Softmax separation ``K(q, k) = exp(beta * sim(q, k))`` of a signed similarity.

    The modern Hopfield (attention) update is one smoothing step with this
    kernel: ``Exponential(LinearKernel(), beta)`` is ``ExpDot(scale=beta)``,
    ``Exponential(NegativeDistance(2), beta)`` is ``Laplacian(1 / beta)``, and
    ``Exponential(LinearKernel(W_q @ W_k.T / sqrt(d)), 1)`` is self-attention
    on ``X``.

    Parameters
    ----------
    similarity : SignedKernel
        ``LinearKernel``, ``Cosine`` or ``NegativeDistance``.
    beta : float or None, default 1.0
        Inverse temperature (> 0). None: attention's default for the cosine
        kernel, ``sqrt(e)`` for ``e`` prepared coordinates (the features, for
        ``Cosine`` and the plain dot product).
    learnable, heads
        Train ``beta`` (``beta * softplus(raw_scale)``), one per head with
        ``heads`` (inputs ``(..., heads, L, E)``).

    Examples
    --------
    Attention's cosine kernel ``exp(s cos(q, k))``:

    >>> import torch
    >>> q = torch.ones(1, 1, 4)
    >>> float(Exponential(Cosine(), None).scores(q, q)[0, 0, 0])
    2.0
    """

    name = "exponential"

    def __init__(self, similarity: SignedKernel, beta: float | None = 1.0, *,
                 learnable: bool = False, heads: int | None = None) -> None:
        self.similarity = _check_similarity(similarity)
        self.beta = None if beta is None else _check_beta(beta)
        self._learn(learnable, heads)

    @property
    def batched(self) -> bool:  # type: ignore[override]
        return _bilinear(self.similarity) and self.similarity.batched

    def _beta(self, q: torch.Tensor) -> Any:
        beta: Any = math.sqrt(max(q.shape[-1], 1)) if self.beta is None else self.beta
        factor = self._factor(q)
        return beta if factor is None else beta * factor

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        if not self.batched:
            return super()._prepared(q, k)
        # beta folded into the queries: the scores are the similarity of the points
        qp, kp = self.similarity._prepare(q, k)
        qs = qp * self._beta(q)
        return PreparedKernel(qs, kp, self.similarity._weights_block, dot=(qs, kp),
                              dot_error=0.0, is_dot=True, name=self.name)

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        s = self.similarity._weights_block(q, k)
        beta = self._beta(q)
        return s.mul_(beta) if not (s.requires_grad or isinstance(beta, torch.Tensor)) \
            else s * beta

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._beta(q) * self.similarity._weights_pairs(q, k)

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.similarity._weights_block(q, k)

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        if isinstance(self.similarity, NegativeDistance):
            return q.new_zeros(q.shape[0])
        if _bilinear(self.similarity):
            kmax = bound.cached("key_norm_max", lambda: bound.k.detach().norm(dim=1).max())
            qn = q.detach().norm(dim=1)
            beta = self._beta(q)
            beta = beta.detach() if isinstance(beta, torch.Tensor) else beta
            return beta * qn * kmax * (1 + 4 * q.shape[1] * torch.finfo(q.dtype).eps)
        return None

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        if _bilinear(self.similarity):
            return self._beta(q) * q, k
        return None

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        if not _bilinear(self.similarity) or q.numel() == 0 or k.numel() == 0:
            return math.inf
        # only the rounding of beta * q
        eps = torch.finfo(q.dtype).eps
        beta = float(torch.as_tensor(self._beta(q)).detach().max())
        return float(eps * beta * q.detach().norm(dim=1).max() * k.detach().norm(dim=1).max())

    def _params(self) -> str:
        return f"{self.similarity!r}, beta={self.beta!r}"


class Power(_OfSimilarity, SignedKernel):
    """Polynomial separation ``K(q, k) = sim(q, k) ** beta`` (signed).

    Krotov and Hopfield's dense associative memory is ``Power(LinearKernel(), n)``.
    A negative similarity raised to a non-integer power has no real value and
    raises; an integer ``beta`` keeps the sign for odd powers.

    Parameters
    ----------
    similarity : SignedKernel
        ``LinearKernel``, ``Cosine`` or ``NegativeDistance``.
    beta : float, default 2.0
        The exponent (> 0).
    """

    name = "power"

    def __init__(self, similarity: SignedKernel, beta: float = 2.0) -> None:
        self.similarity = _check_similarity(similarity)
        self.beta = _check_beta(beta)

    def _power(self, s: torch.Tensor) -> torch.Tensor:
        if self.beta == int(self.beta):
            return s.pow(int(self.beta))
        if bool((s < 0).any()):
            raise NadarayaError(
                f"Power(beta={self.beta!r}) of a negative similarity has no real value; use an "
                "integer beta, or a similarity that is never negative."
            )
        return s.pow(self.beta)

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._power(self.similarity._weights_block(q, k))

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._power(self.similarity._weights_pairs(q, k))

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._weights_block(q, k)

    def _params(self) -> str:
        return f"{self.similarity!r}, beta={self.beta!r}"


class ArgMax(_OfSimilarity, Kernel):
    """Max separation: weight one on the keys of largest similarity, zero elsewhere.

    The limit ``beta -> inf`` of ``Exponential(similarity, beta)``: smoothing
    with it returns the value of the most similar key, or the mean over
    keys tied for the largest similarity. Similarities within rounding
    (a few units in the last place, scaled by the number of features) of the
    largest count as tied. The largest similarity is taken over all keys,
    before any mask.

    Parameters
    ----------
    similarity : SignedKernel
        ``LinearKernel``, ``Cosine`` or ``NegativeDistance``.
    """

    name = "argmax"

    def __init__(self, similarity: SignedKernel) -> None:
        self.similarity = _check_similarity(similarity)

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        qp, kp = self.similarity._prepare(q, k)
        self.similarity._check_prepared(qp, kp)
        qd, kd = qp.detach(), kp.detach()
        best = torch.full((qd.shape[0],), -torch.inf, dtype=qd.dtype, device=qd.device)
        step = max(1, block_elements(qd.element_size()) // max(qd.shape[0], 1))
        for start in range(0, kd.shape[0], step):
            s = self.similarity._weights_block(qd, kd[start:start + step])
            best = torch.maximum(best, s.max(dim=1).values)
        # rounding scale of one similarity: |q| |k| for products, |q| + |k| for distances
        qn = qd.norm(dim=1)
        kn = kd.norm(dim=1).max() if kd.shape[0] else qd.new_zeros(())
        scale = qn + kn if isinstance(self.similarity, NegativeDistance) else qn * kn
        tol = 8 * max(qd.shape[1], 1) * torch.finfo(qd.dtype).eps * (scale + best.abs())
        return torch.cat([qp, best[:, None], tol[:, None]], dim=1), kp

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        s = self.similarity._weights_block(q[:, :-2], k)
        top = (q[:, -2] - q[:, -1])[:, None]
        zero = torch.zeros((), dtype=s.dtype, device=s.device)
        return torch.where(s >= top, zero, -math.inf)

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        s = self.similarity._weights_pairs(q[:, :-2], k)
        zero = torch.zeros((), dtype=s.dtype, device=s.device)
        return torch.where(s >= (q[:, -2] - q[:, -1])[:, None], zero, -math.inf)

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.similarity._weights_block(q[:, :-2], k)

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        return q.new_zeros(q.shape[0])

    def _params(self) -> str:
        return repr(self.similarity)

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """Checked in :meth:`_prepare`, before the extra columns."""
