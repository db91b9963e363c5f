"""Values at the ends of a dtype's range: means near its largest number, sums past it,
values near its smallest normal number and subnormal ones.

Oracle: the float64 dense engine on the values multiplied by a power of two
(exact), its result divided back, or a naive formula in the log domain.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError
from nadaraya.kernels import ExpDot
from nadaraya.kernels.linear import LinearKernel

from ._oracles import dense64, rel_err, runnable_engines

# (kernel, bandwidth, keys, queries): together every engine runs one of them
PROBLEMS = {
    "gaussian": ("gaussian", 0.3, 1500, 40),
    "gaussian-narrow": ("gaussian", 0.01, 6000, 3000),  # the pruned engine
    "epanechnikov": ("epanechnikov", 0.2, 1500, 40),  # the neighbors engine
}
NEAR_MAX = {np.float32: 3e38, np.float64: 1.7e308}


def _problem(name: str, dtype: type) -> tuple[np.ndarray, np.ndarray, str, float]:
    kernel, h, n, m = PROBLEMS[name]
    rng = np.random.default_rng(len(name))
    keys = rng.uniform(0, 6, n).astype(dtype)
    queries = rng.uniform(0, 6, m).astype(dtype)
    return queries, keys, kernel, h


def _cases(dtype: type) -> list[tuple[str, list[str]]]:
    """Each problem and the engines that run it."""
    cases = []
    for name in PROBLEMS:
        q, k, kernel, h = _problem(name, dtype)
        v = np.ones((len(k), 2), dtype=dtype)
        cases.append((name, runnable_engines(q, k, v, kernel, bandwidth=h)))
    return cases


def test_every_engine_meets_the_range_cases() -> None:
    ran = {e for dtype in (np.float32, np.float64) for _, names in _cases(dtype) for e in names}
    assert ran >= {"neighbors", "pruned", "fused", "streamed", "dense"}


def _scaled_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, kernel: str, h: float,
                      shift: int, **kwargs: object) -> np.ndarray:
    """The float64 dense result for ``v``, computed on ``v * 2^shift`` (exact) and divided back."""
    ref = dense64(q, k, np.ldexp(v.astype(np.float64), shift), kernel, bandwidth=h, **kwargs)
    return np.ldexp(ref, -shift)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_means_of_values_near_the_largest_number(dtype: type) -> None:
    for name, engines in _cases(dtype):
        q, k, kernel, h = _problem(name, dtype)
        rng = np.random.default_rng(1)
        v = (NEAR_MAX[dtype] * (0.9 + 0.1 * rng.random((len(k), 2)))).astype(dtype)
        v[:, 1] *= -1
        ref = _scaled_reference(q, k, v, kernel, h, -1000)
        for engine in engines:
            out = nadaraya.smooth(q, k, v, kernel, bandwidth=h, engine=engine)
            assert np.isfinite(out).all(), (name, engine)
            tol = _tolerance(dtype, h)
            err = float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= tol, (name, engine, err)


@pytest.mark.parametrize(("dtype", "size"), [(np.float32, 1e-38), (np.float64, 1e-300)],
                         ids=["float32", "float64"])
def test_means_of_values_near_the_smallest_normal_number(dtype: type, size: float) -> None:
    for name, engines in _cases(dtype):
        q, k, kernel, h = _problem(name, dtype)
        rng = np.random.default_rng(2)
        v = (size * (0.5 + rng.random((len(k), 2)))).astype(dtype)
        ref = _scaled_reference(q, k, v, kernel, h, 1000)
        for engine in engines:
            out = nadaraya.smooth(q, k, v, kernel, bandwidth=h, engine=engine)
            tol = _tolerance(dtype, h)
            err = float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())
            assert err <= tol, (name, engine, err)


def _tolerance(dtype: type, h: float) -> float:
    """2e-6 in float32 (the target of the 1-D task, h = 0.3), twice that for narrower
    kernels: the float32 rounding of the scaled coordinates, eps |x - c| / h, is 30
    times larger at h = 0.01."""
    return (2e-6 if h >= 0.3 else 4e-6) if dtype == np.float32 else 1e-13


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_means_of_subnormal_values_are_rounded_once(dtype: type) -> None:
    """Subnormal values are multiples of the smallest one: the mean is within half of it."""
    tiny = float(np.finfo(dtype).smallest_subnormal)
    for name, engines in _cases(dtype):
        q, k, kernel, h = _problem(name, dtype)
        rng = np.random.default_rng(3)
        v = (tiny * rng.integers(1, 200, (len(k), 2))).astype(dtype)
        ref = _scaled_reference(q, k, v, kernel, h, 1100)
        for engine in engines:
            out = nadaraya.smooth(q, k, v, kernel, bandwidth=h, engine=engine)
            err = float(np.abs(out.astype(np.float64) - ref).max())
            # half a step of the subnormal grid (the mean is rounded to it once)
            assert err <= 0.5 * tiny, (name, engine, err / tiny)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unnormalized_sums_past_the_largest_number_raise(dtype: type) -> None:
    for name, engines in _cases(dtype):
        q, k, kernel, h = _problem(name, dtype)
        v = np.full(len(k), NEAR_MAX[dtype] / 4, dtype=dtype)
        for engine in engines:
            try:
                nadaraya.explain(q, k, v, kernel, bandwidth=h, engine=engine, normalize=False)
            except NadarayaError:
                continue  # engines that do not sum unnormalized
            with pytest.raises(NadarayaError, match=r"normalize=False.*overflow"):
                nadaraya.smooth(q, k, v, kernel, bandwidth=h, engine=engine, normalize=False)


def test_unnormalized_sums_of_huge_weights_and_tiny_values() -> None:
    """``sum_j e^{s_j} v_j``, every ``e^{s_j}`` past float64 and ``v_j`` tiny, is representable."""
    rng = np.random.default_rng(4)
    angle = rng.uniform(0, 2 * np.pi, 50)
    k = np.stack([np.cos(angle), np.sin(angle)], 1)
    q = k[:5]
    scale = 800.0  # scores s = 800 cos(angle between q and k), up to 800
    v = 1e-300 * (1 + rng.random(50))
    s = scale * q @ k.T
    # naive formula in the log domain: log sum_j exp(s_j + log v_j)
    want = np.array([math.exp(np.logaddexp.reduce(row + np.log(v))) for row in s])
    assert s.max() > math.log(np.finfo(np.float64).max) and np.isfinite(want).all()
    for engine in ("dense", "streamed"):
        out = nadaraya.smooth(q, k, v, ExpDot(scale), engine=engine, normalize=False)
        np.testing.assert_allclose(out, want, rtol=1e-11, err_msg=engine)


def test_signed_sums_whose_partial_sums_overflow() -> None:
    """``K = 1`` for every key: the sum of values that cancel is exact, not inf or NaN."""
    n = 20
    ones = np.ones((n, 1))
    v = np.where(np.arange(n) < n // 2, 1.7e308, -1.7e308)  # sums of the first half overflow
    v[0] = 1.0e308
    want = v.astype(np.float64)
    want = float(np.ldexp(np.ldexp(want, -1024).sum(), 1024))  # exact: halves of the values
    for engine in ("dense", "streamed"):
        out = nadaraya.smooth(ones[:1], ones, v, LinearKernel(), engine=engine, normalize=False)
        assert out[0] == pytest.approx(want, rel=1e-15), engine


def test_signed_sums_past_the_largest_number_raise() -> None:
    ones = np.ones((20, 1))
    v = np.full(20, 1.7e308)
    for engine in ("dense", "streamed"):
        with pytest.raises(NadarayaError, match=r"weighted sums of .* overflow float64"):
            nadaraya.smooth(ones[:1], ones, v, LinearKernel(), engine=engine, normalize=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scaling_keeps_lse_and_empty_rows(dtype: type) -> None:
    """The log row sums do not depend on the values; empty rows still follow ``empty=``."""
    q, k, kernel, h = _problem("epanechnikov", dtype)
    q = np.concatenate([q, np.array([100.0], dtype=dtype)])  # no key in reach
    v = np.full(len(k), NEAR_MAX[dtype], dtype=dtype)
    out, lse = nadaraya.smooth(q, k, v, kernel, bandwidth=h, return_lse=True, empty="nan")
    _, lse_ones = nadaraya.smooth(q, k, np.ones_like(v), kernel, bandwidth=h, return_lse=True,
                                  empty="nan")
    np.testing.assert_array_equal(lse, lse_ones)
    assert np.isnan(out[-1]) and np.isfinite(out[:-1]).all()
    assert rel_err(out[:-1] / NEAR_MAX[dtype], np.ones(len(q) - 1)) <= 4 * np.finfo(dtype).eps


@pytest.mark.parametrize("h", [1e-10, 1e-100])
@pytest.mark.parametrize("engine", ["auto", "dense", "streamed"])
def test_a_narrow_cluster_beside_distant_keys_keeps_its_distances(h: float, engine: str) -> None:
    # keys at the bandwidth's scale, and two far away that pull the keys' mean off the
    # cluster: the weights within the cluster are those of the cluster alone, rescaled
    rng = np.random.default_rng(1)
    cluster, queries = rng.uniform(0, 6, (30, 1)), rng.uniform(0, 6, (7, 1))
    keys = np.r_[cluster * h, [[5.0], [-3.0]]]
    values = rng.standard_normal(32)
    got = nadaraya.smooth(queries * h, keys, values, "gaussian", bandwidth=h, engine=engine)
    ref = nadaraya.smooth(queries, cluster, values[:30], "gaussian", bandwidth=1.0,
                          engine="dense")
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
