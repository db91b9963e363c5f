"""The Dask engine against the single-process engine, on this machine, as ratios.

Four measurements, one run (``python benchmarks/bench_dask.py``):

* ``throughput``: the same exact problem (2-D Gaussian, ``--m`` queries,
  ``--n`` keys in 8 chunks, 3 value columns) on the single-process engine
  with one thread, then on a ``distributed.LocalCluster`` of 1 and of 2
  worker processes with one thread each, with the queries in one chunk (how
  ``smooth`` chunks queries that fit its working memory) and in four.
  ``per core`` is the single-process time over (cluster time x workers):
  1.0 is no loss, 0.7 the issue's floor (a loss of 30% per core). The data
  are drawn by Dask tasks (as a cluster reads its chunks) and computed once
  into NumPy for the single process; the Dask timings include drawing the
  chunks and building the graph; the first call on each cluster (a warm-up
  at the same size) is not timed.
* ``overhead``: a graph of tiny blocks (8 queries, keys in chunks of 8) whose
  engine time is negligible: wall time over the number of tasks is the
  scheduler's cost per task, for the synchronous scheduler and for the
  2-worker cluster; and the time ``smooth`` takes to lay out the graph on
  the client, per task.
* ``plan``: the graph ``smooth`` lays out for a large exact problem (by
  default 1e10 keys and 1e6 queries in 3-D, 1e7 keys and 1e5 queries per
  chunk), built on the client but never computed: tasks per stage, the
  reduction's depth, the pickled graph's size and the bytes each task
  holds; with the rates measured above, the compute and scheduler time on
  ``--plan-cores`` cores (docs/scaling.md reads these figures).
* ``out-of-core``: keys (1-D) and 7 value columns written to Parquet,
  ``--ooc-gib`` GiB in all (4 by default: four times the 512 MiB limit of
  each of the 2 workers, times 2), read with ``dask.dataframe.read_parquet``
  and smoothed at ``tolerance=1e-6`` for 16 queries with workers limited to
  512 MiB; the wall time and the peak resident memory of each worker
  (sampled with psutil every 20 ms) against that limit.

The machine is shared: run it when it is otherwise idle, and read the
figures as ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np


def _problem(m: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 6, (m, 2)), rng.uniform(0, 6, (n, 2)), rng.normal(size=(n, 3))


def _best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def throughput(m: int, n: int, repeat: int) -> float:
    """Print the ratios; return the 2-worker cluster's kernel evaluations per second per core."""
    import dask.array as da
    import distributed
    import torch

    import nadaraya

    torch.set_num_threads(1)
    # the data are made by tasks (as a cluster would read them), not shipped in the graph
    rng = da.random.default_rng(0)
    Q = rng.uniform(0, 6, (m, 2), chunks=(m, 2))
    K = rng.uniform(0, 6, (n, 2), chunks=(n // 8, 2))
    V = rng.normal(size=(n, 3), chunks=(n // 8, 3))
    q, k, v = (np.asarray(a) for a in da.compute(Q, K, V, scheduler="sync"))
    nadaraya.smooth(q[:100], k[:1000], v[:1000], bandwidth=0.3)  # warm-up
    single = _best(lambda: nadaraya.smooth(q, k, v, bandwidth=0.3), repeat)
    engine = nadaraya.explain(q, k, v, bandwidth=0.3).engine
    print(f"throughput: m={m}, n={n}, 2-D Gaussian, exact, keys in 8 chunks; single process, "
          f"1 thread ({engine}): {single:.2f} s")
    rate = 0.0
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster):
            for parts in (1, 4):  # queries in one chunk (smooth's default here), or in four
                Qc = Q.rechunk((-(-m // parts), 2))
                nadaraya.smooth(Qc, K, V, bandwidth=0.3).compute()  # warm-up
                wall = _best(lambda Qc=Qc: nadaraya.smooth(Qc, K, V, bandwidth=0.3).compute(),
                             repeat)
                per_core = single / (wall * workers)
                print(f"  dask, {workers} worker(s) x 1 thread, queries in {parts} chunk(s): "
                      f"{wall:.2f} s; speed-up {single / wall:.2f}x; per core {per_core:.2f} of "
                      "the single process (target >= 0.70)")
                if workers == 2 and parts == 1:
                    rate = m * n / (wall * workers)
    print("  (each query chunk reads every key chunk again, and each block prepares its keys "
          "again: more query chunks cost more)")
    return rate


def overhead(tasks_keys: int) -> float:
    """Print the per-task costs; return the 2-worker cluster's seconds per task."""
    import dask.array as da
    import distributed

    import nadaraya

    q, k, v = _problem(8, tasks_keys * 8, seed=1)
    Q, K, V = (da.from_array(q, chunks=(8, 2)), da.from_array(k, chunks=(8, 2)),
               da.from_array(v, chunks=(8, 3)))
    tasks = nadaraya.explain(Q, K, V, bandwidth=0.3).detail["tasks"]
    build = _best(lambda: nadaraya.smooth(Q, K, V, bandwidth=0.3), 3)
    out = nadaraya.smooth(Q, K, V, bandwidth=0.3)
    inputs = len(dict(out.__dask_graph__())) - tasks
    total = tasks + inputs
    sync = _best(lambda: nadaraya.smooth(Q, K, V, bandwidth=0.3).compute(scheduler="sync"), 2)
    print(f"overhead: {total} tasks ({tasks} of the engine, {inputs} input and global ones), "
          "blocks of 8 queries x 8 keys")
    print(f"  graph construction on the client: {build:.3f} s, {1e6 * build / tasks:.0f} us "
          "per engine task")
    engine_tasks = {key: task for key, task in dict(out.__dask_graph__()).items()
                    if isinstance(key, tuple) and str(key[0]).startswith("nadaraya-smooth")}
    size = len(pickle.dumps(engine_tasks, protocol=pickle.HIGHEST_PROTOCOL))
    print(f"  graph size (pickled engine tasks): {size / 2**20:.2f} MiB, "
          f"{size / max(len(engine_tasks), 1):.0f} bytes per task")
    print(f"  synchronous scheduler: {sync:.2f} s, {1e3 * sync / total:.3f} ms per task")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        nadaraya.smooth(Q, K, V, bandwidth=0.3).compute()
        wall = _best(lambda: nadaraya.smooth(Q, K, V, bandwidth=0.3).compute(), 2)
    print(f"  distributed, 2 workers: {wall:.2f} s, {1e3 * wall / total:.3f} ms per task "
          f"({wall / sync:.1f}x the synchronous scheduler)")
    return wall / total


def _write(path: Path, rows: int, width: int, row_group: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    path.mkdir()
    for part, start in enumerate(range(0, rows, row_group * 4)):
        size = min(row_group * 4, rows - start)
        k = rng.uniform(0, 100, size)
        cols = {"k": k, **{f"v{c}": np.sin(k * (c + 1)) for c in range(width)}}
        pq.write_table(pa.table(cols), path / f"part-{part:04d}.parquet",
                       row_group_size=row_group)


def out_of_core(gib: float, limit_mib: int, workdir: Path) -> None:
    import dask
    import dask.dataframe as dd
    import distributed
    import psutil

    import nadaraya

    limit, width = limit_mib * 2**20, 7
    rows = int(gib * 2**30) // (8 * (width + 1))
    path = workdir / "keys"
    start = time.perf_counter()
    _write(path, rows, width, row_group=500_000)
    print(f"out-of-core: {rows:,} keys x ({width} values + 1) float64 = {gib:g} GiB of Parquet "
          f"(written in {time.perf_counter() - start:.0f} s); 2 workers limited to {limit_mib} "
          "MiB each")
    q = np.linspace(0, 100, 16)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit=limit, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, nadaraya.config_context(working_memory=16):
        pids = client.run(os.getpid)
        procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        idle = {name: p.memory_info().rss for name, p in procs.items()}
        peak = dict(idle)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for name, p in procs.items():
                    peak[name] = max(peak[name], p.memory_info().rss)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        table = dd.read_parquet(path, split_row_groups=True).to_dask_array(lengths=True)
        out = nadaraya.smooth(q, table[:, 0], table[:, 1:], bandwidth=0.5, tolerance=1e-6)
        why = nadaraya.explain(q, table[:, 0], table[:, 1:], bandwidth=0.5, tolerance=1e-6)
        dask.compute(out)
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
        restarted = client.run(os.getpid) != pids
    print(f"  {why.detail['key_chunks']} key chunks, {why.detail['tasks']} engine tasks; "
          f"wall {wall:.1f} s ({rows / wall / 1e6:.2f} M keys/s); worker restarted: {restarted}")
    for name in sorted(peak):
        print(f"  worker {name}: idle {idle[name] / 2**20:.0f} MiB, peak "
              f"{peak[name] / 2**20:.0f} MiB = {peak[name] / limit:.2f} of the limit")


def plan(keys: float, queries: float, key_chunk: float, query_chunk: float, d: int, p: int,
         cores: int, rate: float | None, per_task: float | None) -> None:
    """Lay out (never compute) the graph of a large exact problem and project its cost.

    The layout (tasks per stage, reduction depth, pickled graph size, bytes a
    task holds) is that of the real graph ``smooth`` builds; the projections
    multiply it by the rates measured above on this machine.
    """
    import dask.array as da

    import nadaraya

    n, m, kc, qc = int(keys), int(queries), int(key_chunk), int(query_chunk)
    K = da.zeros((n, d), chunks=(kc, d))
    V = da.zeros((n, p), chunks=(kc, p))
    Q = da.zeros((m, d), chunks=(qc, d))
    start = time.perf_counter()
    out = nadaraya.smooth(Q, K, V, bandwidth=0.5)
    build = time.perf_counter() - start
    tasks = {key: task for key, task in dict(out.__dask_graph__()).items()
             if isinstance(key, tuple) and str(key[0]).startswith("nadaraya-smooth")}
    stages: dict[str, int] = {}
    depth = 0
    for key in tasks:
        name = str(key[0]).split("-", 3)[-1]
        if "-merge-" in name:
            depth = max(depth, int(name.rsplit("-", 1)[1]))
            name = name.rsplit("-", 1)[0]
        stages[name] = stages.get(name, 0) + 1
    size = len(pickle.dumps(tasks, protocol=pickle.HIGHEST_PROTOCOL))
    block = (qc * d + kc * (d + p) + qc * (p + 2)) * 8
    print(f"plan: n = {n:.3g} keys, m = {m:.3g} queries, d = {d}, p = {p}, float64; key chunks "
          f"of {kc:.3g} ({n // kc} chunks), query chunks of {qc:.3g} ({m // qc} chunks)")
    print(f"  engine tasks: {len(tasks):,} ({', '.join(f'{k} {v:,}' for k, v in stages.items())})"
          f"; reduction depth {depth}")
    print(f"  laid out on the client in {build:.2f} s; graph {size / 2**20:.1f} MiB pickled "
          f"({size / len(tasks):.0f} bytes per task)")
    print(f"  a block task holds {block / 2**20:.0f} MiB of inputs and state (plus the engine's "
          f"working memory); a merge task {8 * qc * (p + 2) * 8 / 2**20:.1f} MiB")
    print(f"  keys read from storage {m // qc} times (once per query chunk): "
          f"{m // qc * n * (d + p) * 8 / 2**40:.1f} TiB in all")
    if rate is not None:
        compute = m * n / (rate * cores)
        print(f"  exact sums: {m * n:.3g} kernel evaluations at {rate:.3g} per second per core "
              f"(measured above) on {cores} cores: {compute:.0f} s")
    if per_task is not None:
        print(f"  scheduler: {len(tasks):,} tasks x {1e3 * per_task:.2f} ms (measured above) = "
              f"{len(tasks) * per_task:.0f} s if the scheduler ran them one at a time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=2000)
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--overhead-chunks", type=int, default=2000)
    parser.add_argument("--ooc-gib", type=float, default=8.0)
    parser.add_argument("--ooc-limit-mib", type=int, default=1024,
                        help="memory limit of each of the 2 workers (MiB)")
    parser.add_argument("--skip", default="", help="comma-separated: throughput,overhead,plan,ooc")
    parser.add_argument("--plan-keys", type=float, default=1e10)
    parser.add_argument("--plan-queries", type=float, default=1e6)
    parser.add_argument("--plan-key-chunk", type=float, default=1e7)
    parser.add_argument("--plan-query-chunk", type=float, default=1e5)
    parser.add_argument("--plan-cores", type=int, default=100 * 32,
                        help="cores of the planned cluster (default 100 nodes x 32)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    rate = per_task = None
    if "throughput" not in skip:
        rate = throughput(args.m, args.n, args.repeat)
    if "overhead" not in skip:
        per_task = overhead(args.overhead_chunks)
    if "plan" not in skip:
        plan(args.plan_keys, args.plan_queries, args.plan_key_chunk, args.plan_query_chunk,
             3, 1, args.plan_cores, rate, per_task)
    if "ooc" not in skip:
        workdir = Path(tempfile.mkdtemp(prefix="bench-dask-"))
        try:
            out_of_core(args.ooc_gib, args.ooc_limit_mib, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
