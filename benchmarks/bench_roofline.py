"""Roofline of the exact dense path: this machine's exp + FMA throughput, and our share of it.

The compiled engine's inner loop is, per query-key pair, a score, its
exponential and two accumulations (the total and the weighted value). Its
ceiling on this machine is the same exponential with the same two
accumulations and nothing else: the probe ``nadaraya_exp_fma`` in
``src/nadaraya/engine/compiled/dense.c`` (the engine's own polynomial and
vector width, four independent rows as in the engine's query tile, data in
L1), run on every thread at once. The engine is then timed on the 1-D task
(x ~ U(0, 6), y = 2 sin x + N(0, 1), h = 0.3, m = n) and its rate in pairs per
second is printed as a fraction of the probe's rate in exponentials per
second (target: at least 0.8).

The machine is shared, so every figure is the best of ``--repeat`` runs, and
the probe and the engine alternate. Rates are given per second of wall clock
and per second of CPU time of the process (all its threads): the second is
steadier when other work shares the cores.

Usage::

    python benchmarks/bench_roofline.py [--n 30000] [--threads 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np
import torch

import nadaraya
from nadaraya.engine.compiled import _library

# Elements per probe row: four rows and the values stay in L1 (20 KiB in float64).
COUNT = 512
ROWS = 4


def probe_rate(dtype: torch.dtype, threads: int,
               seconds: float = 0.5) -> tuple[float, float]:
    """Exponentials (each with its two accumulations) per second on ``threads`` threads.

    Returns the rate per second of wall clock and per second of CPU time.
    """
    g = torch.Generator().manual_seed(0)
    x = (-torch.rand(ROWS, COUNT, generator=g, dtype=torch.float64) * 30).to(dtype)
    v = torch.randn(COUNT, generator=g, dtype=torch.float64).to(dtype)
    # calibrate the repeats to about `seconds` on one thread
    repeats = 64
    while True:
        start = time.perf_counter()
        _library.exp_fma(x, v, repeats)
        took = time.perf_counter() - start
        if took > seconds / 8:
            break
        repeats *= 2
    repeats = max(1, int(repeats * seconds / took))
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        barrier.wait()
        _library.exp_fma(x, v, repeats)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for t in pool:
        t.join()
    count = threads * ROWS * COUNT * repeats
    return count / (time.perf_counter() - start), count / (time.process_time() - cpu)


def engine_rate(x: np.ndarray, y: np.ndarray, dtype: str) -> tuple[float, float]:
    """Query-key pairs per second of wall clock and of CPU time, compiled engine, 1-D task."""
    xs, ys = x.astype(dtype), y.astype(dtype)
    start, cpu = time.perf_counter(), time.process_time()
    nadaraya.smooth(xs, xs, ys, "gaussian", bandwidth=0.3, engine="compiled")
    pairs = len(x) ** 2
    return pairs / (time.perf_counter() - start), pairs / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=30000, help="m = n of the 1-D task")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if _library.load() is None:
        raise SystemExit(f"the compiled engine is unavailable: {_library.unavailable()}")
    torch.set_num_threads(args.threads)
    n = int(args.n)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 6, n)
    y = 2 * np.sin(x) + rng.standard_normal(n)
    print(f"instruction set: {_library.isa()}, threads: {args.threads}, 1-D task m = n = {n}, "
          f"best of {args.repeat}")
    print(f"{'dtype':<8} {'clock':<5} {'exp+FMA probe':>15} {'engine':>14} {'fraction':>9}")
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).replace("torch.", "")
        engine_rate(x[:2000], y[:2000], name)  # load and warm up
        probe, engine = [0.0, 0.0], [0.0, 0.0]
        for _ in range(args.repeat):
            probe = [max(a, b) for a, b in zip(probe, probe_rate(dtype, args.threads),
                                               strict=True)]
            engine = [max(a, b) for a, b in zip(engine, engine_rate(x, y, name), strict=True)]
        for i, clock in enumerate(("wall", "CPU")):
            print(f"{name:<8} {clock:<5} {probe[i] / 1e9:>11.3f} G/s {engine[i] / 1e9:>10.3f} G/s "
                  f"{engine[i] / probe[i]:>9.3f}")
    print("probe: exponentials per second; engine: query-key pairs per second "
          "(per second of wall clock, or of CPU time); target fraction >= 0.8")


if __name__ == "__main__":
    main()
