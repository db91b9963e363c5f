"""Drawing from a kernel density estimate: a sample row, then the kernel's noise.

Continuous blocks move by a draw from the radial kernel at unit bandwidth,
scaled by ``h``: the Gaussian exactly; the Laplacian ``exp(-r)`` as a uniform
direction times a ``Gamma(d)`` radius; the compact kernels (uniform,
Epanechnikov, tricube) by rejection from the unit ball (the profile is at most
one). Categorical features move to a level with the kernel's probabilities:
Wang-van Ryzin keeps the level with ``1 - lambda`` and otherwise steps a
geometric gap up or down; the others draw from their table over the observed
levels.
"""

from __future__ import annotations

import numpy as np
import torch

from .._errors import NadarayaError
from ..kernels import RADIAL
from ._density_kernel import DensityKernel

__all__ = ["sample_rows"]

_SAMPLED = ("gaussian", "laplacian", "uniform", "epanechnikov", "tricube")


def _unit_ball(rng: np.random.RandomState, n: int, d: int) -> np.ndarray:
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * rng.uniform(size=(n, 1)) ** (1.0 / d)


def _radial_noise(name: str, rng: np.random.RandomState, n: int, d: int) -> np.ndarray:
    if name == "gaussian":
        return rng.normal(size=(n, d))
    if name == "laplacian":
        direction = rng.normal(size=(n, d))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        return direction * rng.gamma(d, size=(n, 1))
    kern = RADIAL[name](1.0)
    out = np.empty((n, d))
    filled = 0
    while filled < n:
        u = _unit_ball(rng, 2 * (n - filled) + 16, d)
        r2 = torch.as_tensor((u * u).sum(axis=1), dtype=torch.float64)
        accept = rng.uniform(size=u.shape[0]) < np.exp(kern.profile(r2).numpy())
        take = u[accept][: n - filled]
        out[filled:filled + take.shape[0]] = take
        filled += take.shape[0]
    return out


def _levels(model: DensityKernel, j: int, codes: np.ndarray,
            rng: np.random.RandomState) -> np.ndarray:
    lev = model.levels[j]
    if lev.size < 2:
        return codes
    lam = float(model.bandwidth[j])
    if model.types[j] == "o" and model.okernel == "wang-van-ryzin":
        move = rng.uniform(size=codes.size) < lam
        gap = rng.geometric(1.0 - lam, size=codes.size) if lam < 1.0 else 0
        sign = np.where(rng.uniform(size=codes.size) < 0.5, -1.0, 1.0)
        return codes + np.where(move, sign * gap, 0.0)
    table = model.level_table(j)
    cum = np.cumsum(table, axis=1)
    rows = cum[np.searchsorted(lev, codes)]
    u = rng.uniform(size=(codes.size, 1)) * rows[:, -1:]
    pick = np.minimum((rows <= u).sum(axis=1), lev.size - 1)
    return lev[pick]


def sample_rows(model: DensityKernel, X: np.ndarray, w: np.ndarray, n: int,
                rng: np.random.RandomState) -> np.ndarray:
    """``n`` draws from the estimate of ``model`` on samples ``X`` with weights ``w``.

    Returns an array of shape ``(n, n_features)``.
    """
    if model.continuous and model.name not in _SAMPLED:
        raise NadarayaError(
            f"sample() draws from the kernels {', '.join(map(repr, _SAMPLED))}; this "
            f"estimate uses kernel={model.name!r}. Fit with one of those to sample."
        )
    rows = rng.choice(X.shape[0], size=n, p=w / w.sum())
    out = X[rows].copy()
    for block in model.radial_blocks():
        noise = _radial_noise(model.name, rng, n, len(block))
        out[:, block] += noise * model.bandwidth[block]
    for j, t in enumerate(model.types):
        if t != "c":
            out[:, j] = _levels(model, j, out[:, j], rng)
    return out
