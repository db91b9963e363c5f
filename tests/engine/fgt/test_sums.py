"""The transform's sums against the exact float64 sums: every error within its bound.

Random problems (hypothesis) and named adversarial ones: one key, duplicates,
clusters with outliers, queries far from every key, values near 1, many value
columns, every dimension from 1 to 6, float32 jobs; the plans the method
chooses and plans forced on it (each expansion, orders low enough that the
truncation shows, direct sums only).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya.engine.fgt import FastGaussTransform
from nadaraya.engine.fgt._basis import Basis
from nadaraya.engine.fgt._plan import SIDES, Params
from nadaraya.engine.fgt._transform import transform

from ._exact import check, check_digits, job_of, relative_median, requires_native

pytestmark = requires_native

FGT = FastGaussTransform()


def _cloud(rng: np.random.Generator, kind: str, n: int, d: int, spread: float) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0, spread, (n, d))
    if kind == "clusters":
        centres = rng.uniform(0, spread, (3, d))
        return centres[rng.integers(0, 3, n)] + rng.normal(0, spread / 50, (n, d))
    if kind == "duplicates":
        base = rng.uniform(0, spread, (max(1, n // 10), d))
        return base[rng.integers(0, base.shape[0], n)]
    return rng.standard_cauchy((n, d)) * spread / 10  # heavy tails


def _auto(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, h: float,
          tolerance: float) -> float:
    job = job_of(queries, keys, values, h)
    assert FGT.refuse(job, tolerance) is None
    return check(FGT.sums(job, tolerance), job.kernel.q, job.kernel.k, job.values)


def _forced(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, h: float,
            plan: Params, expand: bool | None) -> float:
    job = job_of(queries, keys, values, h)
    q, k, v = (t.double().contiguous() for t in (job.kernel.q, job.kernel.k, job.values))
    return check(transform(q, k, v, plan, expand).sums, q, k, v)


def _plan(basis: str, side: float, order: int, reach: int, d: int, most: int) -> Params:
    factor = Basis(basis).factor(side, order, d, reach, most) if order else 0.0
    return Params(side, basis, order, reach, factor, 0.0)


@given(seed=st.integers(0, 2**31), d=st.integers(1, 4), n=st.integers(1, 400),
       m=st.integers(1, 60), nv=st.integers(0, 3),
       kind=st.sampled_from(["uniform", "clusters", "duplicates", "tails"]),
       h=st.sampled_from([0.01, 0.1, 0.5, 2.0, 50.0]),
       tolerance=st.sampled_from([1e-3, 1e-6, 1e-9, 1e-11]))
def test_auto_plans_bound_every_sum(seed: int, d: int, n: int, m: int, nv: int, kind: str,
                                    h: float, tolerance: float) -> None:
    rng = np.random.default_rng(seed)
    keys = _cloud(rng, kind, n, d, 3.0)
    queries = np.concatenate([_cloud(rng, kind, m, d, 3.0), keys[: m // 3]])
    values = rng.uniform(-1, 1, (n, nv))
    _auto(queries, keys, values, h, tolerance)


@given(seed=st.integers(0, 2**31), d=st.integers(1, 3), n=st.integers(1, 300),
       m=st.integers(1, 50), nv=st.integers(0, 2),
       kind=st.sampled_from(["uniform", "clusters", "duplicates", "tails"]),
       basis=st.sampled_from(["hermite", "chebyshev"]), side=st.sampled_from(SIDES),
       order=st.integers(1, 10), reach=st.integers(1, 6),
       expand=st.sampled_from([True, False, None]))
def test_forced_plans_bound_every_sum(seed: int, d: int, n: int, m: int, nv: int, kind: str,
                                      basis: str, side: float, order: int, reach: int,
                                      expand: bool | None) -> None:
    rng = np.random.default_rng(seed)
    keys = _cloud(rng, kind, n, d, 6.0)
    queries = np.concatenate([_cloud(rng, kind, m, d, 6.0), keys[: m // 2]])
    values = rng.uniform(-1, 1, (n, nv))
    plan = _plan(basis, side, order, reach, d, n)
    _forced(queries, keys, values, 1.0, plan, expand)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("basis", ["hermite", "chebyshev"])
def test_every_dimension(d: int, basis: str, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 2.5, (300, d))
    queries = rng.uniform(-0.5, 3.0, (40, d))
    values = rng.uniform(-1, 1, (300, 2))
    order = {1: 12, 2: 8, 3: 6, 4: 4, 5: 3, 6: 3}[d]
    _forced(queries, keys, values, 1.0, _plan(basis, 1.0, order, 2, d, 300), True)
    _auto(queries, keys, values, 0.7, 1e-8)


def test_one_key_and_one_query() -> None:
    for d in (1, 3):
        key = np.full((1, d), 0.3)
        for h in (1e-3, 1.0, 1e3):
            _auto(key + 0.1, key, [[0.5]], h, 1e-10)
            _auto(np.linspace(-2, 2, 7 * d).reshape(7, d), key, [[-1.0]], h, 1e-10)
        for basis in ("hermite", "chebyshev"):
            _forced(key + 0.2, key, [[0.25]], 1.0, _plan(basis, 1.0, 10, 3, d, 1), True)


def test_duplicate_keys() -> None:
    keys = np.zeros((500, 2))
    values = np.where(np.arange(500) % 2, 1.0, -1.0)[:, None]
    queries = np.array([[0.0, 0.0], [0.5, -0.5], [3.0, 0.0]])
    _auto(queries, keys, values, 1.0, 1e-10)
    for basis in ("hermite", "chebyshev"):
        _forced(queries, keys, values, 1.0, _plan(basis, 0.5, 12, 8, 2, 500), True)
    keys = np.repeat(np.linspace(0, 1, 20), 50)[:, None]
    _auto(keys[::7], keys, np.ones((1000, 1)), 0.05, 1e-9)


def test_clusters_with_outliers(rng: np.random.Generator) -> None:
    cluster = rng.normal(0, 1e-3, (2000, 2))
    outliers = rng.uniform(-1e3, 1e3, (20, 2))
    keys = np.concatenate([cluster, outliers])
    values = rng.uniform(-1, 1, (keys.shape[0], 1))
    queries = np.concatenate([cluster[:100], outliers, rng.uniform(-5, 5, (50, 2))])
    for h in (1e-3, 0.05, 1.0):
        _auto(queries, keys, values, h, 1e-8)


def test_queries_far_from_every_key(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 1, (300, 1))
    values = rng.uniform(-1, 1, (300, 1))
    far = np.array([[1.5], [3.0], [5.0], [9.0], [40.0], [-30.0]])
    job = job_of(far, keys, values, 0.1)
    sums = FGT.sums(job, 1e-10)
    check(sums, job.kernel.q, job.kernel.k, job.values)
    # their totals are tiny (down to 0): the bound holds, however large against them
    assert bool((sums.total_err > 0).all())
    assert float(sums.total_err[-1]) >= float(sums.total[-1])


def test_values_near_one_in_magnitude(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 4, (800, 2))
    top = 1 - 2.0**-53
    values = np.stack([np.full(800, top), np.where(np.arange(800) % 2, top, -top),
                       rng.choice([-top, top], 800)], axis=1)
    queries = rng.uniform(0, 4, (100, 2))
    _auto(queries, keys, values, 0.4, 1e-9)
    for basis in ("hermite", "chebyshev"):
        _forced(queries, keys, values, 0.4, _plan(basis, 1.0, 14, 8, 2, 800), True)


def test_many_value_columns_in_one_pass(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 5, (1500, 1))
    values = rng.uniform(-1, 1, (1500, 9))
    queries = rng.uniform(-1, 6, (200, 1))
    job = job_of(queries, keys, values, 0.2)
    check(FGT.sums(job, 1e-10), job.kernel.q, job.kernel.k, job.values)
    # one pass computes each column as it would alone
    q, k, v = (t.double().contiguous() for t in (job.kernel.q, job.kernel.k, job.values))
    for basis in ("hermite", "chebyshev"):
        plan = _plan(basis, 1.0, 14, 8, 1, 1500)
        together = transform(q, k, v, plan, True).sums
        check(together, q, k, v)
        for c in (0, 4, 8):
            alone = transform(q, k, v[:, c:c + 1].contiguous(), plan, True).sums
            assert torch.equal(alone.total, together.total)
            assert torch.equal(alone.acc[:, 0], together.acc[:, c])


def test_no_value_columns(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 5, (700, 2))
    job = job_of(keys[:50], keys, np.zeros((700, 0)), 0.3)
    sums = FGT.sums(job, 1e-9)
    assert sums.acc.shape == (50, 0)
    check(sums, job.kernel.q, job.kernel.k, job.values)


def test_float32_job(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 6, (3000, 1))
    values = np.sin(keys)
    job = job_of(keys[::10], keys, values, 0.1, dtype=torch.float32)
    sums = FGT.sums(job, 1e-6)
    assert sums.total.dtype == torch.float64
    check(sums, job.kernel.q, job.kernel.k, job.values)


def test_mixed_expanded_and_direct_boxes(rng: np.random.Generator) -> None:
    # a dense cluster (expanded) beside a sparse spread (direct)
    keys = np.concatenate([rng.uniform(0, 2, (20000, 1)), rng.uniform(2, 400, (300, 1))])
    values = rng.uniform(-1, 1, (keys.shape[0], 1))
    queries = np.concatenate([keys[::40], rng.uniform(-5, 405, (200, 1))])
    job = job_of(queries, keys, values, 0.05)
    run = FGT.run(job, 1e-10)
    assert 0 < run.expanded_targets < run.target_boxes
    assert 0 < run.expanded_sources < run.source_boxes
    check(run.sums, job.kernel.q, job.kernel.k, job.values)


@pytest.mark.parametrize("d, tolerance", [(1, 1e-10), (2, 1e-8), (3, 1e-6)])
def test_bulk_queries_are_bounded_well_within_the_tolerance(
        d: int, tolerance: float, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 6, (6000, d))
    values = np.sin(keys.sum(1, keepdims=True))
    queries = rng.uniform(1, 5, (300, d))
    job = job_of(queries, keys, values, 0.4)
    sums = FGT.sums(job, tolerance)
    check(sums, job.kernel.q, job.kernel.k, job.values)
    assert relative_median(sums) <= tolerance / 8
    out = sums.acc[:, 0] / sums.total
    bound = (sums.acc_err[:, 0] + out.abs() * sums.total_err) / (sums.total - sums.total_err)
    assert float(bound.max()) <= tolerance / 4 * float(np.abs(values).max())


def test_against_the_dense_engine(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 3, (2000, 2))
    values = rng.uniform(-1, 1, (2000, 2))
    queries = rng.uniform(0, 3, (100, 2))
    sums = FGT.sums(job_of(queries, keys, values, 0.25), 1e-9)
    acc = nadaraya.smooth(queries, keys, values, "gaussian", bandwidth=0.25, engine="dense",
                          normalize=False)
    total = nadaraya.smooth(queries, keys, np.ones(2000), "gaussian", bandwidth=0.25,
                            engine="dense", normalize=False)
    assert np.all(np.abs(sums.total.numpy() - total) <= sums.total_err.numpy() + 1e-14 * total)
    assert np.all(np.abs(sums.acc.numpy() - acc)
                  <= sums.acc_err.numpy() + 1e-14 * total[:, None])


def test_metric_and_per_feature_bandwidths(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 3, (1500, 2))
    values = rng.uniform(-1, 1, (1500, 1))
    queries = rng.uniform(0, 3, (80, 2))
    for kernel in (nadaraya.kernels.Gaussian([0.2, 0.7]),
                   nadaraya.kernels.Gaussian(metric=[[3.0, 1.0], [0.0, 2.0]]),
                   nadaraya.kernels.Gaussian(0.3).on([0]) * nadaraya.kernels.Gaussian(0.5).on([1])):
        job = job_of(queries, keys, values, None, kernel)
        check(FGT.sums(job, 1e-9), job.kernel.q, job.kernel.k, job.values)


def test_same_result_on_one_thread(rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 8, (20000, 2))
    values = rng.uniform(-1, 1, (20000, 1))
    job = job_of(keys[::50], keys, values, 0.2)
    two = FGT.sums(job, 1e-9)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = FGT.sums(job_of(keys[::50], keys, values, 0.2), 1e-9)
    finally:
        torch.set_num_threads(threads)
    for name in ("total", "acc", "total_err", "acc_err"):
        assert torch.equal(getattr(one, name), getattr(two, name))


@pytest.mark.parametrize("d", [1, 3])
def test_rounding_bounds_against_30_digit_sums(d: int, rng: np.random.Generator) -> None:
    # orders high enough that truncation is negligible: what is left is rounding
    keys = rng.uniform(0, 2, (120, d))
    values = rng.uniform(-1, 1, (120, 1))
    queries = rng.uniform(0, 2, (12, d))
    job = job_of(queries, keys, values, 0.5)
    q, k, v = (t.double().contiguous() for t in (job.kernel.q, job.kernel.k, job.values))
    direct = transform(q, k, v, _plan("hermite", 1.0, 0, 12, d, 120), False).sums
    check_digits(direct, q, k, v)
    for basis in ("hermite", "chebyshev"):
        plan = _plan(basis, 1.0, {1: 30, 3: 14}[d], 12, d, 120)
        check_digits(transform(q, k, v, plan, True).sums, q, k, v)


def test_a_fan_of_passes_too_wide_falls_back_to_direct_sums(
        monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    from nadaraya.engine.fgt import _passes

    monkeypatch.setattr(_passes, "MAX_CANDIDATES", 10)
    keys = rng.uniform(0, 4, (400, 3))
    queries = rng.uniform(0, 4, (40, 3))
    values = rng.uniform(-1, 1, (400, 1))
    job = job_of(queries, keys, values, 1.0)
    q, k, v = (t.double().contiguous() for t in (job.kernel.q, job.kernel.k, job.values))
    run = transform(q, k, v, _plan("chebyshev", 1.0, 6, 4, 3, 400), True)
    assert run.expanded_targets == 0
    check(run.sums, q, k, v)
