"""explain() on Dask inputs describes the graph and each block's engine."""

from __future__ import annotations

import numpy as np

import nadaraya

from .conftest import as_dask


def test_explain_describes_chunks_tasks_depth_and_memory(rng) -> None:
    q, k, v = rng.normal(size=(50, 2)), rng.normal(size=(400, 2)), rng.normal(size=(400, 3))
    why = nadaraya.explain(as_dask(q, 20), as_dask(k, 10), as_dask(v, 10), bandwidth=0.5)
    assert why.engine == "dask"
    d = why.detail
    assert (d["m"], d["n"], d["p"]) == (50, 400, 3)
    assert d["query_chunks"] == "3 of 10..20" and d["key_chunks"] == "40 x 10"
    # 40 key chunks at fan-in 8: 5 then 1 merges per query chunk, depth 2
    assert d["stages"] == {"block": 120, "block-merge": 18, "finish": 3, "output": 6}
    assert d["tasks"] == 147 and d["reduction_depth"] == 2 and d["fan_in"] == 8
    assert d["bytes_per_block_task"] == (20 * 2 + 10 * 5 + 20 * 5) * 8
    block = nadaraya.explain(q[:20], k[:10], v[:10], bandwidth=0.5).engine
    assert d["block_engine"].startswith(block)
    assert why.reasons[block] == "per block: chosen: first engine in order of preference " \
                                 "that can run it"
    assert "query_chunks=3 of 10..20" in str(why)


def test_engine_dask_on_memory_inputs_is_explained_as_requested(rng) -> None:
    x = rng.normal(size=30)
    why = nadaraya.explain(x, x, x, bandwidth=0.5, engine="dask")
    assert why.engine == "dask"
    assert why.reasons["dask"] == "chosen: requested by the caller (engine='dask')"


def test_split_every_is_dask_configuration(rng) -> None:
    import dask

    k = rng.normal(size=64)
    with dask.config.set({"nadaraya.split_every": 2}):
        why = nadaraya.explain(k[:4], as_dask(k, 4), as_dask(k, 4), bandwidth=0.5)
    assert why.detail["fan_in"] == 2 and why.detail["reduction_depth"] == 4
    assert why.detail["stages"]["block-merge"] == 8 + 4 + 2 + 1
    with dask.config.set({"nadaraya.split_every": 1}):
        try:
            nadaraya.explain(k[:4], as_dask(k, 4), as_dask(k, 4))
        except nadaraya.NadarayaError as exc:
            assert "nadaraya.split_every" in str(exc)
        else:
            raise AssertionError("split_every=1 was accepted")
    assert np.isfinite(k).all()
