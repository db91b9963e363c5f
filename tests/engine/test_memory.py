"""Temporary memory within ``config_context(working_memory=...)``, masks included.

The peak resident set of a fresh process is measured around one call, with
glibc told to return every large block at once (``MALLOC_MMAP_THRESHOLD_``),
so that the peak is the memory the call held, not the allocator's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import masks as M
from nadaraya.masks import geometric

from ._oracles import dense64, rel_err, runnable_engines

_PEAK = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import nadaraya
    from nadaraya.masks import KNearest

    n, k, engine, budget = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    rng = np.random.default_rng(0)
    x, y = rng.random((n, 2)), rng.standard_normal(n)
    with nadaraya.config_context(working_memory=budget):
        # warm-up: imports, a tree search, thread pools
        nadaraya.smooth(x[:300], x[:300], y[:300], "gaussian", KNearest(50), bandwidth=0.1,
                        engine=engine)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        nadaraya.smooth(x, x, y, "gaussian", KNearest(k), bandwidth=0.1, engine=engine)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mib": (peak - base) / 1024}))
""")


def _peak_mib(n: int, k: int, engine: str, budget: float) -> float:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(n), str(k), engine, str(budget)],
                          capture_output=True, text=True, env=env, timeout=600, check=True)
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["mib"])


@pytest.mark.slow
@pytest.mark.parametrize(("k", "engine"), [(6000, "auto"), (6000, "dense"), (3000, "auto"),
                                           (3000, "streamed"), (3000, "dense")])
def test_knearest_peak_memory_within_the_budget(k: int, engine: str) -> None:
    """n = m = 6000 under 64 MiB: the (m, k) neighbour table held 410-825 MiB."""
    budget = 64.0
    assert _peak_mib(6000, k, engine, budget) <= budget * 1.25


def test_knearest_of_every_key_hides_nothing_and_lists_nothing() -> None:
    rng = np.random.default_rng(0)
    q, k, v = rng.random((30, 2)), rng.random((20, 2)), rng.standard_normal((20, 2))
    bound = M.KNearest(20).bind(M.Problem(30, 20, torch.tensor(q), torch.tensor(k)))
    assert bound.candidates() is None
    assert bound.status(slice(0, 30), slice(0, 20)) is M.Visibility.FULL
    assert bool(bound.block(slice(3, 9), slice(2, 11)).all())
    ref = dense64(q, k, v, bandwidth=0.3)
    for engine in runnable_engines(q, k, v, "gaussian", M.KNearest(25), bandwidth=0.3):
        out = nadaraya.smooth(q, k, v, "gaussian", M.KNearest(25), bandwidth=0.3,
                              engine=engine)
        assert rel_err(out, ref) <= 1e-13, engine


@pytest.mark.parametrize(("kernel", "k"), [("gaussian", 500), ("tricube", 300)])
def test_knearest_lists_come_in_blocks_within_the_budget(monkeypatch: pytest.MonkeyPatch,
                                                          kernel: str, k: int) -> None:
    """Every engine asks for neighbour lists of at most a budget's worth of queries.

    With a compact kernel the neighbors engine checks each (query, key) pair of
    its ball against the mask: there, too, lists come a block of queries at a time.
    """
    searched: list[int] = []
    search = geometric.KNearest._search

    def spy(self, bound, rows):  # type: ignore[no-untyped-def]
        searched.append(rows.shape[0])
        return search(self, bound, rows)

    monkeypatch.setattr(geometric.KNearest, "_search", spy)
    rng = np.random.default_rng(1)
    x = rng.random((1500, 2))
    y = rng.standard_normal(1500)
    budget = 2.0  # MiB
    ref = dense64(x, x, y, kernel, M.KNearest(k), bandwidth=0.2)
    with nadaraya.config_context(working_memory=budget):
        engines = runnable_engines(x, x, y, kernel, M.KNearest(k), bandwidth=0.2)
        for engine in engines:
            searched.clear()
            out = nadaraya.smooth(x, x, y, kernel, M.KNearest(k), bandwidth=0.2, engine=engine)
            assert rel_err(out, ref) <= 1e-12, engine
            assert searched, engine
            # an int64 list per query, and the search's own distances and heap
            assert max(searched) * k * 8 <= budget * 2**20, (engine, max(searched))
    assert "neighbors" in engines if kernel == "tricube" else {"streamed", "dense"} <= set(
        engines)


def test_nearest_policy_ranks_blocks_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """``empty="nearest"`` for every query: the rank blocks come in row chunks too."""
    from nadaraya.kernels import BoundKernel

    shapes: list[tuple[int, ...]] = []
    rank = BoundKernel.rank

    def spy(self, qi=slice(None), kj=slice(None)):  # type: ignore[no-untyped-def]
        out = rank(self, qi, kj)
        shapes.append(tuple(out.shape))
        return out

    monkeypatch.setattr(BoundKernel, "rank", spy)
    rng = np.random.default_rng(2)
    keys = rng.random((3000, 1))
    values = rng.standard_normal(3000)
    queries = 10.0 + rng.random((2000, 1))  # beyond the support of every key
    budget = 1.0  # MiB
    with nadaraya.config_context(working_memory=budget):
        out = nadaraya.smooth(queries, keys, values, "epanechnikov", bandwidth=0.1,
                              empty="nearest", engine="streamed")
    np.testing.assert_array_equal(out, np.full(2000, values[np.argmax(keys[:, 0])]))
    assert max(a * b for a, b in shapes) * 8 <= budget * 2**20
