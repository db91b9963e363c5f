"""Float32 accuracy and time of every engine on the 1-D task, relative to float64.

Task: x ~ U(0, 6), y = 2 sin x + N(0, 1), Gaussian kernel, h = 0.3, queries =
keys, n = m = ``--n``. Each engine named in ``--engines`` smooths the float32
data; its error is the largest difference to the float64 result on the same
(float32-rounded) inputs, relative to the largest absolute value of that
result. The float64 reference is computed by ``--reference`` (default the
streamed engine; the tests use the dense one at smaller n). An engine that
refuses the problem says why.

Every float32 run is timed after a small warm-up call, in this process, with
``--threads`` torch threads: wall-clock seconds and the process's CPU seconds
(all threads; steadier than the wall clock on a shared machine)::

    python benchmarks/bench_accuracy.py --n 1e5
    python benchmarks/bench_accuracy.py --n 1e5 --threads 1 --engines pruned,streamed
    python benchmarks/bench_accuracy.py --n 1e5 --bandwidth 1.5 --engines fused,streamed
"""

from __future__ import annotations

import argparse
import time

import numpy as np

H = 0.3
ENGINES = "auto,pruned,fused,streamed,dense"


def make_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys ``(n,)`` and values ``(n,)`` in float64, already rounded to float32."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 6, n)
    y = 2 * np.sin(x) + rng.normal(size=n)
    return x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)


def run(x: np.ndarray, y: np.ndarray, engine: str,
        h: float = H) -> tuple[np.ndarray, float, float, str]:
    """Result, wall-clock and CPU seconds, and the engine that ran."""
    import nadaraya

    used = nadaraya.explain(x, x, y, "gaussian", bandwidth=h, engine=engine).engine
    t0, c0 = time.perf_counter(), time.process_time()
    out = nadaraya.smooth(x, x, y, "gaussian", bandwidth=h, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return np.asarray(out, dtype=np.float64), wall, cpu, used


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=1e5, help="m = n (default 1e5)")
    parser.add_argument("--engines", default=ENGINES, help=f"comma-separated (default {ENGINES})")
    parser.add_argument("--reference", default="streamed",
                        help="engine computing the float64 reference (default streamed)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--bandwidth", type=float, default=H,
                        help=f"h (default {H}; the fused engine runs float32 from about 1.5)")
    args = parser.parse_args(argv)

    import torch

    import nadaraya

    if args.threads:
        torch.set_num_threads(args.threads)
    n = int(args.n)
    x, y = make_data(n)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for engine in args.engines.split(","):  # warm-up: thread pools, first-call costs
        try:
            nadaraya.smooth(x32[:256], x32[:256], y32[:256], bandwidth=args.bandwidth,
                            engine=engine)
        except nadaraya.NadarayaError:
            pass
    ref, t_ref, _, _ = run(x, y, args.reference, args.bandwidth)
    scale = float(np.abs(ref).max())
    print(f"1-D task, n = m = {n}, h = {args.bandwidth}, torch threads = "
          f"{torch.get_num_threads()}; "
          f"float64 reference: {args.reference} ({t_ref:.2f} s)")
    print(f"{'engine':<10} {'ran':<10} {'float32 time':>13} {'CPU time':>10} "
          f"{'float32 error':>14}")
    for engine in args.engines.split(","):
        try:
            out, wall, cpu, used = run(x32, y32, engine, args.bandwidth)
        except nadaraya.NadarayaError as exc:
            print(f"{engine:<10} refused: {str(exc)[:110]}")
            continue
        error = float(np.abs(out - ref).max()) / scale
        print(f"{engine:<10} {used:<10} {wall:11.2f} s {cpu:8.2f} s {error:14.2e}")


if __name__ == "__main__":
    main()
