"""The Dask engine on a cluster of worker processes: equal results, faults, data beyond memory.

Slow (a process cluster starts in seconds): run with CI=true.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya import masks as M

from .conftest import as_dask, da, distributed

pytestmark = pytest.mark.slow


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return rng.normal(size=(60, 2)), rng.normal(size=(500, 2)), rng.normal(size=(500, 2))


@pytest.mark.parametrize("which", [c for c in itertools.product([0, 1], repeat=3) if any(c)])
def test_cluster_equals_memory_for_every_combination(client, rng, which) -> None:
    q, k, v = _data(rng)
    args = [as_dask(a, c) if lazy else a
            for a, lazy, c in zip((q, k, v), which, (7, 64, 100), strict=True)]
    got = nadaraya.smooth(*args, bandwidth=0.5).compute()
    want = nadaraya.smooth(q, k, v, bandwidth=0.5, engine="dense")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_cluster_leave_one_out_and_tolerance(client, rng) -> None:
    x = rng.normal(size=2000)
    y = np.sin(x)
    X, Y = as_dask(x, 300), as_dask(y, 300)
    got = nadaraya.smooth(X, X, Y, mask=M.LeaveOneOut(), bandwidth=0.2).compute()
    want = nadaraya.smooth(x, x, y, mask=M.LeaveOneOut(), bandwidth=0.2, engine="dense")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    fast = nadaraya.smooth(X, X, Y, mask=M.LeaveOneOut(), bandwidth=0.2, tolerance=1e-6,
                           engine="fgt").compute()
    assert np.abs(fast - want).max() <= 1e-6 * np.abs(y).max()


def _slow_keys(k: np.ndarray, chunks: int, delay: float) -> Any:
    def load(block: np.ndarray) -> np.ndarray:
        time.sleep(delay)
        return block

    return as_dask(k, chunks).map_blocks(load, dtype=k.dtype, meta=np.empty((0, 0)))


def test_a_worker_killed_while_tasks_run_changes_nothing(client, rng) -> None:
    q, k, v = rng.normal(size=(40, 2)), rng.normal(size=(2400, 2)), rng.normal(size=(2400, 3))
    undisturbed = nadaraya.smooth(as_dask(q, 10), as_dask(k, 100), v, bandwidth=0.5).compute()
    out = nadaraya.smooth(as_dask(q, 10), _slow_keys(k, 100, 0.1), v, bandwidth=0.5)
    future = client.compute(out)
    deadline = time.monotonic() + 60
    while client.processing() and not any(client.processing().values()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # some tasks done, some running, some waiting
    assert not future.done()
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    disturbed = future.result(timeout=120)
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid)  # the worker really died (a new one replaced it)
    np.testing.assert_array_equal(disturbed, undisturbed)


class _PeakMemory:
    """Samples the resident memory of some processes until stopped; the peak of each."""

    def __init__(self, pids: dict[str, int]) -> None:
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for name, proc in self.procs.items():
                self.peak[name] = max(self.peak[name], proc.memory_info().rss)
            time.sleep(0.02)

    def __enter__(self) -> _PeakMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def write_keys(path: Path, rows: int, width: int, seed: int, *, row_group: int) -> None:
    """Keys (column ``k``) and ``width`` value columns written to Parquet a part at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    path.mkdir()
    for part, start in enumerate(range(0, rows, row_group * 4)):
        size = min(row_group * 4, rows - start)
        k = rng.uniform(0, 100, size)
        cols = {"k": k, **{f"v{c}": np.sin(k * (c + 1)) for c in range(width)}}
        pq.write_table(pa.table(cols), path / f"part-{part:04d}.parquet", row_group_size=row_group)


def test_keys_four_times_the_workers_memory_from_parquet(tmp_path: Path) -> None:
    import dask.dataframe as dd

    # a worker that has imported torch, pandas and pyarrow holds about 350 MiB before any data
    limit = 2**30
    rows, width = 2 * 4 * limit // (8 * 8), 7  # 8 GiB: four times the two workers' limits
    write_keys(tmp_path / "keys", rows, width, seed=0, row_group=500_000)
    q = np.linspace(0, 100, 16)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit=limit, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, nadaraya.config_context(working_memory=16):
        table = dd.read_parquet(tmp_path / "keys", split_row_groups=True).to_dask_array(
            lengths=True)
        keys, values = table[:, 0], table[:, 1:]
        assert keys.nbytes + values.nbytes >= 4 * 2 * limit
        pids = client.run(os.getpid)
        with _PeakMemory(pids) as memory:
            got, lse = nadaraya.smooth(q, keys, values, bandwidth=0.5, return_lse=True)
            got, lse = da.compute(got, lse)
        assert client.run(os.getpid) == pids  # no worker was restarted
        assert max(memory.peak.values()) < limit, memory.peak
    # the oracle: the same sums over the Parquet parts, in memory, one part at a time
    import pyarrow.parquet as pq

    acc = np.zeros((q.size, width))
    total = np.zeros(q.size)
    for part in sorted((tmp_path / "keys").iterdir()):
        table = pq.read_table(part)
        k = table["k"].to_numpy()
        v = np.stack([table[f"v{c}"].to_numpy() for c in range(width)], axis=1)
        out, part_lse = nadaraya.smooth(q, k, v, bandwidth=0.5, return_lse=True)
        w = np.exp(part_lse)
        acc += w[:, None] * out
        total += w
    want = acc / total[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse, np.log(total), rtol=1e-12)
