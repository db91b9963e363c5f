"""Image filters on dask arrays against the in-memory filters, on the same image.

A ``size`` x ``size`` gray float32 image (bright and dark squares of 32
pixels, plus Gaussian noise of s.d. 0.1) is filtered in memory and as a dask
array in ``chunk`` x ``chunk`` chunks through ``map_overlap``
(:mod:`nadaraya.image._dask`), with 1 and 2 workers: the dask threaded
scheduler with that many threads, or with ``--distributed`` a
``distributed.LocalCluster`` of that many single-threaded worker processes.
The in-memory run gets as many torch threads as the dask run has workers, and
every dask task computes with one torch thread, so that the ratio compares
the same number of cores. The table gives the ratio of the times (dask / in
memory: above 1, dask is slower; the halo and the scheduler are the cost) and
whether the results are equal bit for bit.

Filters: ``nlm`` (patch 7, search radius 7, sigma 0.1), ``bilateral``
(sigma_color 0.25, sigma_spatial 2.5), ``kr`` (order 2, h 1.5), ``skr`` (the
defaults, sigma 0.1).

Run::

    python benchmarks/bench_image_dask.py                      # 1024 x 1024, chunks of 256
    python benchmarks/bench_image_dask.py --size 512 --chunk 128 --filters nlm,bilateral
    python benchmarks/bench_image_dask.py --distributed
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from nadaraya.image import bilateral, kernel_regression, non_local_means, steering_kernel_regression

FILTERS: dict[str, Callable[[Any], Any]] = {
    "nlm": lambda x: non_local_means(x, 0.1, 7, 7, sigma=0.1),
    "bilateral": lambda x: bilateral(x, 0.25, 2.5),
    "kr": lambda x: kernel_regression(x, 1.5, 2),
    "skr": lambda x: steering_kernel_regression(x, sigma=0.1),
}


def image(size: int) -> np.ndarray:
    rows, cols = np.indices((size, size))
    clean = 0.3 + 0.4 * ((rows // 32 + cols // 32) % 2)
    noise = 0.1 * np.random.default_rng(0).standard_normal((size, size))
    return (clean + noise).astype(np.float32)


def best(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least time of ``repeat`` runs, and the last result."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


def _one_thread() -> None:
    torch.set_num_threads(1)


@contextlib.contextmanager
def scheduler(workers: int, distributed: bool) -> Iterator[dict[str, Any]]:
    """Keyword arguments of ``compute`` for ``workers`` workers."""
    if not distributed:
        yield {"scheduler": "threads", "num_workers": workers}
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(_one_thread)
        yield {"scheduler": client.get}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--filters", default=",".join(FILTERS))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--distributed", action="store_true",
                        help="a LocalCluster of worker processes instead of threads")
    args = parser.parse_args()

    import dask.array as da

    img = image(args.size)
    lazy_img = da.from_array(img, chunks=args.chunk)
    kind = "LocalCluster processes" if args.distributed else "threads"
    print(f"{args.size} x {args.size} float32, chunks {args.chunk} x {args.chunk}, "
          f"dask workers as {kind}; ratio = dask time / in-memory time, same cores")
    print(f"{'filter':<10} {'workers':>7} {'in memory s':>12} {'dask s':>8} {'ratio':>6} "
          f"{'equal':>6}")
    for name in args.filters.split(","):
        run = FILTERS[name]
        for workers in (1, 2):
            torch.set_num_threads(workers)
            t_mem, whole = best(lambda run=run: run(img), args.repeat)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # each dask task: one torch thread
            with scheduler(workers, args.distributed) as how:
                t_dask, got = best(lambda run=run, how=how: run(lazy_img).compute(**how),
                                   args.repeat)
            torch.set_num_threads(threads)
            equal = bool(np.array_equal(got, whole))
            print(f"{name:<10} {workers:>7} {t_mem:>12.2f} {t_dask:>8.2f} "
                  f"{t_dask / t_mem:>6.2f} {equal!s:>6}")


if __name__ == "__main__":
    main()
