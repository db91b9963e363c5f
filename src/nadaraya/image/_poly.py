"""Local polynomial fits from the grid engine's weighted moments.

Kernel regression of order ``N`` (Takeda, Farsiu and Milanfar 2007) fits, at
each pixel ``x``, a polynomial in the displacement ``D = x_j - x`` by weighted
least squares with weights ``K(t_x, t_j)``. The normal equations need the
weighted means of ``D^a y_j`` and ``D^a``, which the engine accumulates in
its state (``grid_smooth(..., degree=N)``); here the small systems are solved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..engine._grid import grid_smooth
from ..engine._lattice import monomials
from ..engine._state import SmoothState

__all__ = ["LocalFit", "local_fit"]


@dataclass
class LocalFit:
    """The fitted polynomial at every pixel.

    Attributes
    ----------
    value : torch.Tensor of shape (channels, height, width)
        The estimate (the constant term).
    gradient : torch.Tensor of shape (2, channels, height, width) or None
        ``d value / d row`` and ``d value / d column`` (order >= 1).
    fallback : torch.Tensor of shape (height, width), bool
        Pixels where the system was singular and a lower degree was fitted.
    mean : torch.Tensor of shape (channels, height, width)
        The order-0 fit (the kernel-weighted mean) from the same weights.
    """

    value: torch.Tensor
    gradient: torch.Tensor | None
    fallback: torch.Tensor
    mean: torch.Tensor


# Pixels solved at once: the small systems' temporaries stay in cache.
_CHUNK = 1 << 15


def solve_moments(state: SmoothState, p: int, ndim: int, degree: int) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coefficients ``(m, n_monomials, p)`` of the local fits, the fallback mask ``(m,)``
    and the order-0 fit ``(m, p)``.

    Where the system of ``degree`` is singular (too few keys with weight),
    the fit of the next lower degree is used (its higher coefficients 0).
    Rows without weight give NaN (the caller's empty policy decides).
    """
    m = state.total.shape[0]
    if m <= _CHUNK:
        return _solve(state, p, ndim, degree)
    parts = [_solve(state[a:a + _CHUNK], p, ndim, degree) for a in range(0, m, _CHUNK)]
    return tuple(torch.cat(part) for part in zip(*parts, strict=True))  # type: ignore[return-value]


def _solve(state: SmoothState, p: int, ndim: int, degree: int) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor]:
    mean = (state.acc / state.total[:, None]).T.contiguous()  # (columns, m)
    mono = monomials(ndim, degree)
    m = mean.shape[1]
    order0 = mean[:p].T
    if degree == 0:
        return order0[:, None, :], torch.zeros(m, dtype=torch.bool, device=mean.device), order0
    mono2 = [a for a in monomials(ndim, 2 * degree) if any(a)]
    where = {a: i for i, a in enumerate(mono2)}
    base = p * len(mono)
    n = len(mono)
    ones = torch.ones(m, dtype=mean.dtype, device=mean.device)
    gram = [[ones if not any(s) else mean[base + where[s]]
             for s in (tuple(x + y for x, y in zip(a, b, strict=True)) for b in mono)]
            for a in mono]
    rhs = [mean[i * p:(i + 1) * p] for i in range(n)]  # (p, m) each
    coef, pivots = _cholesky_solve(gram, rhs)
    finite = torch.isfinite(order0).all(dim=1)
    out = torch.zeros(m, n, p, dtype=mean.dtype, device=mean.device)
    fell = torch.zeros(m, dtype=torch.bool, device=mean.device)
    todo = finite.clone()
    # degree by degree downwards: the leading k x k block of the Cholesky factor
    # is the factor of the fit of lower degree (monomials in graded order)
    for deg in range(degree, 0, -1):
        k = len(monomials(ndim, deg))
        if k < n:
            coef, _ = _cholesky_solve([row[:k] for row in gram[:k]], rhs[:k])
        ok = todo & pivots[:k].all(dim=0) & torch.stack(
            [torch.isfinite(c).all(dim=0) for c in coef]).all(dim=0)
        sol = torch.stack(coef, dim=0).permute(2, 0, 1)  # (m, k, p)
        out[:, :k] = torch.where(ok[:, None, None], sol, out[:, :k])
        fell |= ok & (deg < degree)
        todo &= ~ok
        if not bool(todo.any()):
            break
    if bool(todo.any()):
        out[todo, 0, :] = order0[todo]
        fell |= todo
    out[~finite] = torch.nan
    return out, fell, order0


def _cholesky_solve(gram: list[list[torch.Tensor]], rhs: list[torch.Tensor]) -> tuple[
        list[torch.Tensor], torch.Tensor]:
    """Solve the symmetric systems ``gram x = rhs``, one per pixel, vectorized over pixels.

    ``gram[i][j]`` is ``(m,)`` and ``rhs[i]`` is ``(p, m)``. The systems are
    equilibrated to a unit diagonal first (monomials of degree ``k`` scale
    like ``radius^k``); the Cholesky pivots are then the Schur complements,
    tiny where the monomials are nearly dependent. Returns ``x`` (a list of
    ``(p, m)``) and whether each pivot was large enough, ``(n, m)``.
    """
    n = len(gram)
    dtype = rhs[0].dtype
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    scale = [gram[i][i].clamp(min=1e-300).sqrt() for i in range(n)]
    g = [[gram[i][j] / (scale[i] * scale[j]) for j in range(n)] for i in range(n)]
    chol: list[list[torch.Tensor]] = [[None] * n for _ in range(n)]  # type: ignore[list-item]
    pivots = []
    for j in range(n):
        s = g[j][j].clone()
        for k in range(j):
            s.sub_(chol[j][k].square())
        good = s > tol
        pivots.append(good)
        d = torch.where(good, s, torch.ones_like(s)).sqrt_()
        chol[j][j] = d
        for i in range(j + 1, n):
            t = g[i][j].clone()
            for k in range(j):
                t.sub_(chol[i][k] * chol[j][k])
            chol[i][j] = t.div_(d)
    y = []
    for i in range(n):
        t = rhs[i] / scale[i]
        for k in range(i):
            t = t - chol[i][k] * y[k]
        y.append(t / chol[i][i])
    x: list[torch.Tensor] = [None] * n  # type: ignore[list-item]
    for i in reversed(range(n)):
        t = y[i]
        for k in range(i + 1, n):
            t = t - chol[k][i] * x[k]
        x[i] = t / chol[i][i]
    return [x[i] / scale[i] for i in range(n)], torch.stack(pivots)


def local_fit(values: torch.Tensor, kernel: Any, offsets: torch.Tensor, degree: int, *,
              guide: torch.Tensor | None = None, key_valid: torch.Tensor | None = None,
              key_shift: torch.Tensor | None = None, border: str = "reflect",
              keys_outside: bool = False, state: SmoothState | None = None) -> LocalFit:
    """Fit a local polynomial of ``degree`` at every pixel of ``values`` ``(c, H, W)``.

    ``guide`` ``(c', H, W)``: the features a value block of the kernel compares
    (default ``values``), as in :func:`~nadaraya.engine._grid.grid_smooth`.
    """
    c, height, width = values.shape
    if state is None:
        state = grid_smooth(values, kernel, offsets, guide=guide, key_valid=key_valid,
                            key_shift=key_shift, degree=degree, border=border,
                            keys_outside=keys_outside)
    coef, bad, order0 = solve_moments(state, c, 2, degree)
    value = coef[:, 0, :].T.reshape(c, height, width)
    gradient = None
    if degree >= 1:
        gradient = coef[:, 1:3, :].permute(1, 2, 0).reshape(2, c, height, width)
    mean = order0.T.reshape(c, height, width)
    return LocalFit(value, gradient, bad.reshape(height, width), mean)
