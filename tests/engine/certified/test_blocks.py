"""The runner's query blocks: a prepared method evaluated block by block, the result in place.

A method that offers ``prepare`` is evaluated on consecutive slices of the
queries that cover every query once; the outputs (means, log-sums,
unnormalized sums, leave-one-out, empty rows and their policies) are those of
the same method run on all queries at once, whatever the block size, and the
state's means are finished in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine import certified
from nadaraya.engine._state import MeanState
from nadaraya.engine.certified import Sums
from nadaraya.masks import LeaveOneOut

from .test_tolerance import WorstCase


class PreparedWorstCase(WorstCase):
    """:class:`WorstCase` with ``prepare``: the same sums, served by slices of queries."""

    def __init__(self, slack: float) -> None:
        super().__init__(slack)
        self.slices: list[slice] = []

    def prepare(self, job: Any, tolerance: float) -> Any:
        whole = self.sums(job, tolerance)
        slices = self.slices

        class Ready:
            def evaluate(self, rows: slice) -> Sums:
                slices.append(rows)
                return Sums(*(t[rows].clone() for t in (whole.total, whole.acc,
                                                        whole.total_err, whole.acc_err)))

        return Ready()


def _run(method: Any, rows: int, call: Any) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(certified._choose, "get_methods", lambda: {"fgt": method})
        mp.setattr(certified._run, "block_rows", lambda job: rows)
        return call()


def _equal(a: Any, b: Any) -> None:
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,),
                    strict=True):
        np.testing.assert_array_equal(x, y)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), rows=st.integers(1, 90),
       options=st.sampled_from([{}, {"return_lse": True}, {"normalize": False},
                                {"normalize": False, "return_lse": True}]))
def test_blocks_give_the_one_block_result(seed: int, rows: int, options: dict) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 6, 200)
    y = np.c_[np.sin(x), np.zeros_like(x), -3 * x]
    q = np.r_[rng.uniform(-1, 7, 70), 300.0]  # the far query is redone exactly

    def call() -> Any:
        return nadaraya.smooth(q, x, y, bandwidth=0.3, tolerance=1e-7, **options)

    prepared = PreparedWorstCase(1e-9)
    got = _run(prepared, rows, call)
    want = _run(WorstCase(1e-9), 10**9, call)
    _equal(got, want)
    starts = [s.start for s in prepared.slices]
    assert sorted(starts) == list(range(0, q.shape[0], rows))
    assert all(s.stop == min(s.start + rows, q.shape[0]) for s in prepared.slices)


def test_leave_one_out_in_blocks() -> None:
    rng = np.random.default_rng(3)
    x = np.r_[rng.uniform(0, 6, 150), 40.0]
    y = np.sin(x)

    def call() -> Any:
        return nadaraya.smooth(x, x, y, "gaussian", LeaveOneOut(), bandwidth=0.3,
                               tolerance=1e-6, return_lse=True, empty="nan")

    _equal(_run(PreparedWorstCase(1e-9), 13, call), _run(WorstCase(1e-9), 10**9, call))


@pytest.mark.parametrize("empty", ["nan", "nearest", "raise"])
def test_empty_rows_after_the_redo(empty: str) -> None:
    """A query outside every key's support is redone, found empty and handled by ``empty``."""
    x = np.linspace(0, 1, 50)
    y = np.cos(x)
    q = np.array([0.5, 1e4, 0.2])

    def call() -> Any:
        return nadaraya.smooth(q, x, y, "epanechnikov", bandwidth=0.1, tolerance=1e-6,
                               empty=empty)

    if empty == "raise":
        with pytest.raises(NadarayaError, match="1 of 3 queries"):
            _run(PreparedWorstCase(1e-9), 2, call)
        return
    got = _run(PreparedWorstCase(1e-9), 2, call)
    _equal(got, _run(WorstCase(1e-9), 10**9, call))
    ref = nadaraya.smooth(q[1:2], x, y, "epanechnikov", bandwidth=0.1, empty=empty)
    np.testing.assert_array_equal(got[1:2], ref)


def test_state_holds_means_and_finish_writes_over_them(rng: np.random.Generator) -> None:
    from nadaraya.engine._api import build_job
    from nadaraya.engine._scale import scale_values
    from nadaraya.engine.unnormalized._engine import finish

    x = rng.uniform(0, 6, 120)
    job, _ = build_job(rng.uniform(0, 6, 40), x, 100 * np.sin(x), "gaussian", None, 0.3)
    scale_values(job)
    state, _ = certified.certified_state(job, PreparedWorstCase(1e-9), 1e-7)
    assert isinstance(state, MeanState) and not state.keeps_offset
    with pytest.raises(RuntimeError, match="log-sums"):
        _ = state.lse
    out = finish(job, state, "raise")
    assert out.data_ptr() == state.acc.data_ptr()
    ref = nadaraya.smooth(job.queries, job.keys, torch.from_numpy(100 * np.sin(x)),
                          bandwidth=0.3, engine="dense")
    torch.testing.assert_close(out[:, 0], ref, rtol=0, atol=1e-5)
