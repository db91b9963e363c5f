"""Local polynomial fits from the grid engine's weighted moments.

Kernel regression of order ``N`` (Takeda, Farsiu and Milanfar 2007) fits, at
each pixel ``x``, a polynomial in the displacement ``D = x_j - x`` by weighted
least squares with weights ``K(t_x, t_j)``. The normal equations need the
weighted means of ``D^a y_j`` and ``D^a``, which the engine accumulates in
its state (``grid_smooth(..., degree=N)``); here the small systems are solved.

The moments ``D^a y`` reach ``radius^N max |y|``: the values are scaled by a
power of two into ``(-1, 1)`` before the sums (exact) and the fit scaled
back, so values up to the dtype's largest number fit without overflow. The
moments are summed and kept in float64 and the systems solved in float64
whatever the values' dtype: a float32 fit is the float64 fit up to the
rounding of its weights and of the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .._config import get_config
from ..engine import SmoothState
from ..engine.grid import grid_smooth, monomials, peak_exponent, scale_pow2

__all__ = ["LocalFit", "local_fit"]


@dataclass
class LocalFit:
    """The fitted polynomial at every pixel.

    Attributes
    ----------
    value : torch.Tensor of shape (channels, height, width)
        The estimate (the constant term).
    gradient : torch.Tensor of shape (2, channels, height, width) or None
        ``d value / d row`` and ``d value / d column`` (order >= 1); for a
        volume ``(3, channels, depth, height, width)``, ``d / d depth`` first.
    fallback : torch.Tensor of shape (height, width), bool
        Pixels where the system was ill-posed and a lower degree was fitted.
    mean : torch.Tensor of shape (channels, height, width)
        The order-0 fit (the kernel-weighted mean) from the same weights.
    """

    value: torch.Tensor
    gradient: torch.Tensor | None
    fallback: torch.Tensor
    mean: torch.Tensor


# Pixels solved at once, at most: the small systems' temporaries stay in cache (and within
# the working-memory budget, which may ask for fewer).
_CHUNK = 1 << 15
# Least Cholesky pivot of a system equilibrated to a unit diagonal: a monomial whose
# weighted R^2 on the lower ones exceeds 1 - _PIVOT (a variance inflation above 10^4)
# makes the fit ill-posed and the next lower degree is fitted. The same for every dtype,
# so float32 and float64 fits fall back at the same pixels.
_PIVOT = 1e-4


def solve_moments(state: SmoothState, p: int, ndim: int, degree: int,
                  inflation: float = math.inf, dtype: torch.dtype | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coefficients ``(n_monomials, p, m)`` of the local fits, the fallback mask ``(m,)``
    and the order-0 fit ``(p, m)``.

    Where the system of ``degree`` is ill-posed (too few keys with weight,
    or keys nearly on a curve of that degree), the fit of the next lower
    degree is used (its higher coefficients 0); also where the value's
    variance inflation ``(G^-1)_00`` (``G`` the normalized weighted Gram
    matrix; 1 for the mean) exceeds ``inflation``: by Cauchy-Schwarz a fit
    lies within ``sqrt(inflation - 1)`` weighted standard deviations of the
    weighted mean. Rows without weight give NaN (the caller's empty policy
    decides). Solved in float64, ``_CHUNK`` pixels at a time; the results
    have ``dtype`` (default the state's).
    """
    m = state.total.shape[0]
    dtype, device = dtype or state.acc.dtype, state.acc.device
    n = len(monomials(ndim, degree))
    coef = torch.empty(n, p, m, dtype=dtype, device=device)
    fell = torch.empty(m, dtype=torch.bool, device=device)
    order0 = torch.empty(p, m, dtype=dtype, device=device)
    # float64 numbers per pixel of a chunk: the means, the equilibrated system and its
    # factor, the solutions of every degree
    numbers = state.acc.shape[1] + 3 * n * n + 6 * n * p + 8
    chunk = int(min(_CHUNK, max(1024, get_config().working_memory * 2**20 // (8 * numbers))))
    for a in range(0, m, chunk):
        part = slice(a, min(a + chunk, m))
        coef[:, :, part], fell[part], order0[:, part] = _solve(state[part], p, ndim, degree,
                                                                inflation)
    return coef, fell, order0


def _solve(state: SmoothState, p: int, ndim: int, degree: int, limit: float) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor]:
    total = state.total.to(torch.float64)
    mean = (state.acc.to(torch.float64) / total[:, None]).T.contiguous()  # (columns, m)
    mono = monomials(ndim, degree)
    m = mean.shape[1]
    order0 = mean[:p]
    if degree == 0:
        return order0[None], torch.zeros(m, dtype=torch.bool, device=mean.device), order0
    mono2 = [a for a in monomials(ndim, 2 * degree) if any(a)]
    where = {a: i for i, a in enumerate(mono2)}
    base = p * len(mono)
    n = len(mono)
    ones = torch.ones(m, dtype=mean.dtype, device=mean.device)
    gram = [[ones if not any(s) else mean[base + where[s]]
             for s in (tuple(x + y for x, y in zip(a, b, strict=True)) for b in mono)]
            for a in mono]
    rhs = [mean[i * p:(i + 1) * p] for i in range(n)]  # (p, m) each
    coef, pivots, inflation = _cholesky_solve(gram, rhs)
    finite = torch.isfinite(order0).all(dim=0)
    out = torch.zeros(n, p, m, dtype=mean.dtype, device=mean.device)
    fell = torch.zeros(m, dtype=torch.bool, device=mean.device)
    todo = finite.clone()
    # degree by degree downwards: the leading k x k block of the Cholesky factor
    # is the factor of the fit of lower degree (monomials in graded order)
    for deg in range(degree, 0, -1):
        k = len(monomials(ndim, deg))
        if k < n:
            coef, _, _ = _cholesky_solve([row[:k] for row in gram[:k]], rhs[:k])
        sol = torch.stack(coef, dim=0)  # (k, p, m)
        ok = todo & pivots[:k].all(dim=0) & torch.isfinite(sol).all(dim=0).all(dim=0)
        if limit < math.inf:
            ok &= inflation[k - 1] <= limit
        out[:k] = torch.where(ok, sol, out[:k])
        fell |= ok & (deg < degree)
        todo &= ~ok
        if not bool(todo.any()):
            break
    if bool(todo.any()):
        out[0, :, todo] = order0[:, todo]
        fell |= todo
    out[:, :, ~finite] = torch.nan
    return out, fell, order0


def fit_numbers(channels: int, degree: int, extra: int = 0, ndim: int = 2) -> int:
    """Temporary numbers per pixel of a region that :func:`local_fit` holds at its peak:
    the scaled and padded values and their window ranges, the engine's state with the
    coefficients solved from it, and ``extra`` per-key arrays of the kernel (e.g. a
    steering field and its log-weight, 6), on ``ndim`` position axes; a quarter more for
    the engine's own arrays (checked by benchmarks/bench_peak_memory.py)."""
    n = len(monomials(ndim, degree))
    n_acc = channels * n + len(monomials(ndim, 2 * degree)) - 1
    wide = 2 if degree else 1  # the state is float64 for fits of degree > 0
    return (5 * (5 * channels + wide * (n_acc + 3) + n * channels + extra) + 3) // 4


def _cholesky_solve(gram: list[list[torch.Tensor]], rhs: list[torch.Tensor]) -> tuple[
        list[torch.Tensor], torch.Tensor]:
    """Solve the symmetric systems ``gram x = rhs``, one per pixel, vectorized over pixels.

    ``gram[i][j]`` is ``(m,)`` and ``rhs[i]`` is ``(p, m)``. The systems are
    equilibrated to a unit diagonal first (monomials of degree ``k`` scale
    like ``radius^k``); the Cholesky pivots are then the Schur complements,
    tiny where the monomials are nearly dependent. Returns ``x`` (a list of
    ``(p, m)``), whether each pivot was large enough, ``(n, m)``, and the
    variance inflation of ``x_0`` in the leading ``k x k`` systems,
    ``(gram_k^-1)_00`` in row ``k - 1`` of an ``(n, m)`` array.
    """
    n = len(gram)
    tol = _PIVOT
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
    # (gram^-1)_00 of the leading k x k systems: |L_k^-1 e_0|^2 (the leading block of
    # the factor is the factor of the leading block)
    e: list[torch.Tensor] = []
    for i in range(n):
        t = (1.0 / scale[0]) if i == 0 else torch.zeros_like(scale[0])
        for k in range(i):
            t = t - chol[i][k] * e[k]
        e.append(t / chol[i][i])
    inflation = torch.stack(e).square_().cumsum_(0)
    return [x[i] / scale[i] for i in range(n)], torch.stack(pivots), inflation


def local_fit(values: torch.Tensor, kernel: Any, offsets: torch.Tensor, degree: int, *,
              guide: torch.Tensor | None = None, key_valid: torch.Tensor | None = None,
              key_shift: torch.Tensor | None = None, border: str = "reflect",
              keys_outside: bool = False) -> LocalFit:
    """Fit a local polynomial of ``degree`` at every pixel of ``values`` ``(c, H, W)``
    (or every voxel of ``(c, D, H, W)``: the grid's axes are those after the first).

    ``guide`` ``(c', H, W)``: the features a value block of the kernel compares
    (default ``values``), as in :func:`~nadaraya.engine.grid.grid_smooth`.
    """
    c, *grid = values.shape
    ndim = len(grid)
    exp = peak_exponent(values) if degree else 0
    if exp and guide is None and kernel.value is not None:
        guide = values
    state = grid_smooth(scale_pow2(values, -exp, inplace=False), kernel, offsets, guide=guide,
                        key_valid=key_valid, key_shift=key_shift, degree=degree, border=border,
                        keys_outside=keys_outside,
                        state_dtype=torch.float64 if degree else values.dtype)
    coef, bad, order0 = solve_moments(state, c, ndim, degree, dtype=values.dtype)
    del state
    scale_pow2(coef, exp)
    scale_pow2(order0, exp)
    value = coef[0].view(c, *grid)
    gradient = coef[1:1 + ndim].view(ndim, c, *grid) if degree >= 1 else None
    return LocalFit(value, gradient, bad.view(*grid), order0.view(c, *grid))
