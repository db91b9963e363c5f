"""Radial kernels: a profile of the scaled distance ``r = ||L (q - k)||``.

The bandwidth ``h`` is a scalar (``L = I / h``), a per-feature vector
(``L = diag(1 / h)``) or, through ``metric=``, a full matrix ``L``. The
Gaussian is ``exp(-r^2 / 2)``, so a scalar ``h`` is its standard deviation.

Defaults differ by face, and say so: ``bandwidth=1.0`` (the default) is the
statistician's unit bandwidth; ``bandwidth=None`` is attention's default,
``h = E ** 0.25`` for ``E`` features, i.e. SDPA's scale ``s = h ** -2 =
1 / sqrt(E)`` (what ``kernel_attention(..., "rbf")`` uses without ``scale``).

Each profile is written once, as a function of the squared distance
(``profile``) or of the distance (``_of_distance``, for profiles whose
derivative in ``r`` at zero is not zero); the 2-D engines (:meth:`bind`)
and the batched form (:meth:`prepare`) both evaluate it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from .._validation import all_finite
from ._bound import BoundKernel
from ._distance import distance, sqdist
from ._kernel import Kernel
from ._prepared import PreparedKernel

__all__ = [
    "Cauchy",
    "Epanechnikov",
    "Gaussian",
    "Laplacian",
    "Matern32",
    "Matern52",
    "RadialKernel",
    "Tricube",
    "Uniform",
]


def _as_param(value: Any, name: str) -> torch.Tensor:
    # on the CPU whatever the default device (a model built on the meta device)
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(
        np.asarray(value, float), device="cpu")
    if t.is_complex() or not bool(torch.isfinite(t).all()):
        raise NadarayaError(f"{name} must be finite real numbers; got {value!r}.")
    return t


class RadialKernel(Kernel):
    """A kernel ``K = f(r)`` of the scaled distance ``r``.

    Parameters
    ----------
    bandwidth : float, array of shape (n_features,), torch.Tensor or None, default 1.0
        Scale of each feature: ``r = ||(q - k) / h||``. A tensor that requires
        grad trains with the rest of a torch model. None: attention's default
        ``h = n_features ** 0.25`` (SDPA's scale ``1 / sqrt(n_features)``).
    metric : array of shape (n_out, n_features), optional
        A full linear map ``L``: ``r = ||L (q - k)||``. Give either
        ``bandwidth`` or ``metric``, not both.
    learnable : bool, default False
        Train the bandwidth: ``h = bandwidth * softplus(raw_scale)`` (``L /
        softplus(raw_scale)`` with a metric), ``raw_scale`` a parameter
        starting where the factor is one.
    heads : int, optional
        With ``learnable``, one factor per head; inputs are then
        ``(..., heads, L, E)``.
    """

    batched = True

    def __init__(self, bandwidth: Any = 1.0, *, metric: Any = None, learnable: bool = False,
                 heads: int | None = None) -> None:
        if metric is not None and not (bandwidth is None or (
                not isinstance(bandwidth, torch.Tensor) and bandwidth == 1.0)):
            raise NadarayaError(
                "give either bandwidth or metric, not both; "
                "fold the bandwidth into the metric (metric / h)."
            )
        self.bandwidth = None if metric is not None else bandwidth
        self.metric = metric
        if self.metric is None:
            h = _as_param(1.0 if bandwidth is None else bandwidth, "bandwidth")
            if h.ndim > 1:
                raise NadarayaError(
                    f"bandwidth must be a number or a vector of one value per feature; "
                    f"got shape {tuple(h.shape)}. For a full matrix pass metric=L."
                )
            if not bool((h > 0).all()):
                raise NadarayaError(
                    f"bandwidth must be > 0; got {bandwidth!r}. "
                    "Pass a positive number (or one per feature)."
                )
        else:
            L = _as_param(metric, "metric")
            if L.ndim != 2:
                raise NadarayaError(
                    "metric must be a 2-D matrix L (r = ||L (q - k)||); "
                    f"got shape {tuple(L.shape)}."
                )
        self._learn(learnable, heads)

    # -- profile -----------------------------------------------------------
    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        """Log-weight as a function of the squared scaled distance ``r^2``."""
        raise NotImplementedError

    # -- coordinates ---------------------------------------------------------
    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        d = q.shape[-1]
        if self.metric is not None:
            L = _as_param(self.metric, "metric")
            if L.shape[1] != d:
                raise NadarayaError(
                    f"metric (or a 2-D bandwidth, taken as the metric L) must have one column "
                    f"per feature ({d}); got shape {tuple(L.shape)}."
                )
        elif self.bandwidth is not None:
            h = _as_param(self.bandwidth, "bandwidth")
            if h.ndim == 1 and h.shape[0] not in (1, d):
                raise NadarayaError(
                    f"bandwidth vector must have one value per feature ({d}); "
                    f"got {h.shape[0]} values."
                )

    def _scaled(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Centred points ``(..., m, d)`` into kernel coordinates (bandwidth or metric)."""
        factor = self._factor(q)
        if self.metric is not None:
            L = _as_param(self.metric, "metric").to(q)
            q, k = q @ L.mT, k @ L.mT
            if factor is not None:
                q, k = q / factor, k / factor
            return q, k
        if self.bandwidth is None:
            h: Any = torch.tensor(float(max(q.shape[-1], 1)) ** 0.25, dtype=q.dtype,
                                  device=q.device)
        else:
            h = _as_param(self.bandwidth, "bandwidth").to(q)
        if factor is not None:
            h = h * factor
        return q / h, k / h

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Centre on the keys' median: distances do not change, and the rounding of a
        # common offset (eps |x| per coordinate) is gone. The median, not the mean: a
        # cluster far narrower than its distance to a few outlying keys would lose
        # its distances to a mean pulled away by them.
        if k.shape[0]:
            centre = k.detach().median(dim=0).values
            q, k = q - centre, k - centre
        return self._scaled(q, k)

    def _check_prepared(self, q: torch.Tensor, k: torch.Tensor) -> None:
        name = "metric" if self.metric is not None else "bandwidth"
        for x in (q, k):
            if not all_finite(x):
                raise NadarayaError(
                    f"{name} is too small for these points: their distances in its units "
                    f"overflow {str(q.dtype).replace('torch.', '')}. Multiply the features "
                    f"and the {name} by one large factor (or compute in float64)."
                )

    # -- batched form ----------------------------------------------------------
    def _centred(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # centre each problem on the middle of its keys' range: distances do not
        # change, rounding shrinks (halved first, so that it cannot overflow)
        if k.shape[-2]:
            kd = k.detach()
            centre = kd.amin(dim=-2, keepdim=True) / 2 + kd.amax(dim=-2, keepdim=True) / 2
            q, k = q - centre, k - centre
        return self._scaled(q, k)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._centred(q, k)
        return PreparedKernel(qs, ks, self._scores, name=self.name)

    # -- scores: one routine for 2-D blocks, batched blocks and pairs ------------
    of_distance = False  # whether the profile is written in r (``_of_distance``), not r^2

    def _scores(self, q: torch.Tensor, k: torch.Tensor,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """Scores ``(..., mb, nb)`` of prepared points ``(..., mb, e)``, ``(..., nb, e)``.

        The 2-D block is the case without leading dimensions, the pairs of a
        query with its own keys the case ``mb = 1``; ``out`` is an optional
        buffer (2-D engines reuse one across blocks).
        """
        if self.of_distance:
            return self._of_distance(distance(q, k, out=out))
        return self.profile(sqdist(q, k, out=out))

    def _of_distance(self, r: torch.Tensor) -> torch.Tensor:
        """The profile as a function of the distance ``r`` (by default of ``r^2``)."""
        return self.profile(r.square())

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        return self._scores(q, k, out)

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._scores(q[:, None, :], k)[:, 0]

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return sqdist(q, k, coef=-1.0)

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        # Every profile here peaks at r = 0 with log-weight 0.
        return q.new_zeros(q.shape[0])

    def _metric_points(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def _params(self) -> str:
        if self.metric is not None:
            return "metric=..."
        h = self.bandwidth
        if isinstance(h, torch.Tensor) and h.numel() == 1:
            h = float(h.detach())
        return f"bandwidth={h!r}"


class Gaussian(RadialKernel):
    """Gaussian kernel ``exp(-r^2 / 2)``; a scalar bandwidth is the standard deviation.

    It is softmax attention with a key bias:
    ``-||q - k||^2 / 2 = q.k - ||k||^2 / 2 - ||q||^2 / 2``, and the last term
    cancels in the normalization, so fused attention kernels evaluate it.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import Gaussian
    >>> q = torch.tensor([[0.0]], dtype=torch.float64)
    >>> float(Gaussian(2.0).score(q, q + 2.0)[0, 0])
    -0.5
    """

    name = "gaussian"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        return r2.mul_(-0.5) if not r2.requires_grad else -0.5 * r2

    def _scores(self, q: torch.Tensor, k: torch.Tensor,
                out: torch.Tensor | None = None) -> torch.Tensor:
        return sqdist(q, k, coef=-0.5, out=out)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        # the dot form with the key bias alone: -||q||^2 / 2 cancels per query
        qs, ks = self._centred(q, k)
        qa = torch.cat([qs, qs.new_ones(*qs.shape[:-1], 1)], -1)
        ka = torch.cat([ks, -0.5 * ks.square().sum(-1, keepdim=True)], -1)
        if torch.compiler.is_compiling():
            # the bound reads the points' values (a graph break); the compiled engine skips it
            return PreparedKernel(qs, ks, self._scores, dot=(qa, ka), dot_error=0.0,
                                  name=self.name)
        eps = torch.finfo(qs.dtype).eps
        qn = float(qs.detach().square().sum(-1).max()) if qs.numel() else 0.0
        kn = float(ks.detach().square().sum(-1).max()) if ks.numel() else 0.0
        err = 2.0 * eps * (qs.shape[-1] + 2) * (math.sqrt(qn * kn) + kn)
        return PreparedKernel(qs, ks, self._scores, dot=(qa, ka), dot_error=err, name=self.name)

    def _dot(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        one_q = q.new_ones(q.shape[0], 1)
        one_k = k.new_ones(k.shape[0], 1)
        qa = torch.cat([q, -0.5 * q.square().sum(1, keepdim=True), one_q], 1)
        ka = torch.cat([k, one_k, -0.5 * k.square().sum(1, keepdim=True)], 1)
        return qa, ka

    def _dot_error(self, q: torch.Tensor, k: torch.Tensor) -> float:
        eps = torch.finfo(q.dtype).eps
        qn = float(q.detach().square().sum(1).max()) if q.numel() else 0.0
        kn = float(k.detach().square().sum(1).max()) if k.numel() else 0.0
        # rounding of q.k, ||q||^2 / 2 and ||k||^2 / 2, plus the sum of d + 2 terms
        return 2.0 * eps * (q.shape[1] + 2) * (qn + kn)


class Laplacian(RadialKernel):
    """Laplacian (exponential) kernel ``exp(-r)``."""

    name = "laplacian"

    of_distance = True

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        return self._of_distance(torch.sqrt(r2))

    def _of_distance(self, r: torch.Tensor) -> torch.Tensor:
        return -r

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        qs, ks = self._centred(q, k)
        return PreparedKernel(qs, ks, self._scores, negative_distance=True, name=self.name)


def _root(r2: torch.Tensor, c: float) -> torch.Tensor:
    """``sqrt(c) r`` from ``r^2`` (finite wherever ``r^2`` is); recording a gradient, its
    derivative at ``r = 0`` is 0, not infinite.

    The Matern profiles are smooth at ``r = 0`` (their slope in ``r`` is 0), but
    the chain rule through ``sqrt`` would multiply that 0 by an infinite slope.
    """
    if not r2.requires_grad:
        return torch.sqrt(r2).mul_(math.sqrt(c))
    positive = r2 > 0
    safe = torch.where(positive, r2, torch.ones_like(r2))
    return torch.where(positive, torch.sqrt(safe) * math.sqrt(c), torch.zeros_like(r2))


class Matern32(RadialKernel):
    """Matern kernel of smoothness 3/2: ``(1 + sqrt(3) r) exp(-sqrt(3) r)``.

    Examples
    --------
    >>> import math, torch
    >>> from nadaraya.kernels import Matern32
    >>> q = torch.tensor([[0.0]], dtype=torch.float64)
    >>> s = float(Matern32(2.0).score(q, q + 2.0)[0, 0])
    >>> math.isclose(s, math.log1p(math.sqrt(3)) - math.sqrt(3))
    True
    """

    name = "matern32"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        t = _root(r2, 3.0)
        # log1p of the largest finite number, so an infinite t gives -inf, not inf - inf
        return torch.log1p(t.clamp(max=torch.finfo(t.dtype).max)) - t


class Matern52(RadialKernel):
    """Matern kernel of smoothness 5/2: ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``."""

    name = "matern52"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        t = _root(r2, 5.0)
        # log(1 + t + t^2 / 3): as log1p up to t = 1, beyond it as
        # log(t) + log(1 / t + 1 + t / 3), which does not overflow for finite t
        small = t.clamp(max=1.0)
        large = t.clamp(min=1.0, max=torch.finfo(t.dtype).max)
        poly = torch.where(t <= 1.0, torch.log1p(small * (1.0 + small / 3.0)),
                           torch.log(large) + torch.log(1.0 / large + 1.0 + large / 3.0))
        return poly - t


class Cauchy(RadialKernel):
    """Cauchy kernel ``1 / (1 + r^2)``."""

    name = "cauchy"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        return -torch.log1p(r2)


class _Compact(RadialKernel):
    support = 1.0


class Epanechnikov(_Compact):
    """Epanechnikov kernel ``(1 - r^2)`` for ``r < 1``, zero beyond."""

    name = "epanechnikov"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        return torch.log1p(-torch.clamp(r2, max=1.0))


class Tricube(_Compact):
    """Tricube kernel ``(1 - r^3)^3`` for ``r < 1``, zero beyond."""

    name = "tricube"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        r3 = torch.clamp(r2, max=1.0).pow(1.5)
        return 3.0 * torch.log1p(-r3)


class Uniform(_Compact):
    """Uniform (box) kernel: weight one for ``r <= 1``, zero beyond."""

    name = "uniform"

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros((), dtype=r2.dtype, device=r2.device)
        return torch.where(r2 <= 1.0, zero, -math.inf)
