"""Random features (FAVOR+) against exact softmax attention: time and error, as ratios.

Task: one attention head, ``m = n`` queries and keys in ``d = 64`` dimensions
(``--sizes``, ``--dim``), ``p = 64`` value columns, ``K = exp(q.k / sqrt(d))``.
Queries and keys have N(0, sigma^2) entries (``--sigmas``), so the scores
``q.k / sqrt(d)`` have standard deviation ``sigma^2``; values are N(0, 1).

* ours: :func:`nadaraya.engine.features.random_feature_sums` with ``r``
  features (``--features``), float64, then ``acc / total``;
* peer: torch ``scaled_dot_product_attention`` (exact), float32 and float64.

Error of an output: ``|out - exact| / max|v|`` against SDPA in float64 (the
median and the largest over all outputs), beside the error the method
states for that output (``mean_err / max|v|``, one estimated standard
error; median; and the root mean square of the errors in these units) and
its proven bound on the relative spread of the sums
(``sd_bound``, median over queries). Times are the best of ``--repeat`` runs
after a warm-up, on this process's threads (``torch.get_num_threads()``):
wall-clock seconds and CPU seconds of all threads; the ratios use the CPU
seconds, steadier on a shared machine.

``--memory N`` measures instead the peak memory of ours at ``m = n = N``
(``r = 256``) under working-memory budgets of 16, 64 and 256 MiB, each in a
fresh process: the rise of the peak resident set during the call, beside
the size of what it returns (sums, errors and offsets, ``3 m p`` floats).

Usage::

    python benchmarks/bench_features.py
    python benchmarks/bench_features.py --sizes 8192,32768 --features 64,256,1024
    python benchmarks/bench_features.py --memory 131072
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine.features import random_feature_sums


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall-clock and best CPU seconds (all threads) over ``repeat`` runs."""
    fn()  # warm-up
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return wall, cpu, out


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None])[0, 0]


def _ours(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, features: int) -> dict[str, Any]:
    job, _ = build_job(q, k, v, "softmax", None, None)
    sums, info = random_feature_sums(job, features, seed=0)
    return {"out": sums.acc / sums.total[:, None], "stated": info["mean_err"], "info": info}


def run(n: int, d: int, p: int, sigma: float, features: list[int], repeat: int) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(n, d, generator=gen, dtype=torch.float64) * sigma
    k = torch.randn(n, d, generator=gen, dtype=torch.float64) * sigma
    v = torch.randn(n, p, generator=gen, dtype=torch.float64)
    t64, c64, exact = _best(lambda: _sdpa(q, k, v), repeat)
    t32, c32, out32 = _best(lambda: _sdpa(q.float(), k.float(), v.float()), repeat)
    scale = float(v.abs().max())
    err32 = (out32.double() - exact).abs() / scale
    print(f"\nm = n = {n}, d = {d}, p = {p}, sigma = {sigma} (score std {sigma ** 2:.2f}), "
          f"{torch.get_num_threads()} threads")
    print(f"  SDPA float64 (exact reference): {t64:8.3f} s wall, {c64:8.3f} s cpu")
    print(f"  SDPA float32:                   {t32:8.3f} s wall, {c32:8.3f} s cpu   error "
          f"median {float(err32.median()):.1e}, max {float(err32.max()):.1e}")
    print(f"  {'features':>8} {'wall s':>7} {'cpu s':>7} {'cpu/SDPA32':>10} {'cpu/SDPA64':>10} "
          f"{'err median':>10} {'err max':>8} {'stated med':>10} {'rms err/stated':>14} "
          f"{'sd_bound med':>12}")
    for r in features:
        t, c, res = _best(lambda r=r: _ours(q, k, v, r), repeat)
        err = (res["out"] - exact).abs() / scale
        z = float(((res["out"] - exact) / res["stated"]).square().mean().sqrt())
        print(f"  {r:>8} {t:>7.3f} {c:>7.3f} {c / c32:>10.3f} {c / c64:>10.3f} "
              f"{float(err.median()):>10.1e} {float(err.max()):>8.1e} "
              f"{float(res['stated'].median()) / scale:>10.1e} {z:>14.2f} "
              f"{res['info']['sd_bound_median']:>12.1e}")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_child(n: int, budget: float, d: int, p: int) -> None:
    """One measurement, in this (fresh) process: prints the peak rise in MiB."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(n, d, generator=gen, dtype=torch.float64) / 2
    k = torch.randn(n, d, generator=gen, dtype=torch.float64) / 2
    v = torch.randn(n, p, generator=gen, dtype=torch.float64)
    job, _ = build_job(q, k, v, "softmax", None, None)
    before = _peak_mib()
    with nadaraya.config_context(working_memory=budget):
        random_feature_sums(job, 256, seed=0)
    print(_peak_mib() - before)


def memory(n: int, d: int, p: int) -> None:
    returned = 3 * n * p * 8 / 2**20
    print(f"\npeak memory of random_feature_sums, m = n = {n}, d = {d}, p = {p}, r = 256 "
          f"(returned arrays {returned:.0f} MiB)")
    for budget in (16, 64, 256):
        out = subprocess.run([sys.executable, __file__, "--memory-child", str(n), str(budget),
                              str(d), str(p)], capture_output=True, text=True, check=True)
        rise = float(out.stdout.strip())
        print(f"  working_memory {budget:>4} MiB: peak rise {rise:6.0f} MiB, "
              f"{rise - returned:6.0f} MiB beyond the returned arrays "
              f"({(rise - returned) / budget:.2f} of the budget)")


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--memory-child":
        n, budget, d, p = sys.argv[2:]
        memory_child(int(n), float(budget), int(d), int(p))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="8192", help="m = n, comma-separated")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--values", type=int, default=64, help="value columns p")
    parser.add_argument("--sigmas", default="0.5,1.0", help="entry scale of q and k")
    parser.add_argument("--features", default="64,256,1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", type=int, default=0, help="peak memory at m = n = N")
    args = parser.parse_args()
    if args.memory:
        memory(args.memory, args.dim, args.values)
        return
    features = [int(r) for r in args.features.split(",")]
    for n in (int(float(s)) for s in args.sizes.split(",")):
        for sigma in (float(s) for s in args.sigmas.split(",")):
            run(n, args.dim, args.values, sigma, features, args.repeat)


if __name__ == "__main__":
    main()
