"""The pruned engine: equal to the float64 dense engine while skipping key blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine._api import build_job
from nadaraya.engine.pruned import _engine as _pruned

from ._oracles import EPS32, FLOAT32_FACTOR, dense64, examples, kernel_cases, mask_cases, rel_err

SMALL_BLOCKS = {"key_block": 16, "query_block": 8}

RADIAL = [c for c in kernel_cases()
          if isinstance(K.get_kernel(c.kernel, c.bandwidth), K.RadialKernel)]
MASKS = mask_cases()


@pytest.fixture
def always(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine runs whatever share of blocks it expects to visit."""
    monkeypatch.setattr(_pruned, "MAX_VISITED_SHARE", 1.0)
    monkeypatch.setattr(_pruned, "MAX_SHARE_BESIDE_COMPILED", 1.0)


class VisitSpy:
    """Counts the key blocks the engine scores."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.blocks = 0
        score = _pruned.BoundKernel.score

        def spy(this, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.blocks += 1
            return score(this, *args, **kwargs)

        monkeypatch.setattr(_pruned.BoundKernel, "score", spy)


def _cloud(n: int, d: int, spread: float, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d)) * spread


def _problem(m: int = 70, n: int = 90, d: int = 3, p: int = 2,
             seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys spread over a few bandwidths in each feature; query ``i`` near key ``i``."""
    rng = np.random.default_rng(seed)
    keys = rng.random((n, d)) * 3.0
    queries = keys[np.arange(m) % n] + 0.05 * rng.standard_normal((m, d))
    return queries, keys, rng.standard_normal((n, p))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mask_case", MASKS, ids=[c.id for c in MASKS])
@pytest.mark.parametrize("kernel_case", RADIAL, ids=[c.id for c in RADIAL])
def test_equals_dense_for_every_radial_kernel_and_mask(always: None, kernel_case, mask_case,
                                                        dtype: str) -> None:
    q, k, v = (a.astype(dtype) for a in _problem())
    mask = mask_case.make(q.astype(np.float64), k.astype(np.float64))
    want = dense64(q, k, v, kernel_case.kernel, mask, bandwidth=kernel_case.bandwidth,
                   empty="nan")
    with nadaraya.config_context(**SMALL_BLOCKS):
        got = nadaraya.smooth(q, k, v, kernel_case.kernel, mask, bandwidth=kernel_case.bandwidth,
                              engine="pruned", empty="nan")
    if dtype == "float64":
        assert rel_err(got, want) <= 1e-13
    else:
        dense32 = nadaraya.smooth(q, k, v, kernel_case.kernel, mask,
                                  bandwidth=kernel_case.bandwidth, engine="dense", empty="nan")
        limit = FLOAT32_FACTOR * max(rel_err(dense32, want), EPS32)
        assert rel_err(got, want) <= limit


@pytest.mark.parametrize("d", [1, 2, 3])
def test_skips_most_blocks_at_a_small_bandwidth(monkeypatch: pytest.MonkeyPatch, d: int) -> None:
    x = _cloud(3000, d, 10.0)
    v = np.sin(x).sum(1)
    monkeypatch.setattr(_pruned, "MAX_SHARE_BESIDE_COMPILED", 0.5)
    spy = VisitSpy(monkeypatch)
    with nadaraya.config_context(**SMALL_BLOCKS):
        ex = nadaraya.explain(x, x, v, "gaussian", M.LeaveOneOut(), bandwidth=0.05)
        got = nadaraya.smooth(x, x, v, "gaussian", M.LeaveOneOut(), bandwidth=0.05)
    assert ex.engine == "pruned"
    blocks = math.ceil(3000 / 8) * math.ceil(3000 / 16)
    assert spy.blocks < 0.5 * blocks
    assert rel_err(got, dense64(x, x, v, "gaussian", M.LeaveOneOut(), bandwidth=0.05)) <= 1e-13


def test_visits_every_block_when_no_weight_is_negligible(always: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    x = _cloud(200, 1, 1.0)
    spy = VisitSpy(monkeypatch)
    with nadaraya.config_context(**SMALL_BLOCKS):
        nadaraya.smooth(x, x, x[:, 0], "gaussian", bandwidth=5.0, engine="pruned")
    assert spy.blocks == math.ceil(200 / 8) * math.ceil(200 / 16)


def test_leaves_a_moderate_share_to_the_compiled_engine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = _cloud(3000, 1, 1.0)
    with nadaraya.config_context(**SMALL_BLOCKS):
        job, _ = build_job(x, x, x[:, 0], "gaussian", None, 0.02)
        share = _pruned.PrunedEngine()._plan(job).share
        assert _pruned.MAX_SHARE_BESIDE_COMPILED < share < _pruned.MAX_VISITED_SHARE
        if _pruned.CompiledEngine().refuse(job) is None:
            ex = nadaraya.explain(x, x, x[:, 0], "gaussian", bandwidth=0.02)
            assert ex.engine == "compiled"
            assert "compiled engine" in ex.reasons["pruned"]
            # named by the caller, it still runs
            got = nadaraya.smooth(x, x, x[:, 0], "gaussian", bandwidth=0.02, engine="pruned")
            assert rel_err(got, dense64(x, x, x[:, 0], "gaussian", bandwidth=0.02)) <= 1e-13
        # without the compiled engine the share is worth pruning
        monkeypatch.setattr(_pruned.CompiledEngine, "refuse", lambda self, job: "off")
        ex = nadaraya.explain(x, x, x[:, 0], "gaussian", bandwidth=0.02)
        got = nadaraya.smooth(x, x, x[:, 0], "gaussian", bandwidth=0.02)
    assert ex.engine == "pruned"
    assert rel_err(got, dense64(x, x, x[:, 0], "gaussian", bandwidth=0.02)) <= 1e-13


def test_refuses_when_most_blocks_carry_weight() -> None:
    x = _cloud(3000, 1, 1.0)
    with nadaraya.config_context(**SMALL_BLOCKS):
        ex = nadaraya.explain(x, x, x[:, 0], "gaussian", bandwidth=2.0)
        with pytest.raises(nadaraya.NadarayaError, match="carry weight above rounding"):
            nadaraya.smooth(x, x, x[:, 0], "gaussian", bandwidth=2.0, engine="pruned")
    assert ex.engine != "pruned"
    assert "carry weight above rounding" in ex.reasons["pruned"]


@pytest.mark.parametrize(("kernel", "why"), [
    ("softmax", "not radial"),
    (K.Gaussian(0.1) * K.Laplacian(0.2), "not radial"),
])
def test_refuses_kernels_without_a_distance_bound(kernel, why: str) -> None:
    x = _cloud(3000, 2, 10.0)
    with pytest.raises(nadaraya.NadarayaError, match=why):
        nadaraya.explain(x, x, x[:, 0], kernel, engine="pruned")


def test_kernel_on_some_columns_is_pruned_in_those_columns(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    x = _cloud(3000, 2, 10.0)
    kernel = K.Laplacian(0.02).on([1])
    spy = VisitSpy(monkeypatch)
    with nadaraya.config_context(**SMALL_BLOCKS):
        got = nadaraya.smooth(x, x, x[:, 0], kernel, engine="pruned")
    assert spy.blocks < 0.5 * math.ceil(3000 / 8) * math.ceil(3000 / 16)
    assert rel_err(got, dense64(x, x, x[:, 0], kernel)) <= 1e-13


def test_refuses_one_key_block_and_gradients() -> None:
    import torch

    x = _cloud(100, 1, 10.0)
    with pytest.raises(nadaraya.NadarayaError, match="one block"):
        nadaraya.explain(x, x, x[:, 0], "gaussian", bandwidth=0.01, engine="pruned")
    t = torch.tensor(_cloud(3000, 1, 10.0), requires_grad=True)
    with pytest.raises(nadaraya.NadarayaError, match="require grad"):
        nadaraya.explain(t, t, t[:, 0], "gaussian", bandwidth=0.01, engine="pruned")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_far_queries_are_redone_exactly(always: None, monkeypatch: pytest.MonkeyPatch,
                                        dtype: type) -> None:
    """Queries so far from every key that their weights underflow the bounded pass."""
    redone: list[int] = []
    exact = _pruned.StreamedEngine._exact

    def spy(this, job, scorer, rows, *args):  # type: ignore[no-untyped-def]
        redone.extend(rows.tolist())
        return exact(this, job, scorer, rows, *args)

    monkeypatch.setattr(_pruned.StreamedEngine, "_exact", spy)
    keys = _cloud(200, 1, 1.0).astype(dtype)
    values = np.cos(keys[:, 0] * 7).astype(dtype)
    queries = np.concatenate([keys[:50], [[60.0], [-45.0]]]).astype(dtype)
    with nadaraya.config_context(**SMALL_BLOCKS):
        got = nadaraya.smooth(queries, keys, values, "gaussian", bandwidth=0.3, engine="pruned")
    want = dense64(queries, keys, values, "gaussian", bandwidth=0.3)
    assert rel_err(got, want) <= (1e-13 if dtype == np.float64 else 64 * EPS32)
    assert sorted(redone) == [50, 51]


def test_compact_kernel_leaves_unreachable_queries_empty(always: None) -> None:
    keys = _cloud(300, 2, 5.0)
    queries = np.concatenate([keys[:40], [[30.0, 30.0]]])
    v = keys.sum(1)
    with nadaraya.config_context(**SMALL_BLOCKS):
        got = nadaraya.smooth(queries, keys, v, "epanechnikov", bandwidth=0.4, engine="pruned",
                              empty="nan")
        with pytest.raises(nadaraya.NadarayaError):
            nadaraya.smooth(queries, keys, v, "epanechnikov", bandwidth=0.4, engine="pruned")
    want = dense64(queries, keys, v, "epanechnikov", bandwidth=0.4, empty="nan")
    assert np.isnan(got[-1])
    assert rel_err(got, want) <= 1e-13


def test_log_sum_exp_equals_dense(always: None) -> None:
    q, k, v = _problem(d=2)
    with nadaraya.config_context(**SMALL_BLOCKS):
        got, lse = nadaraya.smooth(q, k, v, "laplacian", M.LeaveOneOut(), bandwidth=0.2,
                                   engine="pruned", return_lse=True)
    want, want_lse = nadaraya.smooth(q, k, v, "laplacian", M.LeaveOneOut(), bandwidth=0.2,
                                     engine="dense", return_lse=True)
    assert rel_err(got, want) <= 1e-13
    np.testing.assert_allclose(lse, want_lse, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_spatial_order_is_a_permutation_of_compact_runs(d: int) -> None:
    x = _cloud(1000, d, 1.0, seed=d)
    order = _pruned.spatial_order(x, 64)
    np.testing.assert_array_equal(np.sort(order), np.arange(1000))
    if d == 1:
        assert np.all(np.diff(x[order, 0]) >= 0)

    def box_extent(points: np.ndarray) -> float:
        runs = [points[i:i + 64] for i in range(0, len(points), 64)]
        return float(np.mean([np.prod(r.max(0) - r.min(0)) for r in runs]))

    # runs of the order are much tighter than runs of the input order
    assert box_extent(x[order]) < 0.25 * box_extent(x)


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 120),
    m=st.integers(1, 60),
    d=st.integers(1, 3),
    h=st.floats(0.01, 3.0),
    kernel=st.sampled_from(["gaussian", "laplacian", "cauchy", "tricube"]),
    loo=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_equals_dense(always: None, n: int, m: int, d: int, h: float, kernel: str,
                               loo: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.random((n, d)) * 4.0
    queries = keys[:m] if loo and m <= n else rng.random((m, d)) * 4.0
    mask = M.LeaveOneOut() if loo else None
    values = rng.standard_normal((n, 2))
    with nadaraya.config_context(key_block=8, query_block=4):
        job = build_job(queries, keys, values, kernel, None, bandwidth=h)[0]
        if _pruned.PrunedEngine().refuse(job) is not None:
            return  # one key block: nothing to compare
        got = nadaraya.smooth(queries, keys, values, kernel, mask, bandwidth=h,
                              engine="pruned", empty="nan")
    want = dense64(queries, keys, values, kernel, mask, bandwidth=h, empty="nan")
    assert rel_err(got, want) <= 1e-13
