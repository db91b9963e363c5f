"""The oracle of the fast Gauss transform tests: exact float64 sums, and the check.

The oracle sums ``K = exp(-r^2 / 2)`` with ``r^2`` formed coordinate by
coordinate from the job's prepared points (no ``|q|^2 + |k|^2 - 2 q.k``
cancellation) and torch's ``exp`` and pairwise sums. Its own error is at most a
few ulps of ``sum K |w|`` (the exponential, the product, ``log2 n`` levels of the
pairwise sum) plus, per term, ``r^2 / 2`` times the ``(d + 2)`` roundings of
``r^2``; the check allows twice that on top of the method's bound: about
``1e-15`` of the sums, far below the bounds it tests.
"""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
import pytest
import torch

from nadaraya.engine._api import build_job
from nadaraya.engine.certified import Sums
from nadaraya.engine.fgt import _native

U = 2.0**-53
ORACLE_ULPS = 4

requires_native = pytest.mark.skipif(
    _native.load() is None, reason=f"compiled loops unavailable: {_native.unavailable()}")


def exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[Sums, torch.Tensor]:
    """Exact sums (bounds zero) and the oracle's own error bound ``(m, 1 + p)``."""
    q, k, v = q.double(), k.double(), v.double()
    r2 = torch.zeros(q.shape[0], k.shape[0], dtype=torch.float64)
    for i in range(q.shape[1]):
        r2 += (q[:, i, None] - k[None, :, i]) ** 2
    w = torch.exp(-0.5 * r2)
    total, acc = w.sum(1), w @ v
    d = q.shape[1]
    # each term's relative error in ulps: exp and the product, the pairwise sum, and
    # r^2 / 2 times the (d + 2) roundings of r^2 (doubled for safety)
    spread = w * (2 * (ORACLE_ULPS + math.log2(k.shape[0] + 1)) + (d + 2) * r2)
    slack = torch.cat([spread.sum(1, keepdim=True), spread @ v.abs()], 1) * U
    zero = torch.zeros_like
    return Sums(total, acc, zero(total), zero(acc)), slack


def exact_digits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Sums:
    """The sums to 30 digits (mpmath; small problems), rounded to float64 at the end."""
    with mpmath.workdps(30):
        qs = [[mpmath.mpf(x) for x in row] for row in q.double().tolist()]
        ks = [[mpmath.mpf(x) for x in row] for row in k.double().tolist()]
        vs = [[mpmath.mpf(x) for x in row] for row in v.double().tolist()]
        total, acc = [], []
        for row in qs:
            w = [mpmath.exp(-sum((a - b) ** 2 for a, b in zip(row, key, strict=True)) / 2)
                 for key in ks]
            total.append(float(mpmath.fsum(w)))
            acc.append([float(mpmath.fsum(wj * vj[c] for wj, vj in zip(w, vs, strict=True)))
                        for c in range(v.shape[1])])
    t = torch.tensor(total, dtype=torch.float64)
    a = torch.tensor(acc, dtype=torch.float64).reshape(len(total), v.shape[1])
    return Sums(t, a, torch.zeros_like(t), torch.zeros_like(a))


def check_digits(sums: Sums, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> float:
    """Assert every sum within its bound of the 30-digit one (plus half an ulp of rounding)."""
    ref = exact_digits(q, k, v)
    worst = 0.0
    for name in ("total", "acc"):
        got, want, bound = getattr(sums, name), getattr(ref, name), getattr(sums, f"{name}_err")
        err = (got - want).abs()
        assert bool((err <= bound + U * want.abs()).all()), f"{name}: {float((err / bound).max())}"
        worst = max(worst, float((err / bound).max()))
    return worst


def check(sums: Sums, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> float:
    """Assert every sum within its bound of the exact one; returns the worst error/bound."""
    ref, slack = exact(q, k, v)
    for name, col in (("total", None), ("acc", slice(None))):
        got = getattr(sums, name)
        want = getattr(ref, name)
        bound = getattr(sums, f"{name}_err")
        s = slack[:, 0] if col is None else slack[:, 1:]
        assert torch.isfinite(got).all() and (bound >= 0).all()
        err = (got - want).abs()
        bad = err > bound + s
        assert not bool(bad.any()), (
            f"{name}: error {float(err[bad].max()):.3g} over bound "
            f"{float(bound[bad][err[bad].argmax()]):.3g} at {int(bad.sum())} place(s)")
    ratio = torch.cat([((sums.total - ref.total).abs() / (sums.total_err + 1e-300))[:, None],
                       (sums.acc - ref.acc).abs() / (sums.acc_err + 1e-300)], 1)
    return float(ratio.max())


def job_of(queries: Any, keys: Any, values: Any, bandwidth: Any = 1.0, kernel: Any = "gaussian",
           dtype: torch.dtype = torch.float64) -> Any:
    """A job on prepared points, as the certified dispatcher hands it to a method."""
    def t(a: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(dtype)

    job, _ = build_job(t(queries), t(keys), t(values), kernel, None, bandwidth)
    return job


def relative_median(sums: Sums) -> float:
    """Median of ``total_err / total`` (how tight the bounds run in the bulk)."""
    return float((sums.total_err / sums.total).median())


def cramer_ratio(n: int, x: np.ndarray) -> np.ndarray:
    """``|H_n(x)| exp(-x^2/2) / sqrt(2^n n!)`` for the physicists' Hermite polynomial.

    From the orthonormal Hermite functions' stable recurrence, times ``pi^(1/4)``.
    """
    psi_prev = np.zeros_like(x)
    psi = np.pi**-0.25 * np.exp(-x**2 / 2)
    for j in range(n):
        psi, psi_prev = (math.sqrt(2 / (j + 1)) * x * psi - math.sqrt(j / (j + 1)) * psi_prev,
                         psi)
    return np.abs(psi) * np.pi**0.25
