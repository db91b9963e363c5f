"""Engines running their own threads: same results, torch's thread count restored."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._threads import map_blocks, single_threaded_ops
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


def test_nested_single_threaded_ops_restore_once(two_threads) -> None:
    with single_threaded_ops() as outer:
        assert outer == 2 and torch.get_num_threads() == 1
        with single_threaded_ops() as inner:
            assert inner == 2 and torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
