"""The binned sums stay within their stated bounds, whatever the data.

Random and adversarial problems (clusters, heavy tails, duplicate keys, one
key, far queries, values near 1 or near overflow, anisotropic metrics) for
every kernel the method serves, in 1 and 2 dimensions: the error of each sum
against the exact float64 formula never exceeds the bound the method states.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nadaraya.engine.binned import BinnedMethod
from nadaraya.engine.certified import unproven_rows
from nadaraya.kernels import get_kernel

from ._problems import KERNELS, LAYOUTS, check_bounds, exact, layout, make_job

METHOD = BinnedMethod()


def _values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "near one":
        return 1.0 - 1e-9 * rng.uniform(size=(n, 2))
    if kind == "huge":
        return 1e300 * rng.uniform(-1.0, 1.0, (n, 2))
    return rng.standard_normal((n, 2))


@settings(max_examples=60, deadline=None)
@given(
    d=st.sampled_from([1, 2]),
    kernel=st.sampled_from(KERNELS),
    kind=st.sampled_from(LAYOUTS),
    values=st.sampled_from(["normal", "near one", "huge"]),
    n=st.integers(1, 300),
    m=st.integers(1, 40),
    width=st.floats(-1.3, 0.0),
    tolerance=st.sampled_from([3e-2, 1e-2, 1e-3]),
    seed=st.integers(0, 2**31 - 1),
)
def test_error_within_bound(d, kernel, kind, values, n, m, width, tolerance, seed):
    rng = np.random.default_rng(seed)
    keys = layout(kind, n, d, rng)
    n = keys.shape[0]
    # queries among the keys, on keys, and a few far outside
    queries = np.concatenate([
        keys.min(0) + (keys.max(0) - keys.min(0) + 0.2) * rng.uniform(-0.2, 1.2, (m, d)),
        keys[rng.integers(0, n, 3)],
        keys.mean(0) + rng.choice([-1.0, 1.0], (2, d)) * 10.0 ** rng.uniform(0, 3, (2, d)),
    ])
    if d == 2:
        width, tolerance = max(width, -0.5), max(tolerance, 1e-2)
    bandwidth = 10.0**width
    job = make_job(queries, keys, _values(values, n, rng), kernel, bandwidth)
    why = METHOD.refuse(job, tolerance)
    if why is not None:  # a compact kernel over keys 20 bandwidths apart needs a fine 2-D grid
        assert d == 2 and "working_memory" in why
        return
    check_bounds(job, kernel, METHOD.sums(job, tolerance))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2])
def test_anisotropic_metric(kernel, d):
    rng = np.random.default_rng(3)
    keys = rng.uniform(0.0, 1.0, (400, 2))
    queries = rng.uniform(-0.2, 1.2, (50, 2))
    metric = np.array([[4.0, 1.5], [0.0, 0.7]])[:d]  # d = 1: one projected direction
    kern = type(get_kernel(kernel, None))(metric=metric)
    job = make_job(queries, keys, rng.standard_normal(400), kern, None)
    assert job.kernel.q.shape[1] == d
    check_bounds(job, kernel, METHOD.sums(job, 1e-2))


def test_bulk_queries_are_proven():
    # amid uniform keys the bound must pass the dispatcher's check for all queries
    rng = np.random.default_rng(0)
    keys = rng.uniform(0.0, 6.0, 3000)
    queries = rng.uniform(0.0, 6.0, 500)
    values = 2 * np.sin(keys) + rng.standard_normal(3000)
    for tolerance in (1e-3, 1e-4):
        job = make_job(queries, keys, values, "gaussian", 0.1)
        sums = METHOD.sums(job, tolerance)
        scale = job.values.abs().amax(0).double()
        bad = unproven_rows(sums, scale, tolerance, normalize=True, lse=False)
        assert int(bad.sum()) == 0
        total, _, _ = exact(job, "gaussian")
        # the bounds are about a quarter of the tolerance, relative to the total
        ratio = sums.total_err.numpy() / total
        assert tolerance / 8 <= np.median(ratio) <= tolerance / 3


def test_far_query_is_flagged():
    rng = np.random.default_rng(1)
    keys = rng.uniform(0.0, 1.0, 200)
    queries = np.array([0.5, 40.0, -1e6])
    job = make_job(queries, keys, rng.standard_normal(200), "laplacian", 0.1)
    sums = METHOD.sums(job, 1e-3)
    check_bounds(job, "laplacian", sums)
    scale = job.values.abs().amax(0).double()
    bad = unproven_rows(sums, scale, 1e-3, normalize=True, lse=False)
    assert bad.tolist() == [False, True, True]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_many_keys_in_few_cells(kernel):
    # a million keys, half of them on one point: the masses' rounding is at its largest
    rng = np.random.default_rng(5)
    n = 10**6
    keys = np.where(rng.uniform(size=n) < 0.5, 3.0, rng.uniform(0.0, 6.0, n))
    values = 2 * np.sin(keys) + rng.standard_normal(n)
    queries = np.concatenate([rng.uniform(0.0, 6.0, 60), [3.0, 3.0 + 1e-9, 2.99]])
    job = make_job(queries, keys, values, kernel, 0.01)
    check_bounds(job, kernel, METHOD.sums(job, 1e-4))


@pytest.mark.parametrize(("kernel", "radius"), [("epanechnikov", 1.0), ("laplacian", 0.0)])
@pytest.mark.parametrize("d", [1, 2])
def test_queries_on_a_kink(kernel, radius, d):
    # many keys on one point, queries where the kernel's slope jumps across their cells
    rng = np.random.default_rng(7)
    corner, far = np.zeros((1, d)), np.full((1, d), 4.0)
    probe = make_job(corner, np.concatenate([corner, far]), np.ones(2), kernel, 1.0)
    delta = METHOD.plan(probe, 1e-2)["cell"]
    centre = (np.floor(2.0 / delta) + 0.5) * delta
    keys = np.concatenate([corner, far, np.full((2000, d), centre)])
    r = radius + rng.uniform(-1.5, 1.5, 200) * delta
    angle = rng.uniform(0.0, 2 * np.pi, 200)
    ray = np.stack([np.cos(angle), np.sin(angle)], axis=1)[:, :d]
    ray /= np.linalg.norm(ray, axis=1, keepdims=True)
    job = make_job(centre + r[:, None] * ray, keys, np.ones(keys.shape[0]), kernel, 1.0)
    check_bounds(job, kernel, METHOD.sums(job, 1e-2))
