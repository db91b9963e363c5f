"""Associative memory: retrieval is one smoothing pass over the stored patterns."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from .._validation import as_tensor, check_finite, kind_of, to_caller
from ..engine import Explanation, explain, smooth
from ..kernels import ExpDot, Kernel, Laplacian
from ..kernels.linear import LinearKernel, SignedKernel
from ..kernels.similarity import ArgMax, Cosine, Exponential, NegativeDistance, Power

__all__ = ["SEPARATIONS", "SIMILARITIES", "AssociativeMemory", "memory_kernel"]

SIMILARITIES = ("dot", "cosine", "euclidean", "manhattan", "whitened")
SEPARATIONS = ("softmax", "max", "identity", "power")


def _similarity(name: str) -> SignedKernel:
    return {
        "dot": LinearKernel,
        "cosine": Cosine,
        "euclidean": lambda: NegativeDistance(2),
        "manhattan": lambda: NegativeDistance(1),
        "whitened": lambda: LinearKernel("whitened"),
    }[name]()


def memory_kernel(similarity: str, separation: str, beta: float) -> Kernel:
    """The kernel that one retrieval step smooths with: ``sep(sim(q, k))``.

    Parameters
    ----------
    similarity : {"dot", "cosine", "euclidean", "manhattan", "whitened"}
        ``q.k``; ``q.k / (|q| |k|)``; ``-||q - k||_2``; ``-||q - k||_1``;
        ``q^T (K^T K)^+ k`` (the whitened dot product of linear regression).
    separation : {"softmax", "max", "identity", "power"}
        ``exp(beta * s)``; all weight on the largest ``s`` (ties shared);
        ``s`` itself; ``s ** beta``.
    beta : float
        Inverse temperature of ``"softmax"``, exponent of ``"power"``.

    Returns
    -------
    Kernel
        ``softmax`` gives log-domain kernels (``ExpDot`` for the dot product,
        ``Laplacian(1 / beta)`` for the Euclidean distance, ``Exponential``
        otherwise), ``max`` an :class:`~nadaraya.kernels.similarity.ArgMax`,
        ``identity`` and ``power`` signed kernels.
    """
    sim = _similarity(similarity)
    if separation == "softmax":
        if similarity == "dot":
            return ExpDot(scale=beta)
        if similarity == "euclidean":
            return Laplacian(1.0 / beta)
        return Exponential(sim, beta)
    if separation == "max":
        return ArgMax(sim)
    if separation == "identity":
        return sim
    return Power(sim, beta)


def _as_patterns(patterns: Any, name: str) -> torch.Tensor:
    if isinstance(patterns, Sequence) and not isinstance(patterns, str) and len(patterns) and \
            all(hasattr(p, "__len__") for p in patterns):
        lengths = sorted({len(p) for p in patterns})
        if len(lengths) > 1:
            raise NadarayaError(
                f"{name} must all have the same length; got lengths {lengths}. Pad, crop or "
                "resize them to one length (one row per pattern)."
            )
    t = as_tensor(patterns, name, ndim=(2,))
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise NadarayaError(f"{name} is empty (shape {tuple(t.shape)}); store at least one "
                            "pattern of at least one feature.")
    check_finite(t, name)
    return t


class AssociativeMemory:
    """Store patterns; retrieve them from corrupted queries by smoothing.

    One retrieval step is ``z <- sum_j w_j(z) v_j`` with ``w = sep(sim(z, k_j))``
    normalised over the stored patterns ``k_j``: the universal Hopfield
    network update of Millidge et al. (2022), and with ``separation="softmax"``
    the modern continuous Hopfield update (attention). It is one call of
    :func:`nadaraya.smooth`; more steps iterate it towards a fixed point.

    Parameters
    ----------
    patterns : array-like of shape (n_patterns, n_features)
        The stored patterns (the keys).
    values : array-like of shape (n_patterns, n_outputs), optional
        What each pattern recalls (hetero-associative memory); the patterns
        themselves by default (auto-associative).
    similarity : {"dot", "cosine", "euclidean", "manhattan", "whitened"}, default "euclidean"
        How a query is compared with each pattern: the dot product, cosine,
        negative Euclidean or Manhattan distance, or the whitened dot product
        ``q^T (K^T K)^+ k`` of linear regression.
    separation : {"softmax", "max", "identity", "power"}, default "softmax"
        How similarities become weights: ``exp(beta * s)``, one-hot on the
        most similar pattern (ties share), ``s``, or ``s ** beta``.
    beta : float, default 1.0
        Inverse temperature (softmax) or exponent (power); > 0.
    normalize : bool, default True
        For ``"identity"`` and ``"power"``: divide by the sum of the weights
        (as Millidge et al. do); ``False`` gives the raw sum ``sum_j s_j v_j``
        (the classical Hopfield and linear-regression read-out). Softmax and
        max are always normalised.
    engine : str, default "auto"
        Passed to :func:`nadaraya.smooth`.

    Notes
    -----
    The linear-regression memory of seed 003 is
    ``AssociativeMemory(P, V, similarity="whitened", separation="identity",
    normalize=False)``: queried at ``q`` it returns ``q^T (P^T P)^+ P^T V``,
    the least-squares fit of ``V`` on the patterns. Queried with a stored
    pattern it recalls its value exactly while the patterns are linearly
    independent (``n_patterns <= n_features``, the capacity ``N_max = d``);
    beyond that it returns the least-squares compromise. Auto-associatively
    (``V = P``) it returns the projection of the query onto the span of the
    patterns.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.memory import AssociativeMemory
    >>> rng = np.random.default_rng(0)
    >>> P = rng.random((10, 32))
    >>> mem = AssociativeMemory(P, similarity="euclidean", separation="softmax", beta=50.0)
    >>> noisy = P[3] + 0.05 * rng.normal(size=32)
    >>> bool(np.abs(mem.retrieve(noisy) - P[3]).max() < 1e-3)
    True
    """

    def __init__(
        self,
        patterns: Any,
        values: Any = None,
        *,
        similarity: str = "euclidean",
        separation: str = "softmax",
        beta: float = 1.0,
        normalize: bool = True,
        engine: str = "auto",
    ) -> None:
        if not isinstance(similarity, str) or similarity.lower() not in SIMILARITIES:
            raise NadarayaError(
                f"similarity must be one of {', '.join(map(repr, SIMILARITIES))}; "
                f"got {similarity!r}."
            )
        if not isinstance(separation, str) or separation.lower() not in SEPARATIONS:
            raise NadarayaError(
                f"separation must be one of {', '.join(map(repr, SEPARATIONS))}; "
                f"got {separation!r}."
            )
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or \
                not np.isfinite(beta) or beta <= 0:
            raise NadarayaError(
                f"beta must be a positive finite number; got {beta!r}. Use e.g. beta=1.0 "
                "(larger beta separates the patterns more sharply)."
            )
        self.patterns = _as_patterns(patterns, "patterns")
        if values is None:
            self.values = self.patterns
        else:
            self.values = _as_patterns(values, "values").to(self.patterns)
            if self.values.shape[0] != self.patterns.shape[0]:
                raise NadarayaError(
                    f"values have {self.values.shape[0]} row(s) but there are "
                    f"{self.patterns.shape[0]} patterns; give one value row per pattern."
                )
        self.similarity = similarity.lower()
        self.separation = separation.lower()
        self.beta = float(beta)
        self.normalize = bool(normalize)
        self.engine = engine
        self._kind = kind_of(patterns if values is None else values)
        self.kernel = memory_kernel(self.similarity, self.separation, self.beta)

    @property
    def n_patterns(self) -> int:
        """Number of stored patterns."""
        return self.patterns.shape[0]

    @property
    def n_features(self) -> int:
        """Length of a stored pattern."""
        return self.patterns.shape[1]

    @property
    def _normalized(self) -> bool:
        return self.separation in ("softmax", "max") or self.normalize

    def _queries(self, queries: Any) -> tuple[torch.Tensor, bool]:
        t = as_tensor(queries, "queries", ndim=(1, 2), dtype=self.patterns.dtype,
                      device=self.patterns.device)
        single = t.ndim == 1
        t = t[None, :] if single else t
        if t.shape[1] != self.n_features:
            raise NadarayaError(
                f"queries have {t.shape[1]} feature(s) but the stored patterns have "
                f"{self.n_features}; give queries of the patterns' length."
            )
        return t, single

    def _step(self, q: torch.Tensor) -> torch.Tensor:
        return smooth(q, self.patterns, self.values, self.kernel, engine=self.engine,
                      normalize=self._normalized)

    def retrieve(self, queries: Any, steps: int = 1, *, tol: float | None = None) -> Any:
        """Recall the stored patterns nearest to ``queries``.

        Parameters
        ----------
        queries : array-like of shape (n_queries, n_features) or (n_features,)
            Probes, for example noisy or masked copies of stored patterns.
        steps : int, default 1
            Number of updates ``z <- smooth(z, patterns, values)``; one is the
            single-shot retrieval, more iterate towards a fixed point.
        tol : float, optional
            Stop early once no query moves by more than ``tol`` (max-norm).

        Returns
        -------
        ndarray or torch.Tensor of shape (n_queries, n_outputs) or (n_outputs,)
            The retrieved values, the same kind as ``values`` (or ``patterns``).
        """
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
            raise NadarayaError(f"steps must be an integer >= 1; got {steps!r}.")
        if steps > 1 and self.values.shape[1] != self.n_features:
            raise NadarayaError(
                f"steps={steps} feeds each retrieval back as a query, which needs values of the "
                f"patterns' length ({self.n_features}); these have {self.values.shape[1]}. "
                "Use steps=1 for a hetero-associative memory."
            )
        if tol is not None and not (np.isfinite(tol) and tol >= 0):
            raise NadarayaError(f"tol must be a finite number >= 0; got {tol!r}.")
        z, single = self._queries(queries)
        for _ in range(int(steps)):
            new = self._step(z)
            done = tol is not None and float((new - z).abs().max()) <= tol
            z = new
            if done:
                break
        return to_caller(z[0] if single else z, self._kind)

    def explain(self, queries: Any) -> Explanation:
        """Which engine :meth:`retrieve` uses for ``queries``, and why."""
        q, _ = self._queries(queries)
        return explain(q, self.patterns, self.values, self.kernel, engine=self.engine,
                       normalize=self._normalized)

    def __repr__(self) -> str:
        extra = "" if self._normalized or self.separation in ("softmax", "max") \
            else ", normalize=False"
        return (f"AssociativeMemory({self.n_patterns} patterns of {self.n_features}, "
                f"similarity={self.similarity!r}, separation={self.separation!r}, "
                f"beta={self.beta!r}{extra})")

