"""Oracles and bounds for the sweep engine's tests.

* :func:`sweep` runs ``smooth(engine="sweep")`` on problems of any size (the
  engine refuses small ones in normal use, where summing every pair is faster).
* :func:`extended` sums the kernel naively over every pair, in NumPy's
  ``longdouble`` (64-bit significand on x86: 2^11 times finer than float64),
  on the engine's own prepared points, so its error is far below the bounds.
* :func:`exp_tolerance` and :func:`window_tolerance` are the bounds derived in
  ``nadaraya.engine.sweep._exp`` and ``._window``, written out here.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine.sweep import _engine
from nadaraya.engine.sweep._exp import chain_length
from nadaraya.engine.sweep._native import unavailable

U64 = 2.0**-53
U32 = 2.0**-24
EXP = {"laplacian": (0, 1.0), "matern32": (1, math.sqrt(3.0)), "matern52": (2, math.sqrt(5.0))}
WINDOW = ("epanechnikov", "tricube", "uniform")
GAMMA = {"uniform": 4.0, "epanechnikov": 100.0, "tricube": 640.0}


@contextlib.contextmanager
def any_size() -> Iterator[None]:
    """The sweep engine accepts problems of every size inside this block."""
    with contextlib.ExitStack() as stack:
        for name in ("PAIRS_PER_POINT", "MIN_PAIRS"):
            stack.enter_context(patched(_engine, name, 0.0))
        yield


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    before = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, before)


def need_native() -> None:
    """Skip the test, with the reason, where the compiled loops are unavailable."""
    why = unavailable()
    if why is not None:
        pytest.skip(f"the sweep engine cannot run here: {why}")


def sweep(queries: Any, keys: Any, values: Any, kernel: Any, **kwargs: Any) -> Any:
    """``smooth(..., engine="sweep")`` whatever the problem's size."""
    need_native()
    with any_size():
        return nadaraya.smooth(queries, keys, values, kernel, engine="sweep", **kwargs)


def skip_without_extended() -> None:
    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("numpy's longdouble is no wider than float64 on this platform")


def prepared(queries: Any, keys: Any, kernel: str, bandwidth: float,
             dtype: torch.dtype = torch.float64) -> tuple[np.ndarray, np.ndarray]:
    """The engine's prepared points (unit bandwidth) of queries and keys, as float64."""
    q = torch.as_tensor(np.asarray(queries)).to(dtype)
    k = torch.as_tensor(np.asarray(keys)).to(dtype)
    job, _ = build_job(q, k, None, kernel, None, bandwidth)
    return (job.kernel.q[:, 0].to(torch.float64).numpy(),
            job.kernel.k[:, 0].to(torch.float64).numpy())


def _weights(kernel: str, uq: np.ndarray, uk: np.ndarray, single: bool) -> np.ndarray:
    """Kernel weights ``(m, n)`` in longdouble; the poly x exp kernels' divided by
    ``exp(-t)`` of each query's nearest key (so that none underflows); the compact
    kernels' support tested as the dense engine does."""
    d = uq.astype(np.longdouble)[:, None] - uk.astype(np.longdouble)[None, :]
    r = np.abs(d)
    if kernel in EXP:
        deg, scale = EXP[kernel]
        t = r * np.longdouble(scale)
        poly = [np.ones_like(t), 1 + t, 1 + t + t * t / 3][deg]
        return poly * np.exp(-(t - t.min(axis=1, keepdims=True)))
    rounded = np.abs(uq[:, None] - uk[None, :])  # float64 differences: exact for float32 points
    if single:
        rounded = rounded.astype(np.float32).astype(np.float64)
    inside = rounded <= 1.0 if kernel == "uniform" else rounded < 1.0
    if kernel == "uniform":
        w = np.ones_like(r)
    elif kernel == "epanechnikov":
        w = 1 - r * r
    else:
        w = (1 - r**3) ** 3
    return np.where(inside, w, 0)


def extended(kernel: str, uq: np.ndarray, uk: np.ndarray, values: np.ndarray,
             single: bool = False) -> dict[str, np.ndarray]:
    """Naive sums in longdouble.

    Returns ``mean (m, p)`` (NaN where empty); ``total (m,)``, the weight sum (for the
    poly x exp kernels, over ``exp(-t)`` of the nearest key); ``count (m,)``, the keys
    with weight; ``abs_values (m, p)``, ``sum |v_k|`` over those keys.
    """
    w = _weights(kernel, uq, uk, single)
    v = np.asarray(values, dtype=np.longdouble).reshape(len(uk), -1)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (w @ v) / total[:, None]
    seen = (w > 0).astype(np.longdouble)
    return {"mean": mean.astype(np.float64), "total": total.astype(np.float64),
            "count": (w > 0).sum(axis=1), "abs_values": (seen @ np.abs(v)).astype(np.float64)}


def exp_tolerance(kernel: str, uq: np.ndarray, uk: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The bound of ``_exp.py`` on each output ``(m, p)``: ``2 eps max |v|``, with
    ``eps = ((deg + 5) (L + 2) + 3 d) u``, ``L`` the chain length and ``d`` the scaled
    distance to the nearest key plus 40."""
    deg, scale = EXP[kernel]
    nearest = np.abs(uq[:, None] - uk[None, :]).min(axis=1)
    eps = ((deg + 5) * (chain_length(len(uk)) + 2) + 3 * (scale * nearest + 40)) * U64
    top = np.abs(np.asarray(values, dtype=np.float64).reshape(len(uk), -1)).max(axis=0)
    return 2 * eps[:, None] * top[None, :]


def window_tolerance(kernel: str, ref: dict[str, np.ndarray]) -> np.ndarray:
    """The bound of ``_window.py`` on each output ``(m, p)`` (0 where the window is empty).

    ``|total' - total| <= gamma u count`` and ``|acc' - acc| <= gamma u sum |v|`` (per half
    window for the tricube: twice that in all), so the mean moves by at most
    ``gamma u (sum |v| + |mean| count) / total``; a query summed directly (weight sum below
    2^-4 of its keys) is within the dense-like ``4 u (...) / total``, which is less.
    """
    gamma = GAMMA[kernel] * (2 if kernel == "tricube" else 1)
    count, total = ref["count"][:, None], ref["total"][:, None]
    mean = np.nan_to_num(np.abs(ref["mean"]))
    return gamma * U64 * (ref["abs_values"] + mean * count) / np.where(total > 0, total, 1.0)
