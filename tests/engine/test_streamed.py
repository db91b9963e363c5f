"""The streamed engine's two passes, its blocks and its block skipping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine._api import build_job
from nadaraya.engine._job import exp_floor
from nadaraya.engine.streamed import _engine as _streamed
from nadaraya.kernels import BoundKernel
from nadaraya.masks._base import BoundMask

from ._oracles import EPS32, FLOAT32_FACTOR, dense64, kernel_cases, rel_err

SMALL_BLOCKS = {"working_memory": 0.01, "key_block": 7, "query_block": 5}


class PassSpy:
    """Records which rows each pass of the streamed engine handled."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bounded: list[tuple[int, int]] = []
        self.exact: list[np.ndarray] = []
        engine = _streamed.StreamedEngine
        bounded, exact = engine._bounded, engine._exact

        def spy_bounded(this, job, scorer, rows, *args):  # type: ignore[no-untyped-def]
            self.bounded.append((rows.start, rows.stop))
            return bounded(this, job, scorer, rows, *args)

        def spy_exact(this, job, scorer, rows, *args):  # type: ignore[no-untyped-def]
            idx = np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows.numpy()
            self.exact.append(np.asarray(idx))
            return exact(this, job, scorer, rows, *args)

        monkeypatch.setattr(engine, "_bounded", spy_bounded)
        monkeypatch.setattr(engine, "_exact", spy_exact)

    @property
    def exact_rows(self) -> list[int]:
        return sorted(int(i) for rows in self.exact for i in rows)


def _line(n: int = 20, p: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.linspace(0.0, 1.0, n)[:, None], rng.standard_normal((n, p))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_far_queries_give_the_nearest_key_limit(monkeypatch: pytest.MonkeyPatch,
                                                dtype: type) -> None:
    keys, values = _line()
    queries = np.array([[50.0], [-40.0], [3.0]])
    spy = PassSpy(monkeypatch)
    out = nadaraya.smooth(queries.astype(dtype), keys.astype(dtype), values.astype(dtype),
                          "gaussian", bandwidth=0.05, engine="streamed")
    assert np.isfinite(out).all()
    # Every weight underflows relative to the bound 0: the exact pass redoes all rows.
    assert spy.exact_rows == [0, 1, 2]
    ref = dense64(queries.astype(dtype), keys.astype(dtype), values.astype(dtype), "gaussian",
                  bandwidth=0.05)
    # The limit: the value of the nearest key (the others weigh exp(-huge) relative to it).
    np.testing.assert_array_equal(ref, values.astype(dtype)[[-1, 0, -1]].astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=10 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mixed_near_and_far_queries_in_one_block(monkeypatch: pytest.MonkeyPatch,
                                                 dtype: type) -> None:
    keys, values = _line(30, 3)
    queries = np.array([[0.5], [60.0], [0.21], [-35.0], [0.97], [1.7], [7.0]])
    spy = PassSpy(monkeypatch)
    q, k, v = (a.astype(dtype) for a in (queries, keys, values))
    out = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.05, engine="streamed")
    assert spy.bounded == [(0, 7)]
    # 1.7 and 7.0 lie 14 and 120 bandwidths beyond the last key.
    far = [1, 3, 6] if dtype == np.float64 else [1, 3, 5, 6]
    assert spy.exact_rows == far
    ref = dense64(q, k, v, "gaussian", bandwidth=0.05)
    dense32 = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.05, engine="dense")
    bound = 1e-13 if dtype == np.float64 else FLOAT32_FACTOR * max(rel_err(dense32, ref), EPS32)
    assert rel_err(out, ref) <= bound


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bounded_pass_stays_exact_close_to_underflow(monkeypatch: pytest.MonkeyPatch,
                                                     dtype: type) -> None:
    # Largest weight a little above the row test's limit (exp(-600) in float64,
    # exp(-10) in float32): the bounded pass keeps the rows and must be as
    # exact as the dense engine.
    keys, values = _line(25, 2)
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    limit = exp_floor(tdt) + np.log(25) - np.log(np.finfo(dtype).eps) + 5.0
    score = -limit - 3.0
    queries = np.array([[1.0 + 0.05 * np.sqrt(2 * score)], [0.4]])
    spy = PassSpy(monkeypatch)
    q, k, v = (a.astype(dtype) for a in (queries, keys, values))
    out = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.05, engine="streamed")
    assert spy.exact_rows == []
    ref = dense64(q, k, v, "gaussian", bandwidth=0.05)
    dense = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.05, engine="dense")
    assert rel_err(out, ref) <= FLOAT32_FACTOR * max(rel_err(dense, ref), np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_bound_far_above_every_score(monkeypatch: pytest.MonkeyPatch,
                                             dtype: type) -> None:
    # Cauchy-Schwarz bound |q| max|k| from the long key pointing away: the
    # scores of the short keys sit ~1300 below it, the exact pass takes over.
    keys = np.array([[-10.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.2, -0.1]])
    values = np.arange(8.0).reshape(4, 2)
    queries = np.array([[200.0, 0.0], [0.3, 0.1]])
    spy = PassSpy(monkeypatch)
    q, k, v = (a.astype(dtype) for a in (queries, keys, values))
    out = nadaraya.smooth(q, k, v, "softmax", engine="streamed")
    assert 0 in spy.exact_rows and 1 not in spy.exact_rows
    ref = dense64(q, k, v, "softmax")
    np.testing.assert_allclose(ref[0], values[1])
    assert rel_err(out, ref) <= 8 * np.finfo(dtype).eps


def _running_max_kernel(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return -1e4 * torch.cdist(q, k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_callable_kernel_runs_the_exact_pass_only(monkeypatch: pytest.MonkeyPatch,
                                                  dtype: type) -> None:
    # Keys ascending, queries to the right: each key block raises the running
    # maximum, so the accumulator is rescaled at every block.
    keys, values = _line(40, 2)
    queries = np.array([[1.5], [2.0], [0.503], [-0.2], [0.25]])
    spy = PassSpy(monkeypatch)
    q, k, v = (a.astype(dtype) for a in (queries, keys, values))
    kernel = K.CallableKernel(_running_max_kernel)
    with nadaraya.config_context(**SMALL_BLOCKS):
        out = nadaraya.smooth(q, k, v, kernel, engine="streamed")
    assert spy.bounded == []
    assert spy.exact_rows == [0, 1, 2, 3, 4]
    ref = dense64(q, k, v, kernel)
    assert np.isfinite(out).all()
    dense = nadaraya.smooth(q, k, v, kernel, engine="dense")
    assert rel_err(out, ref) <= FLOAT32_FACTOR * max(rel_err(dense, ref), np.finfo(dtype).eps)


def test_small_working_memory_gives_small_partial_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = []
    blocks = _streamed.StreamedEngine._blocks

    def spy(this, job):  # type: ignore[no-untyped-def]
        shapes.append(blocks(this, job))
        return shapes[-1]

    monkeypatch.setattr(_streamed.StreamedEngine, "_blocks", spy)
    # one thread: each thread holds a block, so the budget is shared by the threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    rng = np.random.default_rng(3)
    q, k, v = rng.random((23, 2)), rng.random((31, 2)), rng.random((31, 3))
    with nadaraya.config_context(**SMALL_BLOCKS):
        nadaraya.smooth(q, k, v, bandwidth=0.2, engine="streamed")
        # The budget, not the preferred sizes, limits the blocks.
        with nadaraya.config_context(working_memory=2 * 8 * 3 / 2**20, key_block=50):
            nadaraya.smooth(q, k, v, bandwidth=0.2, engine="streamed")
    assert shapes == [(5, 7), (1, 2)]


_SMALL_MASKS = {
    "none": lambda: None,
    "causal": lambda: M.Causal(offset=3),
    "window": lambda: M.Window(4),
    "leave-one-out": lambda: M.LeaveOneOut(),
    "knearest": lambda: M.KNearest(6),
    "radius&causal": lambda: M.Radius(0.5) & M.Causal(),
}


@pytest.mark.parametrize("mask_id", list(_SMALL_MASKS))
def test_small_blocks_every_kernel(mask_id: str) -> None:
    rng = np.random.default_rng(11)
    keys = rng.random((31, 3))
    queries = keys[:23] + 0.05 * rng.standard_normal((23, 3))
    values = rng.standard_normal((31, 2))
    for case in kernel_cases():
        mask = _SMALL_MASKS[mask_id]()
        with nadaraya.config_context(**SMALL_BLOCKS):
            out = nadaraya.smooth(queries, keys, values, case.kernel, mask,
                                  bandwidth=case.bandwidth, engine="streamed", empty="nan")
        ref = dense64(queries, keys, values, case.kernel, mask, bandwidth=case.bandwidth,
                      empty="nan")
        assert rel_err(out, ref) <= 1e-12, case.id


def _block_status(pred, rows: range, cols: range) -> str:  # type: ignore[no-untyped-def]
    seen = [pred(i, j) for i in rows for j in cols]
    return "full" if all(seen) else "empty" if not any(seen) else "partial"


_INDEX_MASKS = {
    "causal": (M.Causal(), lambda i, j: j <= i),
    "causal+4": (M.Causal(offset=4), lambda i, j: j <= i + 4),
    "causal-6": (M.Causal(offset=-6), lambda i, j: j <= i - 6),
    "window0": (M.Window(0), lambda i, j: i == j),
    "window3": (M.Window(3), lambda i, j: abs(i - j) <= 3),
    "window9": (M.Window(9), lambda i, j: abs(i - j) <= 9),
}


@pytest.mark.parametrize("mask_id", list(_INDEX_MASKS))
def test_full_and_empty_blocks_are_skipped(monkeypatch: pytest.MonkeyPatch, mask_id: str) -> None:
    mask, pred = _INDEX_MASKS[mask_id]
    scored: list[tuple[int, int]] = []
    masked: list[tuple[int, int]] = []
    score, block = BoundKernel.score, BoundMask.block

    def spy_score(this, qi=slice(None), kj=slice(None), *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(qi, slice) and isinstance(kj, slice):
            scored.append((qi.start, kj.start))
        return score(this, qi, kj, *args, **kwargs)

    def spy_block(this, rows, cols, *args, **kwargs):  # type: ignore[no-untyped-def]
        masked.append((rows.start, cols.start))
        return block(this, rows, cols, *args, **kwargs)

    monkeypatch.setattr(BoundKernel, "score", spy_score)
    monkeypatch.setattr(BoundMask, "block", spy_block)
    rng = np.random.default_rng(5)
    m, n = 23, 31
    q, k, v = rng.random((m, 1)), rng.random((n, 1)), rng.standard_normal((n, 2))
    with nadaraya.config_context(**SMALL_BLOCKS):
        out = nadaraya.smooth(q, k, v, bandwidth=0.3, mask=mask, engine="streamed",
                              empty="nan")
    expect_scored, expect_masked = [], []
    for r0 in range(0, m, 5):
        for c0 in range(0, n, 7):
            status = _block_status(pred, range(r0, min(r0 + 5, m)), range(c0, min(c0 + 7, n)))
            if status != "empty":
                expect_scored.append((r0, c0))
            if status == "partial":
                expect_masked.append((r0, c0))
    assert sorted(scored) == sorted(expect_scored)
    assert sorted(masked) == sorted(expect_masked)
    visible = np.array([[pred(i, j) for j in range(n)] for i in range(m)])
    ref = dense64(q, k, v, bandwidth=0.3, mask=visible, empty="nan")
    assert rel_err(out, ref) <= 1e-12


@pytest.mark.parametrize("offset", range(-9, 10, 3))
@pytest.mark.parametrize("radius", [0, 2, 6])
def test_block_skipping_matches_dense(offset: int, radius: int) -> None:
    rng = np.random.default_rng(offset + 100)
    q, k, v = rng.random((19, 2)), rng.random((26, 2)), rng.standard_normal((26, 1))
    for mask in (M.Causal(offset), M.Window(radius), M.Causal(offset) | M.Window(radius),
                 M.Causal(offset) & M.Window(radius)):
        with nadaraya.config_context(working_memory=0.01, key_block=4, query_block=3):
            out = nadaraya.smooth(q, k, v, bandwidth=0.3, mask=mask, engine="streamed",
                                  empty="nan")
        ref = dense64(q, k, v, bandwidth=0.3, mask=mask, empty="nan")
        assert rel_err(out, ref) <= 1e-12, repr(mask)


def _scorer(queries: np.ndarray, keys: np.ndarray, kernel, bandwidth=None):  # type: ignore[no-untyped-def]
    job, _ = build_job(queries, keys, None, kernel, None, bandwidth)
    return _streamed._Scorer(job)


def test_dot_form_is_used_when_exact_enough_and_matches() -> None:
    rng = np.random.default_rng(2)
    keys = rng.standard_normal((40, 8))
    queries = rng.standard_normal((15, 8))
    values = rng.standard_normal((40, 2))
    assert _scorer(queries, keys, "gaussian", 8.0).dot is not None
    assert _scorer(queries, keys, "gaussian", 0.1).dot is None
    assert _scorer(queries[:, :3], keys[:, :3], "gaussian", 8.0).dot is None
    for h in (8.0, 0.5, 0.1):
        with nadaraya.config_context(key_block=9, query_block=4):
            out = nadaraya.smooth(queries, keys, values, bandwidth=h, engine="streamed")
        ref = dense64(queries, keys, values, bandwidth=h)
        assert rel_err(out, ref) <= 1e-11, h
