"""The fast Gauss transform (``engine/fgt``): time at scale, and its error beside its bound.

Tasks (the speed issue's targets, x ~ U(0, 6)^d, y = 2 sin x_1 + N(0, 1), m = n):

* ``1d``: h in {0.003, 0.03, 0.3}, n = 1e6, tolerance 1e-10 (target 1 s each;
  10 s at n = 1e7);
* ``2d``: h in {0.3, 0.1, 0.03}, n = 1e6, tolerance 1e-8 (target 3 s);
* ``3d``: h in {0.5, 0.3}, n = 1e6, tolerance 1e-8 (target 10 s).

Targets scale with ``n`` (``--n 1e7`` compares with 10 times the time).

Each line times what a certified call does with the method: bind the job
(prepared points), ``refuse``, ``cost`` and ``sums``; the best wall time of
``--repeats`` runs is printed with its CPU seconds (all threads; steadier on a
shared machine) and as a fraction of the target. Then, on ``--samples``
queries drawn at random, the exact float64 sums (every key summed directly
with torch; keys farther than 39 bandwidths, whose weights are 0 in float64,
skipped in 1-D) are the oracle: printed are the worst error of each sum
relative to the query's total, the worst stated bound likewise, the worst
ratio error / bound (must be <= 1), the worst output (weighted mean) error and
output bound relative to max |y|, and the share of all queries whose output
bound exceeds the tolerance (the dispatcher recomputes those exactly).

    python benchmarks/bench_fgt.py                    # every task
    python benchmarks/bench_fgt.py --tasks 1d --n 1e5 --repeats 1
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from typing import Any

import numpy as np
import torch

from nadaraya.engine._api import build_job
from nadaraya.engine.fgt import FastGaussTransform

TASKS: dict[str, tuple[int, tuple[float, ...], float, float]] = {
    # dimension, bandwidths, tolerance, target seconds
    "1d": (1, (0.003, 0.03, 0.3), 1e-10, 1.0),
    "2d": (2, (0.3, 0.1, 0.03), 1e-8, 3.0),
    "3d": (3, (0.5, 0.3), 1e-8, 10.0),
}


def data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 6, (n, d))
    y = 2 * np.sin(x[:, 0]) + rng.normal(0, 1, n)
    return x, y


def run_once(x: np.ndarray, y: np.ndarray, h: float, tolerance: float) -> tuple[Any, Any, dict]:
    method = FastGaussTransform()
    xt = torch.from_numpy(x)
    job, _ = build_job(xt, xt, torch.from_numpy(y), "gaussian", None, h)
    why = method.refuse(job, tolerance)
    if why is not None:
        raise SystemExit(f"the transform refuses h={h}: {why}")
    method.cost(job, tolerance)
    outcome = method.run(job, tolerance)
    return job, outcome, method.plan(job, tolerance)


def exact_sums(job: Any, rows: np.ndarray, one_d: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exact float64 ``total`` and ``acc`` of the queries ``rows``, by direct sums."""
    q = job.kernel.q.double()[torch.from_numpy(rows)]
    k, v = job.kernel.k.double(), job.values.double()[:, 0]
    order = torch.argsort(k[:, 0]) if one_d else None
    ks = k[order] if one_d else k
    vs = v[order] if one_d else v
    total, acc = np.empty(len(rows)), np.empty(len(rows))
    for i in range(len(rows)):
        lo, hi = 0, ks.shape[0]
        if one_d:  # weights of keys beyond 39 bandwidths are 0 in float64
            lo = int(torch.searchsorted(ks[:, 0].contiguous(), q[i, 0] - 39.0))
            hi = int(torch.searchsorted(ks[:, 0].contiguous(), q[i, 0] + 39.0))
        r2 = ((ks[lo:hi] - q[i]) ** 2).sum(1)
        w = torch.exp(-0.5 * r2)
        total[i], acc[i] = float(w.sum()), float(w @ vs[lo:hi])
    return total, acc


def report(task: str, n: int, h: float, args: argparse.Namespace) -> None:
    d, _, tolerance, target = TASKS[task]
    target *= n / 1e6  # the targets are for n = 1e6 (the 1e7 target is 10 s)
    x, y = data(n, d, args.seed)
    best, cpu_best = math.inf, math.inf
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        job, outcome, plan = run_once(x, y, h, tolerance)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best:
            best, cpu_best = wall, cpu
    s = outcome.sums
    total, acc = s.total.numpy(), s.acc[:, 0].numpy()
    terr, aerr = s.total_err.numpy(), s.acc_err[:, 0].numpy()
    scale = float(job.values.abs().max())
    out = acc / total
    out_bound = (aerr + np.abs(out) * terr) / (total - terr)
    unproven = float(np.mean(~(out_bound <= tolerance * scale)))
    rows = np.random.default_rng(args.seed + 1).choice(n, min(args.samples, n), replace=False)
    et, ea = exact_sums(job, rows, d == 1)
    err_t, err_a = np.abs(total[rows] - et), np.abs(acc[rows] - ea)
    ratio = max(float((err_t / terr[rows]).max()), float((err_a / aerr[rows]).max()))
    out_err = np.abs(out[rows] - ea / et) / scale
    print(f"{task} h={h:<6g} n={n:.0e} tol={tolerance:g}: {best:6.2f} s (cpu {cpu_best:6.2f} s) "
          f"= {best / target:.2f} of the {target:g} s target | {plan['expansion'].split()[0]} "
          f"p={plan['order']} side={plan['box_side']} K={plan['reach_boxes']} "
          f"expanded {outcome.expanded_targets}/{outcome.target_boxes} boxes")
    print(f"    {len(rows)} samples: sums' error/total max {float((err_t / et).max()):.2e} "
          f"(bound/total max {float((terr[rows] / et).max()):.2e}), error/bound max "
          f"{ratio:.2e}; output error {float(out_err.max()):.2e} (bound "
          f"{float(out_bound[rows].max()) / scale:.2e}) of max|y|; unproven queries "
          f"{unproven:.2%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated: 1d,2d,3d")
    parser.add_argument("--n", type=float, default=1e6, help="keys = queries (default 1e6)")
    parser.add_argument("--bandwidths", default="", help="override, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for task in args.tasks.split(","):
        hs = ([float(h) for h in args.bandwidths.split(",")] if args.bandwidths
              else TASKS[task][1])
        for h in hs:
            report(task, int(args.n), h, args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
