"""Float32 results of every engine within 2e-6 of the float64 dense engine.

The bound is relative to the largest absolute output, on the 1-D task of the
benchmarks (x ~ U(0, 6), y = 2 sin x + N(0, 1), Gaussian, h = 0.3). A float32
sum rounds each addition, so its error grows with the number of keys added
one after another: the tests that do not scan n = m = 2e4 use few queries and
many keys, where that growth shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import nadaraya

from ._oracles import dense64, runnable_engines

BOUND = 2e-6


def _task(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 6, n)
    y = 2 * np.sin(x) + rng.normal(size=n)
    return x.astype(np.float32), y.astype(np.float32)


def _error(out: Any, ref: np.ndarray) -> float:
    return float(np.abs(np.asarray(out, dtype=np.float64) - ref).max() / np.abs(ref).max())


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """Torch's thread count for the test: the engines split their blocks among them."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


# kernel, bandwidth, configuration: between them every engine runs
MANY_KEYS = {
    "gaussian": ("gaussian", 0.3, {}),  # streamed, dense
    "gaussian-wide": ("gaussian", 3.0, {}),  # fused
    "gaussian-blocks": ("gaussian", 0.2, {"query_block": 8}),  # pruned
    "epanechnikov": ("epanechnikov", 0.3, {}),  # neighbors
}


@pytest.mark.parametrize("case", list(MANY_KEYS))
def test_sums_over_many_keys_do_not_drift(case: str) -> None:
    kernel, h, config = MANY_KEYS[case]
    keys, values = _task(100_000)
    queries = np.linspace(0, 6, 64, dtype=np.float32)
    ref = dense64(queries, keys, values, kernel, bandwidth=h)
    with nadaraya.config_context(**config):
        engines = runnable_engines(queries, keys, values, kernel, bandwidth=h)
        for engine in engines:
            out = nadaraya.smooth(queries, keys, values, kernel, bandwidth=h, engine=engine)
            assert out.dtype == np.float32
            assert _error(out, ref) <= BOUND, (engine, _error(out, ref))
    wanted = {"gaussian": "streamed", "gaussian-wide": "fused", "gaussian-blocks": "pruned",
              "epanechnikov": "neighbors"}[case]
    assert wanted in engines and "dense" in engines


def test_dot_form_scores_are_exact_enough() -> None:
    """In eight features the streamed and fused engines score through the Gaussian's dot
    form where it is exact enough (points within a bandwidth or so of their centre)."""
    rng = np.random.default_rng(1)
    keys = (0.2 * rng.normal(size=(30_000, 8))).astype(np.float32)
    values = (np.sin(3 * keys[:, 0]) + rng.normal(size=30_000)).astype(np.float32)
    queries = keys[:64]
    ref = dense64(queries, keys, values, bandwidth=1.0)
    for engine in ("fused", "streamed", "dense"):
        out = nadaraya.smooth(queries, keys, values, bandwidth=1.0, engine=engine)
        assert _error(out, ref) <= BOUND, (engine, _error(out, ref))
    from nadaraya.engine._api import build_job
    from nadaraya.engine.streamed._engine import _Scorer

    job, _ = build_job(queries, keys, values, "gaussian", None, 1.0)
    assert _Scorer(job).dot is not None  # the case this test is about


@pytest.mark.slow
def test_one_dimensional_task_every_engine(threads: int) -> None:
    x, y = _task(20_000)
    ref = dense64(x, x, y, bandwidth=0.3)
    engines = runnable_engines(x, x, y, bandwidth=0.3)
    assert {"pruned", "streamed", "dense"} <= set(engines)
    for engine in engines:
        out = nadaraya.smooth(x, x, y, bandwidth=0.3, engine=engine)
        assert _error(out, ref) <= BOUND, (engine, _error(out, ref))
