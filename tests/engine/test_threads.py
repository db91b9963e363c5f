"""Engines running their own threads: same results, torch's thread count restored."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._threads import map_blocks, on_worker
from nadaraya.masks import Causal, LeaveOneOut


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("kernel, mask", [("gaussian", None), ("epanechnikov", Causal()),
                                          ("softmax", LeaveOneOut())])
def test_streamed_in_threads_equals_dense(two_threads, kernel: str, mask) -> None:
    rng = np.random.default_rng(3)
    x, v = rng.normal(size=(700, 2)), rng.normal(size=(700, 3))
    bw = None if kernel == "softmax" else 0.8
    with nadaraya.config_context(query_block=37, key_block=101):
        got = nadaraya.smooth(x, x, v, kernel, mask, bandwidth=bw, engine="streamed",
                              empty="nan")
    ref = nadaraya.smooth(x, x, v, kernel, mask, bandwidth=bw, engine="dense", empty="nan")
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    assert torch.get_num_threads() == 2


def test_map_blocks_keeps_order_and_restores_threads(two_threads) -> None:
    seen = set()

    def work(i: int) -> int:
        seen.add(threading.get_ident())
        assert torch.get_num_threads() == 1
        return i * i

    assert map_blocks(work, range(50), device=torch.device("cpu")) == [i * i for i in range(50)]
    assert torch.get_num_threads() == 2


def test_on_worker_runs_single_threaded_in_the_callers_context(two_threads) -> None:
    with nadaraya.config_context(working_memory=5.0):
        seen = on_worker(lambda: (torch.get_num_threads(), threading.get_ident(),
                                  nadaraya.get_config().working_memory),
                         device=torch.device("cpu"))
    assert seen[0] == 1 and seen[1] != threading.get_ident() and seen[2] == 5.0
    assert torch.get_num_threads() == 2


def test_map_blocks_nested_in_a_worker_runs_in_turn(two_threads) -> None:
    def outer(i: int) -> list[int]:
        return map_blocks(lambda j: i * 10 + j, range(3), device=torch.device("cpu"))

    assert map_blocks(outer, range(4), device=torch.device("cpu")) == [
        [i * 10 + j for j in range(3)] for i in range(4)]


def test_map_blocks_passes_on_the_first_error(two_threads) -> None:
    def work(i: int) -> int:
        if i == 5:
            raise KeyError(i)
        return i

    with pytest.raises(KeyError):
        map_blocks(work, range(40), device=torch.device("cpu"))
    assert map_blocks(work, range(5), device=torch.device("cpu")) == list(range(5))


def _count_in_new_thread() -> int:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.parametrize("engine", ["streamed", "pruned", "fused", "neighbors"])
def test_concurrent_calls_leave_every_thread_count_as_it_was(two_threads, engine: str) -> None:
    # Another thread smooths without pause while this one makes a few calls: this
    # thread's count, the other's, and the count a new thread starts from stay 2.
    rng = np.random.default_rng(0)
    n = 20_000 if engine == "pruned" else 3000  # the pruned engine needs n >> 6 / h
    x, v = rng.uniform(0, 6, n), rng.normal(size=n)
    kernel = {"neighbors": "epanechnikov", "fused": "softmax"}.get(engine, "gaussian")
    h = {"pruned": 0.02, "fused": None}.get(engine, 0.1)
    stop = threading.Event()
    counts: list[int] = []

    def busy() -> None:
        while not stop.is_set():
            nadaraya.smooth(x, x, v, kernel, bandwidth=h, engine=engine)
        counts.append(torch.get_num_threads())

    for _ in range(5):
        other = threading.Thread(target=busy)
        other.start()
        try:
            for _ in range(3):
                nadaraya.smooth(x, x, v, kernel, bandwidth=h, engine=engine)
        finally:
            stop.set()
            other.join()
        stop.clear()
        assert torch.get_num_threads() == 2
    assert counts == [2] * 5
    assert _count_in_new_thread() == 2


def test_map_blocks_runs_in_the_callers_configuration(two_threads) -> None:
    def budget(_: int) -> float:
        return nadaraya.get_config().working_memory

    results: dict[float, list[float]] = {}

    def call(memory: float) -> None:
        with nadaraya.config_context(working_memory=memory):
            results[memory] = map_blocks(budget, range(16), device=torch.device("cpu"))

    threads = [threading.Thread(target=call, args=(m,)) for m in (7.0, 9.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {7.0: [7.0] * 16, 9.0: [9.0] * 16}
    fresh: list[float] = []
    thread = threading.Thread(target=lambda: fresh.append(nadaraya.get_config().working_memory))
    thread.start()
    thread.join()
    assert nadaraya.get_config().working_memory == fresh[0] not in (7.0, 9.0)
