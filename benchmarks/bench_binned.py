"""Binned sums (linear binning + FFT) against KDEpy's FFTKDE on the 1-D task.

Task: x ~ U(0, 6), y = 2 sin x + N(0, 1), Gaussian kernel, queries = keys,
n = m = ``--n``, for each bandwidth in ``--bandwidths``, at ``--tolerance``.

For each bandwidth it prints:

- ``sums``: our two sums (``sum K`` and ``sum K y``) with their bounds, by the
  binned method on a prepared job; ``smooth``: the whole
  ``nadaraya.smooth(..., tolerance=, engine="binned")`` call (binding,
  the check of every query's bound, the exact redo of the unproven ones).
  Wall-clock and CPU seconds (all threads; steadier than the wall clock on a
  shared machine), the best of ``--repeats``.
- the measured worst error on ``--sample`` sampled queries against exact
  float64 direct sums, beside the bound: of ``sum K`` relative to the exact
  total, and of the smoothed output relative to ``max |y|`` (what the
  tolerance promises), with the largest output bound the method stated for
  those queries and how many of all queries it left unproven.
- KDEpy's ``FFTKDE`` computing the same two sums (``fit(x)`` and
  ``fit(x, weights=y)``, evaluated on an equidistant grid and read off at the
  queries by ``np.interp``), on grids of ``--kdepy-grids`` nodes (``ours``: as
  many nodes as our grid, over the data +- 7 bandwidths), with its measured
  error on the same sample and our time as a ratio of its time (below 1: we
  are faster). When KDEpy does not import, a line says so::

    python benchmarks/bench_binned.py
    python benchmarks/bench_binned.py --n 1e5 --bandwidths 0.03 --repeats 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def make_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 6.0, n)
    return x, 2.0 * np.sin(x) + rng.standard_normal(n)


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """Result of the last call, and the least wall-clock and CPU seconds over ``repeats``."""
    wall = cpu = float("inf")
    out = None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return out, wall, cpu


def exact_sums(x: np.ndarray, y: np.ndarray, q: np.ndarray,
               h: float) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j K`` and ``sum_j K y_j`` at ``q``, direct in float64, in blocks of keys."""
    total, acc = np.zeros(q.shape[0]), np.zeros(q.shape[0])
    for start in range(0, x.shape[0], 50_000):
        w = np.exp(-0.5 * np.square((q[:, None] - x[None, start:start + 50_000]) / h))
        total += w.sum(axis=1)
        acc += w @ y[start:start + 50_000]
    return total, acc


def kdepy_sums(x: np.ndarray, y: np.ndarray, h: float, nodes: int) -> tuple[np.ndarray, ...]:
    """KDEpy's two sums at the keys, from an equidistant grid of ``nodes`` points."""
    from KDEpy import FFTKDE

    grid = np.linspace(x.min() - 7 * h, x.max() + 7 * h, nodes)
    scale = h * np.sqrt(2 * np.pi)
    density = FFTKDE(kernel="gaussian", bw=h).fit(x).evaluate(grid)
    weighted = FFTKDE(kernel="gaussian", bw=h).fit(x, weights=y).evaluate(grid)
    total = np.interp(x, grid, density) * (x.shape[0] * scale)
    acc = np.interp(x, grid, weighted) * (y.sum() * scale)
    return total, acc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=1e6, help="m = n (default 1e6)")
    parser.add_argument("--bandwidths", default="0.003,0.03,0.3")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample", type=int, default=2000, help="queries checked exactly")
    parser.add_argument("--kdepy-grids", default="ours,16384,1024",
                        help="KDEpy grid sizes: 'ours' and/or numbers")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    import nadaraya
    from nadaraya.engine._api import build_job
    from nadaraya.engine._scale import scale_values
    from nadaraya.engine.binned import BinnedMethod
    from nadaraya.engine.certified import unproven_rows

    try:
        import KDEpy  # noqa: F401
        have_kdepy = True
    except ImportError:
        have_kdepy = False

    n, tol = int(args.n), args.tolerance
    x, y = make_data(n)
    pick = np.random.default_rng(1).choice(n, min(args.sample, n), replace=False)
    method = BinnedMethod()
    print(f"binned sums, 1-D Gaussian, n = m = {n}, tolerance {tol:g}, "
          f"{torch.get_num_threads()} torch threads; best of {args.repeats}")
    if not have_kdepy:
        print("KDEpy is not installed here: its timings are skipped "
              "(pip install KDEpy in an environment of its own to compare)")
    for h in (float(b) for b in args.bandwidths.split(",")):
        job, _ = build_job(x, x, y, "gaussian", None, h)
        scale_values(job)
        why = method.refuse(job, tol)
        if why is not None:
            print(f"h = {h:g}: binned refuses: {why}")
            continue
        plan = method.plan(job, tol)
        sums, wall, cpu = best_of(lambda job=job: method.sums(job, tol), args.repeats)
        out, s_wall, s_cpu = best_of(lambda h=h: nadaraya.smooth(
            x, x, y, bandwidth=h, tolerance=tol, engine="binned"), args.repeats)

        total, acc = exact_sums(x, y, x[pick], h)
        ymax = float(np.abs(y).max())
        t_err = float(np.max(np.abs(sums.total.numpy()[pick] - total) / total))
        t_bound = float(np.max(sums.total_err.numpy()[pick] / total))
        o_err = float(np.max(np.abs(out[pick] - acc / total))) / ymax
        scale = job.values.abs().amax(0).double()
        low = sums.total - sums.total_err
        mean = sums.acc[:, 0] / sums.total
        bound = (sums.acc_err[:, 0] + mean.abs() * sums.total_err) / low / float(scale[0])
        o_bound = float(bound[torch.from_numpy(pick)].max())
        unproven = int(unproven_rows(sums, scale, tol, normalize=True, lse=False).sum())
        print(f"h = {h:g}: grid {plan['grid'][0]} nodes (cell {plan['cell']:.3g} h, FFT "
              f"{plan['fft'][0]}, truncation {plan['truncation_radius']:.3g} h)")
        print(f"  sums    {wall:7.3f} s wall {cpu:7.3f} s cpu   total: worst error "
              f"{t_err:.2e} of the total, bound {t_bound:.2e}")
        print(f"  smooth  {s_wall:7.3f} s wall {s_cpu:7.3f} s cpu   output: worst error "
              f"{o_err:.2e} of max|y|, bound {o_bound:.2e} (tolerance {tol:g}); "
              f"{unproven} of {n} queries left to the exact engines")
        if not have_kdepy:
            continue
        for label in args.kdepy_grids.split(","):
            nodes = int(plan["grid"][0] + 14 / plan["cell"]) if label == "ours" else int(label)
            (k_total, k_acc), k_wall, k_cpu = best_of(
                lambda h=h, nodes=nodes: kdepy_sums(x, y, h, nodes), args.repeats)
            k_err = float(np.max(np.abs(k_acc[pick] / k_total[pick] - acc / total))) / ymax
            print(f"  KDEpy {nodes:>8} nodes {k_wall:7.3f} s wall {k_cpu:7.3f} s cpu   output: "
                  f"worst error {k_err:.2e}   ours/KDEpy: sums {wall / k_wall:.2f} wall "
                  f"{cpu / k_cpu:.2f} cpu, smooth {s_wall / k_wall:.2f} wall "
                  f"{s_cpu / k_cpu:.2f} cpu")


if __name__ == "__main__":
    main()
