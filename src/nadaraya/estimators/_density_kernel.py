"""The normalized product kernel of a kernel density estimate, for mixed data.

A density estimate is the unnormalized sum of the engine with a constant in
front: ``f(x) = sum_j w_j K(x, x_j) / (C sum_j w_j)``. The engine sums the
kernel's scores ``log K`` (:func:`nadaraya.smooth` with ``return_lse=True``,
so nothing underflows); :class:`DensityKernel` builds the kernel and its
normalizing constant ``log C``:

* the continuous features take the radial kernel of the estimator with their
  bandwidths ``h``; its integral over ``R^d`` is ``prod(h)`` times
  ``(2 pi)^(d/2)`` for the Gaussian, and the surface of the unit sphere times
  ``int_0^inf k(r) r^(d-1) dr`` for the others (closed forms for the
  Laplacian and the compact kernels, quadrature otherwise);
* an unordered feature takes Aitchison-Aitken (sums to one over its ``c``
  levels) or Li-Racine divided by ``1 + (c - 1) lambda`` (so that it does
  too); an ordered one takes Wang-van Ryzin (sums to one over the integers)
  or Li-Racine's ``lambda^|g|`` divided, key by key, by its sum over the
  observed levels (a per-key log-weight, :meth:`DensityKernel.key_log_weights`).

``c`` is the number of distinct codes of the feature at fit (statsmodels'
``KDEMultivariate`` counts them the same way). A feature with a single level
takes weight one on it and zero elsewhere.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass

import numpy as np
import torch
from scipy import integrate

from .._errors import NadarayaError
from ..kernels import (
    RADIAL,
    AitchisonAitken,
    CallableKernel,
    Kernel,
    LiRacine,
    LiRacineOrdered,
    WangVanRyzin,
)

__all__ = ["DENSITY_OKERNELS", "DENSITY_UKERNELS", "DensityKernel", "check_radial_name",
           "log_ndtr_kernel", "radial_log_mass", "table_kernel"]

DENSITY_UKERNELS = ("aitchison-aitken", "li-racine")
DENSITY_OKERNELS = ("wang-van-ryzin", "li-racine")


def _log_sphere(d: int) -> float:
    """Log of the surface of the unit sphere in ``R^d``: ``2 pi^(d/2) / Gamma(d/2)``."""
    return math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)


@functools.lru_cache(maxsize=64)
def radial_log_mass(name: str, d: int) -> float:
    """``log int_{R^d} K(u) du`` of the radial kernel ``name`` at unit bandwidth.

    Raises :class:`NadarayaError` for a kernel whose integral diverges (the
    Cauchy kernel beyond one dimension).
    """
    if name == "gaussian":
        return 0.5 * d * math.log(2.0 * math.pi)
    if name == "laplacian":
        return _log_sphere(d) + math.lgamma(d)
    if name == "uniform":
        return _log_sphere(d) - math.log(d)
    if name == "epanechnikov":
        return _log_sphere(d) + math.log(2.0 / (d * (d + 2)))
    if name == "cauchy" and d > 1:
        raise NadarayaError(
            f"kernel='cauchy' has no finite integral over {d} continuous features (its tail "
            "1/r^2 decays too slowly), so it cannot make a density; use kernel='gaussian' "
            "or another kernel, or one continuous feature."
        )
    kern = RADIAL[name](1.0)

    def radial(r: float) -> float:
        r2 = torch.tensor([r * r], dtype=torch.float64)
        return math.exp(float(kern.profile(r2)[0])) * r ** (d - 1)

    top = 1.0 if getattr(kern, "support", None) else np.inf
    value, _ = integrate.quad(radial, 0.0, top, epsabs=0.0, epsrel=1e-13, limit=200)
    return _log_sphere(d) + math.log(value)


@dataclass
class DensityKernel:
    """The product kernel of a density estimate at one bandwidth vector.

    Attributes
    ----------
    name : str
        The radial kernel of the continuous features.
    types : str
        One letter per feature, ``'c'``, ``'u'`` or ``'o'``.
    bandwidth : ndarray of shape (n_features,)
        ``h`` of continuous features, ``lambda`` of categorical ones.
    levels : list of (ndarray or None)
        Sorted distinct codes of each categorical feature at fit.
    ukernel, okernel : str
        Kernels of unordered and ordered features.
    """

    name: str
    types: str
    bandwidth: np.ndarray
    levels: list[np.ndarray | None]
    ukernel: str = "aitchison-aitken"
    okernel: str = "wang-van-ryzin"
    #: Groups of continuous columns, each with its own radial kernel (None: one group).
    blocks: list[list[int]] | None = None
    #: The kernel reads column ``j + offset`` for feature ``j``.
    offset: int = 0

    def radial_blocks(self) -> list[list[int]]:
        cont = self.continuous
        if self.blocks is None:
            return [cont] if cont else []
        return [b for b in self.blocks if b]

    @property
    def continuous(self) -> list[int]:
        """Columns of the continuous features."""
        return [j for j, t in enumerate(self.types) if t == "c"]

    def _factor(self, j: int) -> Kernel:
        lam = float(self.bandwidth[j])
        c = self.levels[j].size
        if c < 2:
            return LiRacine(0.0)
        if self.types[j] == "u":
            return AitchisonAitken(lam, levels=c) if self.ukernel == "aitchison-aitken" \
                else LiRacine(lam)
        return WangVanRyzin(lam) if self.okernel == "wang-van-ryzin" else LiRacineOrdered(lam)

    def kernel(self) -> Kernel:
        """The product kernel (scores ``log K``, without the constant)."""
        parts: list[Kernel] = []
        at = self.offset
        for cont in self.radial_blocks():
            parts.append(RADIAL[self.name](self.bandwidth[cont]).on([j + at for j in cont]))
        for j, t in enumerate(self.types):
            if t != "c":
                parts.append(self._factor(j).on([j + at]))
        return functools.reduce(operator.mul, parts)

    def beyond_support(self, Q: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Queries farther than a compact kernel's reach from every key, shape ``(m,)``.

        A continuous coordinate more than ``h`` outside the keys' range puts the
        scaled distance beyond 1 (these are answered ``-inf`` without a sum).
        """
        out = np.zeros(Q.shape[0], dtype=bool)
        if getattr(RADIAL[self.name], "support", None) is None:
            return out
        at = self.offset
        for j in self.continuous:
            lo, hi = X[:, j + at].min(), X[:, j + at].max()
            h = self.bandwidth[j]
            with np.errstate(over="ignore", invalid="ignore"):
                out |= ((lo - Q[:, j + at]) > h) | ((Q[:, j + at] - hi) > h)
        return out

    def log_norm(self) -> float:
        """``-log C``: what the log of a kernel sum gains to become a log density."""
        out = 0.0
        for cont in self.radial_blocks():
            out -= float(np.sum(np.log(self.bandwidth[cont])))
            out -= radial_log_mass(self.name, len(cont))
        for j, t in enumerate(self.types):
            c = 0 if t == "c" else self.levels[j].size
            if t == "u" and c >= 2 and self.ukernel == "li-racine":
                out -= math.log1p((c - 1) * float(self.bandwidth[j]))
        return out

    def key_log_weights(self, X: np.ndarray) -> np.ndarray | None:
        """Per-key log-weights that normalize Li-Racine's ordered kernel (None: none needed).

        Each key's ``lambda^|l - x_j|`` summed over the observed levels ``l``.
        """
        if self.okernel != "li-racine":
            return None
        out = np.zeros(X.shape[0])
        for j, t in enumerate(self.types):
            if t == "o" and self.levels[j].size >= 2:
                lev = self.levels[j]
                lam = float(self.bandwidth[j])
                gaps = np.abs(lev[None, :] - lev[:, None])
                with np.errstate(divide="ignore"):
                    table = np.where(gaps == 0, 1.0, lam ** np.maximum(gaps, 1)).sum(axis=1)
                out -= np.log(table[np.searchsorted(lev, X[:, j])])
        return out

    # -- the pieces of CV least squares and of the CDF ------------------------------
    def level_table(self, j: int) -> np.ndarray:
        """Normalized weights ``P[a, b]`` of level ``b`` around key level ``a`` (observed levels).

        Shape ``(c, c)``; each row is the kernel's factor for that key level.
        """
        lev = self.levels[j]
        kern = self._factor(j)
        t = torch.as_tensor(lev[:, None], dtype=torch.float64)
        table = kern.score(t, t).exp().numpy().T  # [key, level]
        if (self.types[j] == "u" and self.ukernel == "li-racine") or \
                (self.types[j] == "o" and self.okernel == "li-racine"):
            table = table / table.sum(axis=1, keepdims=True)
        return table


def check_radial_name(kernel: object) -> str:
    """The radial kernel's name, lower case; refuse anything else."""
    if not (isinstance(kernel, str) and kernel.lower() in RADIAL):
        raise NadarayaError(
            f"kernel must be the name of a radial kernel, one of {', '.join(map(repr, RADIAL))};"
            f" got {kernel!r}. A density needs the kernel's integral, known for these."
        )
    return kernel.lower()


def table_kernel(table: np.ndarray, levels: np.ndarray) -> Kernel:
    """A kernel on one column of codes with weights ``table[level(key), level(query)]``.

    Codes not among ``levels`` get weight zero.
    """
    lev = torch.as_tensor(levels, dtype=torch.float64)
    with np.errstate(divide="ignore"):
        logt = torch.as_tensor(np.log(table), dtype=torch.float64)

    def index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.searchsorted(lev, x[:, 0].contiguous()).clamp(max=lev.numel() - 1)
        return pos, lev[pos] == x[:, 0]

    def score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        iq, okq = index(q)
        ik, okk = index(k)
        out = logt[ik[None, :], iq[:, None]]
        return torch.where(okq[:, None] & okk[None, :], out, -math.inf)

    return CallableKernel(score)


def log_ndtr_kernel(h: float) -> Kernel:
    """The Gaussian CDF kernel ``log Phi((q - k) / h)`` on one column."""
    def score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.special.log_ndtr((q[:, None, 0] - k[None, :, 0]) / h)

    return CallableKernel(score)

