"""Exact 1-D sweeps at scale: the sweep engine against the other exact engines and a peer.

Task (issue 12): x ~ U(0, 6), y = 2 sin x + N(0, 1), queries ~ U(0, 6) drawn
apart from the keys, n = m = 1e6, h = 0.3; the Laplacian and the
Epanechnikov kernel (``--kernels`` adds ``matern32``, ``matern52``, ``tricube``,
``uniform``). For each kernel it prints, best of ``--repeats`` wall-clock times
(and the CPU seconds of all threads, steadier on a shared machine):

* ``smooth``: ``nadaraya.smooth`` as a user calls it (the automatic choice,
  whose engine it names), validation and dispatch included;
* ``sweep run``: the sweep engine alone on a job built beforehand;
* ``best other exact engine``: every other engine of nadaraya that accepts
  the job, on the first ``--sample`` and 4 times as many queries against all
  keys (best of 2 each), the time extrapolated linearly to all queries (they
  are O(n m)); the fastest is shown;
* ``sklearn KernelDensity``: scikit-learn's exact tree sums (``atol = rtol =
  0``; kernels ``exponential`` and ``epanechnikov`` are ours), the three sums
  Nadaraya-Watson needs (weights, and ``y+`` and ``y-`` as sample weights) on
  ``--peer-sample`` and 4 times as many queries, extrapolated likewise.
  statsmodels' ``KDEUnivariate`` with ``kernel="epa"`` evaluates on a grid
  (binned), not exactly, and is not timed here.

Ratios are the others' times over the sweep's (``smooth`` and ``sweep run``).
Accuracy: the largest error against the float64 dense engine on 2,000 sampled
queries, beside the bound the engine proves for them
(``nadaraya.engine.sweep._exp`` and ``._window``); and, on 50 queries, the
sweep's and the dense engine's errors against naive sums in extended
precision (which of the two the difference belongs to).

Run ``python benchmarks/bench_sweep.py`` (``--help`` for the options).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine._api import build_job
from nadaraya.engine._dispatch import ENGINES, get_engine
from nadaraya.engine._scale import scale_values
from nadaraya.engine.sweep._exp import chain_length
from nadaraya.engine.sweep._window import GAMMA

U = 2.0**-53
EXP = {"laplacian": (0, 1.0), "matern32": (1, math.sqrt(3.0)), "matern52": (2, math.sqrt(5.0))}
SKLEARN = {"laplacian": "exponential", "epanechnikov": "epanechnikov"}


def best(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Best wall-clock and CPU seconds of ``repeats`` calls, and the last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out


def job_for(q: np.ndarray, x: np.ndarray, y: np.ndarray, kernel: str, h: float) -> Any:
    job, _ = build_job(q, x, y, kernel, None, h)
    scale_values(job)
    return job


def extrapolate(run: Callable[[int], Any], sample: int, m: int, repeats: int) -> float:
    """Seconds of ``run(k)`` for ``k = sample`` and ``4 sample`` queries (best of
    ``repeats``), extrapolated linearly to ``m`` (a fixed cost, such as building a tree, is
    not multiplied; the per-query cost is at least the larger run's share)."""
    small, _, _ = best(lambda: run(sample), repeats)
    large, _, _ = best(lambda: run(4 * sample), repeats)
    slope = max((large - small) / (3 * sample), 0.0)
    return max(small + slope * (m - sample), large)


def other_engines(q: np.ndarray, x: np.ndarray, y: np.ndarray, kernel: str, h: float,
                  sample: int) -> tuple[str, float]:
    """The fastest other exact engine, its time extrapolated to all queries."""
    jobs = {k: job_for(q[:k], x, y, kernel, h) for k in (sample, 4 * sample)}
    found: list[tuple[float, str]] = []
    for name in ENGINES:
        engine = get_engine(name)
        if name == "sweep" or engine.refuse(jobs[sample]) is not None:
            continue
        found.append((extrapolate(lambda k, e=engine: e.run(jobs[k]), sample, len(q), 2),
                      name))
    wall, name = min(found)
    return name, wall


def sklearn_sums(q: np.ndarray, x: np.ndarray, y: np.ndarray, kernel: str,
                 h: float) -> np.ndarray:
    """``sum K y / sum K`` from scikit-learn's exact kernel density sums."""
    from sklearn.neighbors import KernelDensity

    def sums(weights: np.ndarray | None) -> np.ndarray:
        kde = KernelDensity(kernel=SKLEARN[kernel], bandwidth=h, atol=0, rtol=0)
        kde.fit(x[:, None], sample_weight=weights)
        total = weights.sum() if weights is not None else len(x)
        return np.exp(kde.score_samples(q[:, None])) * total  # up to a common factor

    plus, minus = np.maximum(y, 0), np.maximum(-y, 0)
    return (sums(plus) - sums(minus)) / sums(None)


def bound(kernel: str, q: np.ndarray, x: np.ndarray, y: np.ndarray, h: float,
          ref: np.ndarray) -> float:
    """The largest bound the engine proves on these queries' results."""
    uq, ux = (q - np.median(x)) / h, (x - np.median(x)) / h
    order = np.sort(ux)
    if kernel in EXP:
        deg, s = EXP[kernel]
        at = np.clip(np.searchsorted(order, uq), 1, len(order) - 1)
        nearest = np.minimum(np.abs(uq - order[at - 1]), np.abs(order[at] - uq))
        eps = ((deg + 5) * (chain_length(len(x)) + 2) + 3 * (s * nearest + 40)) * U
        return float((2 * eps * np.abs(y).max()).max())
    lo = np.searchsorted(order, uq - 1, side="left")
    hi = np.searchsorted(order, uq + 1, side="right")
    count = hi - lo
    total = np.array([_weight_sum(kernel, uq[i], order[lo[i]:hi[i]]) for i in range(len(uq))])
    gamma = GAMMA[kernel] * (2 if kernel == "tricube" else 1)
    top = np.abs(y).max()
    return float((gamma * U * (count * top + np.abs(ref) * count) / total).max())


def _weight_sum(kernel: str, x: float, keys: np.ndarray) -> float:
    t = np.abs(x - keys)
    if kernel == "uniform":
        return float((t <= 1).sum())
    if kernel == "epanechnikov":
        return float(np.clip(1 - t * t, 0, None).sum())
    return float((np.clip(1 - t**3, 0, None) ** 3).sum())


def exact_means(kernel: str, q: np.ndarray, x: np.ndarray, y: np.ndarray,
                h: float) -> np.ndarray:
    """Naive weighted means in NumPy's longdouble (a 64-bit significand on x86) on the
    engine's own prepared points, one query at a time."""
    job, _ = build_job(q, x, None, kernel, None, h)
    uq = job.kernel.q[:, 0].numpy().astype(np.longdouble)
    uk = job.kernel.k[:, 0].numpy().astype(np.longdouble)
    values = y.astype(np.longdouble)
    out = np.full(len(q), np.nan)
    for i, point in enumerate(uq):
        r = np.abs(point - uk)
        if kernel in EXP:
            deg, s = EXP[kernel]
            t = r * np.longdouble(s)
            w = [np.ones_like(t), 1 + t, 1 + t + t * t / 3][deg] * np.exp(-(t - t.min()))
        elif kernel == "uniform":
            w = (r <= 1).astype(np.longdouble)
        elif kernel == "epanechnikov":
            w = np.where(r < 1, 1 - r * r, 0)
        else:
            w = np.where(r < 1, (1 - r**3) ** 3, 0)
        if w.sum() > 0:
            out[i] = float((w @ values) / w.sum())
    return out


def run_kernel(kernel: str, args: argparse.Namespace, x: np.ndarray, y: np.ndarray,
               q: np.ndarray) -> None:
    h, m = args.bandwidth, len(q)
    used = nadaraya.explain(q, x, y, kernel, bandwidth=h).engine
    nadaraya.smooth(q[:1000], x[:1000], y[:1000], kernel, bandwidth=h, empty="nan")  # warm-up
    wall, cpu, out = best(lambda: nadaraya.smooth(q, x, y, kernel, bandwidth=h, empty="nan"),
                          args.repeats)
    job = job_for(q, x, y, kernel, h)
    sweep = get_engine("sweep")
    run_wall, run_cpu, _ = best(lambda: sweep.run(job), args.repeats)
    print(f"\n{kernel}, n = m = {m:.0e}, h = {h}")
    print(f"  smooth (engine {used!r}): {wall:.3f} s wall, {cpu:.3f} s CPU")
    print(f"  sweep run (job built):  {run_wall:.3f} s wall, {run_cpu:.3f} s CPU")
    if args.sample:
        s = args.sample
        name, other = other_engines(q, x, y, kernel, h, s)
        print(f"  best other exact engine ({name!r}; {s} and {4 * s} queries, extrapolated): "
              f"{other:.1f} s   ratios {other / wall:.0f}x (smooth), "
              f"{other / run_wall:.0f}x (sweep run)")
        if kernel in SKLEARN and args.peer_sample:
            k = args.peer_sample
            peer = extrapolate(lambda j: sklearn_sums(q[:j], x, y, kernel, h), k, m, 1)
            print(f"  sklearn KernelDensity, exact ({k} and {4 * k} queries, extrapolated): "
                  f"{peer:.0f} s   ratios {peer / wall:.0f}x (smooth), "
                  f"{peer / run_wall:.0f}x (sweep run)")
    if args.check:
        rows = np.random.default_rng(1).choice(m, args.check, replace=False)
        ref = nadaraya.smooth(q[rows], x, y, kernel, bandwidth=h, engine="dense", empty="nan")
        seen = ~np.isnan(ref)
        err = float(np.abs(out[rows] - ref)[seen].max())
        limit = bound(kernel, q[rows][seen], x, y, h, ref[seen])
        print(f"  max error vs float64 dense on {args.check} queries: {err:.2e} "
              f"(proven bound {limit:.2e}; {err / limit:.1e} of it)")
    if args.exact:
        rows = np.random.default_rng(2).choice(m, args.exact, replace=False)
        exact = exact_means(kernel, q[rows], x, y, h)
        dense = nadaraya.smooth(q[rows], x, y, kernel, bandwidth=h, engine="dense", empty="nan")
        seen = ~np.isnan(exact)
        print(f"  on {args.exact} queries against naive sums in extended precision: sweep "
              f"{np.abs(out[rows] - exact)[seen].max():.2e}, float64 dense "
              f"{np.abs(dense - exact)[seen].max():.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=1e6, help="keys and queries (default 1e6)")
    parser.add_argument("--bandwidth", type=float, default=0.3)
    parser.add_argument("--kernels", default="laplacian,epanechnikov")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sample", type=int, default=800,
                        help="queries the other engines run on, and 4 times as many (0: none)")
    parser.add_argument("--peer-sample", type=int, default=20,
                        help="queries scikit-learn runs on, and 4 times as many (0: none)")
    parser.add_argument("--check", type=int, default=2000,
                        help="queries checked against the float64 dense engine (0: none)")
    parser.add_argument("--exact", type=int, default=50,
                        help="queries checked against naive sums in extended precision")
    args = parser.parse_args()
    n = int(args.n)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 6, n)
    y = 2 * np.sin(x) + rng.standard_normal(n)
    q = rng.uniform(0, 6, n)
    print(f"torch threads: {torch.get_num_threads()}")
    for kernel in args.kernels.split(","):
        try:
            run_kernel(kernel, args, x, y, q)
        except NadarayaError as exc:
            print(f"\n{kernel}: {exc}")


if __name__ == "__main__":
    main()
