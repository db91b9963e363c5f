"""Poly x exp kernels (Laplacian, Matern 3/2 and 5/2) by sweeps, against naive sums.

The oracle is the naive double loop in extended precision on the engine's own
prepared points (``_helpers.extended``); the bound is the one derived in
``nadaraya.engine.sweep._exp``. The float64 dense engine must agree within
the sum of that bound and its own (``dense_tolerance``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya

from .._oracles import examples
from ._helpers import (
    EXP,
    U32,
    U64,
    exp_tolerance,
    extended,
    prepared,
    skip_without_extended,
    sweep,
)

KERNELS = list(EXP)


def dense_tolerance(kernel: str, uq: np.ndarray, uk: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The dense engine's own error: each log-weight rounded (``u`` of the scaled distance,
    plus a few roundings), summed one term after another in the worst case (``n u``)."""
    scale = EXP[kernel][1]
    nearest = np.abs(uq[:, None] - uk[None, :]).min(axis=1)
    eps = (3 * (scale * nearest + 40) + len(uk) + 8) * U64
    top = np.abs(values.reshape(len(uk), -1)).max(axis=0)
    return 2 * eps[:, None] * top[None, :]


def check(kernel: str, queries: np.ndarray, keys: np.ndarray, values: np.ndarray,
          bandwidth: float, dense: bool = True) -> float:
    """Assert the sweep within its bound of the naive sums (and, unless ``dense`` is False, of
    the dense engine); return the largest error as a share of the bound."""
    skip_without_extended()
    values = values.reshape(len(keys), -1)
    out = sweep(queries, keys, values, kernel, bandwidth=bandwidth)
    uq, uk = prepared(queries, keys, kernel, bandwidth)
    ref = extended(kernel, uq, uk, values)
    tol = exp_tolerance(kernel, uq, uk, values)
    err = np.abs(out - ref["mean"])
    assert np.all(err <= tol), f"error {err.max():.3g} above the bound {tol.min():.3g}"
    if dense:
        got = nadaraya.smooth(queries, keys, values, kernel, bandwidth=bandwidth, engine="dense")
        assert np.all(np.abs(out - got) <= tol + dense_tolerance(kernel, uq, uk, values))
    return float((err / tol).max())


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Keys spread evenly, in clusters, with duplicates or heavy tails; queries among them,
    on them and far away; values of mixed sign and magnitude."""
    n, m, p = draw(st.integers(1, 300)), draw(st.integers(1, 80)), draw(st.integers(1, 3))
    layout = draw(st.sampled_from(["even", "clusters", "duplicates", "heavy"]))
    h = draw(st.sampled_from([1e-3, 0.05, 0.3, 2.0, 40.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if layout == "even":
        keys = rng.uniform(0, 6, n)
    elif layout == "clusters":
        keys = rng.choice([0.0, 0.5, 3.0, 1e3], n) + 0.01 * rng.standard_normal(n)
    elif layout == "duplicates":
        keys = rng.choice(rng.uniform(0, 6, 5), n)
    else:
        keys = rng.standard_cauchy(n)
    kind = rng.integers(0, 3, m)
    queries = np.where(kind == 0, rng.choice(keys, m), rng.uniform(-1, 7, m))
    queries = np.where(kind == 2, queries + rng.choice([-1e4, 1e4], m) * h, queries)
    values = rng.standard_normal((n, p)) * 10.0 ** rng.integers(-8, 8, (n, p))
    return queries, keys, values, h


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=examples(40))
@given(problem=problems())
def test_random_problems_within_the_bound(kernel: str, problem) -> None:  # type: ignore[no-untyped-def]
    check(kernel, *problem[:3], bandwidth=problem[3])


@pytest.mark.parametrize("kernel", KERNELS)
def test_far_queries_get_the_nearest_keys_mean(kernel: str, rng: np.random.Generator) -> None:
    """1e4 and 1e6 bandwidths from every key, ``e^-t`` underflows; the log-offset keeps the
    weights' ratios, so the result is the naive weighted mean (and, for the Laplacian at
    1e6, exactly ``sum e^{k - k_max} v / sum e^{k - k_max}``)."""
    keys = rng.uniform(0, 1, 200)
    values = rng.standard_normal(200)
    queries = np.array([-1e4, -3e3, 0.5, 3e3, 1e4, 1e6])
    out = sweep(queries, keys, values, kernel, bandwidth=1.0)
    assert np.all(np.isfinite(out))
    check(kernel, queries, keys, values, 1.0)
    if kernel == "laplacian":
        w = np.exp(keys - keys.max())
        assert out[-1] == pytest.approx(float(w @ values / w.sum()), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_one_key(kernel: str) -> None:
    out = sweep(np.linspace(-5, 5, 11), np.array([0.25]), np.array([-3.5]), kernel,
                bandwidth=0.1)
    assert np.all(out == -3.5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_duplicate_keys_and_queries_on_keys(kernel: str, rng: np.random.Generator) -> None:
    keys = np.repeat(rng.uniform(0, 2, 7), 40)
    values = rng.standard_normal((len(keys), 2))
    queries = np.concatenate([keys[::13], rng.uniform(-1, 3, 30)])
    check(kernel, queries, keys, values, 0.2)
    same = np.full(50, 1.5)
    check(kernel, np.array([1.5, 1.4, 9.0]), same, rng.standard_normal(50), 0.05)


@pytest.mark.parametrize("kernel", KERNELS)
def test_keys_far_from_the_origin_with_tiny_bandwidths(kernel: str,
                                                      rng: np.random.Generator) -> None:
    keys = 1e8 + rng.uniform(0, 1e-6, 500)
    queries = 1e8 + rng.uniform(-2e-7, 1.2e-6, 100)
    check(kernel, queries, keys, rng.standard_normal(500), 1e-8)


@pytest.mark.parametrize("kernel", KERNELS)
def test_values_near_one(kernel: str, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 6, 400)
    values = 1.0 - 2.0**-40 * rng.integers(0, 1000, 400)
    out = sweep(keys[:50], keys, values, kernel, bandwidth=0.3)
    assert np.all((out >= values.min()) & (out <= values.max()))
    check(kernel, keys[:50], keys, values, 0.3)


@pytest.mark.parametrize("kernel", KERNELS)
def test_many_columns_of_different_scales(kernel: str, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 6, 300)
    values = rng.standard_normal((300, 6)) * np.array([1e-300, 1e-8, 1.0, 1e8, 1e300, -1.0])
    check(kernel, rng.uniform(0, 6, 60), keys, values, 0.3)


@pytest.mark.parametrize("kernel", KERNELS)
def test_gaps_beyond_the_underflow_of_exp(kernel: str, rng: np.random.Generator) -> None:
    # clusters 2000 bandwidths apart: the carries forget what is beyond e^-700
    keys = np.concatenate([rng.uniform(0, 1, 100), 2000 + rng.uniform(0, 1, 100),
                           4000 + rng.uniform(0, 1, 100)])
    queries = np.array([-5.0, 0.5, 1000.0, 1500.0, 2000.5, 3000.0, 4000.5, 5000.0])
    check(kernel, queries, keys, rng.standard_normal(300), 1.0)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", [5000, pytest.param(200_000, marks=pytest.mark.slow)])
def test_many_blocks_chain_within_the_bound(kernel: str, n: int,
                                            rng: np.random.Generator) -> None:
    """Dense keys (every weight matters across the whole range): each one's weight passes
    through its block's keys and every block's carry."""
    keys = rng.uniform(0, 6, n)
    check(kernel, rng.uniform(-0.5, 6.5, 40), keys, rng.standard_normal(n), 0.3)


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_within_the_derived_bound_of_dense64(kernel: str,
                                                     rng: np.random.Generator) -> None:
    """A float32 job prepares its points in float32: three roundings of each coordinate
    (the difference from the centre, the division, the bandwidth itself), ``3 u32 |u|``;
    so a distance moves by ``6 u32 U`` (``U`` the largest prepared coordinate), a weight
    ratio by ``12 s u32 U`` and the mean by twice that, plus the float32 result's own
    rounding (``8 u32``, with room): ``(24 s U + 8) u32 max |v|``."""
    keys = rng.uniform(0, 6, 2000).astype(np.float32)
    values = (2 * np.sin(keys) + rng.standard_normal(2000)).astype(np.float32)
    queries = rng.uniform(0, 6, 300).astype(np.float32)
    out = sweep(torch.from_numpy(queries), torch.from_numpy(keys), torch.from_numpy(values),
                kernel, bandwidth=0.3)
    assert out.dtype == torch.float32
    ref = nadaraya.smooth(queries.astype(np.float64), keys.astype(np.float64),
                          values.astype(np.float64), kernel, bandwidth=0.3, engine="dense")
    uq, uk = prepared(queries, keys, kernel, 0.3)
    top = max(np.abs(uq).max(), np.abs(uk).max())
    tol = (24 * EXP[kernel][1] * top + 8) * U32 * np.abs(values).max()
    assert np.abs(out.numpy() - ref).max() <= tol


@pytest.mark.parametrize("kernel", KERNELS)
def test_unnormalized_sums_and_lse_match_dense(kernel: str, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 6, 500)
    values = rng.standard_normal((500, 2))
    queries = np.concatenate([rng.uniform(0, 6, 40), [-300.0, 900.0]])
    with_sweep = sweep(queries, keys, values, kernel, bandwidth=0.3, normalize=False)
    dense = nadaraya.smooth(queries, keys, values, kernel, bandwidth=0.3, normalize=False,
                            engine="dense")
    spread = nadaraya.smooth(queries, keys, np.abs(values), kernel, bandwidth=0.3,
                             normalize=False, engine="dense")
    uq, uk = prepared(queries, keys, kernel, 0.3)
    eps = exp_tolerance(kernel, uq, uk, values) / (2 * np.abs(values).max(axis=0))
    assert np.all(np.abs(with_sweep - dense) <= 2 * eps * spread + 1e-300)
    _, lse = sweep(queries, keys, values, kernel, bandwidth=0.3, return_lse=True)
    _, lse_dense = nadaraya.smooth(queries, keys, values, kernel, bandwidth=0.3,
                                   return_lse=True, engine="dense")
    assert np.all(np.abs(lse - lse_dense) <= 2 * eps[:, 0] * np.maximum(1.0, np.abs(lse)))
