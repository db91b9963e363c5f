"""Problems for the binned method, and an independent oracle for its sums.

The oracle writes each kernel's formula out with NumPy on the job's own
prepared points (kernel coordinates, unit bandwidth), in float64, without
the library's kernel classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nadaraya.engine._api import build_job
from nadaraya.engine._job import Job
from nadaraya.engine._scale import scale_values
from nadaraya.engine.certified import Sums

KERNELS = ("gaussian", "laplacian", "cauchy", "epanechnikov", "tricube")
LAYOUTS = ("uniform", "clusters", "heavy", "duplicates", "one")


def profile(name: str, r2: np.ndarray) -> np.ndarray:
    """``K`` of the squared radius, written out."""
    if name == "gaussian":
        return np.exp(-0.5 * r2)
    if name == "laplacian":
        return np.exp(-np.sqrt(r2))
    if name == "cauchy":
        return 1.0 / (1.0 + r2)
    inside = r2 < 1.0
    if name == "epanechnikov":
        return np.where(inside, 1.0 - r2, 0.0)
    return np.where(inside, (1.0 - np.minimum(r2, 1.0) ** 1.5) ** 3, 0.0)


def exact(job: Job, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact float64 ``total (m,)``, ``acc (m, p)``, and ``sum |K v| (m, p)`` for the slack."""
    q = job.kernel.q.detach().double().cpu().numpy()
    k = job.kernel.k.detach().double().cpu().numpy()
    v = job.values.detach().double().cpu().numpy()
    r2 = np.zeros((q.shape[0], k.shape[0]))
    for a in range(q.shape[1]):
        r2 += np.square(q[:, a, None] - k[None, :, a])
    w = profile(name, r2)
    return w.sum(axis=1), w @ v, w @ np.abs(v)


def make_job(queries: Any, keys: Any, values: Any, kernel: Any, bandwidth: Any) -> Job:
    """The job :func:`nadaraya.smooth` would build (values scaled into (-1, 1))."""
    job, _ = build_job(queries, keys, values, kernel, None, bandwidth)
    scale_values(job)
    return job


def check_bounds(job: Job, name: str, sums: Sums) -> None:
    """Every sum within its bound of the oracle (plus the oracle's own rounding)."""
    total, acc, mass = exact(job, name)
    sums = Sums(*(x.cpu() for x in (sums.total, sums.acc, sums.total_err, sums.acc_err)))
    n = job.n
    slack = 1e-12 * total + 1e-300  # the oracle's rounding: n u (1 + r2) of each term
    err_t = np.abs(sums.total.numpy() - total)
    assert np.all(err_t <= sums.total_err.numpy() + slack), (
        f"total off by {err_t.max():.3g}, bound {sums.total_err.numpy()[err_t.argmax()]:.3g}")
    if job.p:
        err_a = np.abs(sums.acc.numpy() - acc)
        assert np.all(err_a <= sums.acc_err.numpy() + 1e-12 * mass + 1e-300), (
            f"acc off by {err_a.max():.3g}")
    assert n >= 1


def layout(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """Keys ``(n, d)`` of the given kind, on a scale of about 1."""
    if kind == "uniform":
        return rng.uniform(0.0, 1.0, (n, d))
    if kind == "clusters":
        centres = rng.uniform(0.0, 1.0, (3, d))
        return centres[rng.integers(0, 3, n)] + 1e-3 * rng.standard_normal((n, d))
    if kind == "heavy":
        return np.clip(0.05 * rng.standard_cauchy((n, d)), -3.0, 3.0)
    if kind == "duplicates":
        base = rng.uniform(0.0, 1.0, (max(1, n // 20), d))
        return base[rng.integers(0, base.shape[0], n)]
    return np.full((1, d), 0.3)


def as_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
