"""Compact kernels (Epanechnikov, tricube, uniform) by window sums, against naive sums.

The oracle is the naive double loop in extended precision on the engine's own
prepared points, the support tested as the dense engine tests it
(``_helpers.extended``); the bound is the one derived in
``nadaraya.engine.sweep._window``: relative to each window's own sums.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine.sweep._order import Groups
from nadaraya.engine.sweep._window import window_sums

from .._oracles import examples
from ._helpers import (
    U64,
    WINDOW,
    extended,
    prepared,
    skip_without_extended,
    sweep,
    window_tolerance,
)


def check(kernel: str, queries: np.ndarray, keys: np.ndarray, values: np.ndarray,
          bandwidth: float, dense: bool = True) -> np.ndarray:
    """Assert the sweep within its bound of the naive sums (and the dense engine, when asked,
    within that bound plus its own); return the sweep's result."""
    skip_without_extended()
    values = values.reshape(len(keys), -1)
    out = sweep(queries, keys, values, kernel, bandwidth=bandwidth, empty="nan")
    uq, uk = prepared(queries, keys, kernel, bandwidth)
    ref = extended(kernel, uq, uk, values)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref["mean"]))
    tol = window_tolerance(kernel, ref)
    seen = ~np.isnan(ref["mean"])
    err = np.abs(out - ref["mean"])[seen]
    assert np.all(err <= tol[seen]), f"error {err.max():.3g} above the bound"
    if dense:
        got = nadaraya.smooth(queries, keys, values, kernel, bandwidth=bandwidth, empty="nan",
                              engine="dense")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(out))
        # the dense engine rounds each weight to about u of the kernel's scale
        dense_tol = 8 * U64 * (ref["abs_values"] + np.nan_to_num(np.abs(ref["mean"]))
                               * ref["count"][:, None]) / np.where(ref["total"] > 0,
                                                                   ref["total"], 1)[:, None]
        assert np.all(np.abs(out - got)[seen] <= (tol + dense_tol)[seen])
    return out


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    n, m, p = draw(st.integers(1, 300)), draw(st.integers(1, 80)), draw(st.integers(1, 3))
    layout = draw(st.sampled_from(["even", "clusters", "duplicates", "heavy", "grid"]))
    h = draw(st.sampled_from([1e-3, 0.05, 0.3, 2.0, 40.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if layout == "even":
        keys = rng.uniform(0, 6, n)
    elif layout == "clusters":
        keys = rng.choice([0.0, 0.5, 3.0, 1e3], n) + 0.01 * rng.standard_normal(n)
    elif layout == "duplicates":
        keys = rng.choice(rng.uniform(0, 6, 5), n)
    elif layout == "heavy":
        keys = rng.standard_cauchy(n)
    else:  # keys exactly one bandwidth apart: supports end on keys
        keys = h * np.arange(n, dtype=np.float64)
    kind = rng.integers(0, 3, m)
    queries = np.where(kind == 0, rng.choice(keys, m), rng.uniform(-1, 7, m))
    queries = np.where(kind == 2, rng.choice(keys, m) + rng.choice([-h, h], m), queries)
    values = rng.standard_normal((n, p)) * 10.0 ** rng.integers(-8, 8, (n, p))
    return queries, keys, values, h


@pytest.mark.parametrize("kernel", WINDOW)
@settings(max_examples=examples(40))
@given(problem=problems())
def test_random_problems_within_the_bound(kernel: str, problem) -> None:  # type: ignore[no-untyped-def]
    check(kernel, *problem[:3], bandwidth=problem[3])


@pytest.mark.parametrize("kernel", WINDOW)
@pytest.mark.parametrize("crowd", [50_000, pytest.param(2_000_000, marks=pytest.mark.slow)])
def test_few_keys_among_many_far_from_the_origin(kernel: str, crowd: int,
                                                 rng: np.random.Generator) -> None:
    """A window of three keys with values near 1e-9, a million bandwidths from a crowd of
    keys with values near 1: differences of global prefix sums of ``k^a v`` would carry
    errors of ``eps`` times those sums (``k^2`` at 1e12, values at 1); every window sum here
    is over its own keys, so the three keys' mean comes out to the bound of their own sums."""
    far = 1e6 + np.array([0.0, 0.3, 0.55])
    keys = np.concatenate([rng.uniform(0, 1, crowd), far])
    values = np.concatenate([1 + rng.standard_normal(crowd), 1e-9 * np.array([1.0, -2.0, 1.5])])
    queries = np.concatenate([1e6 + rng.uniform(-0.5, 1.0, 20), rng.uniform(0, 1, 5)])
    check(kernel, queries, keys, values, 1.0, dense=crowd < 10**6)
    if kernel == "tricube":
        return
    # the same means from global prefix sums of k^a v (about the keys' median) are wrong
    uq, uk = prepared(queries[:20], keys, kernel, 1.0)
    ref = extended(kernel, uq, uk, values)["mean"][:, 0]
    order = np.argsort(uk)
    ks, vs = uk[order], values[order]
    lo, hi = np.searchsorted(ks, uq - 1, side="left"), np.searchsorted(ks, uq + 1, side="right")
    coef = [np.ones_like(uq)] if kernel == "uniform" else [1 - uq**2, 2 * uq, -np.ones_like(uq)]
    sums = [np.concatenate([[0.0], np.cumsum(ks**a * vs)]) for a in range(len(coef))]
    counts = [np.concatenate([[0.0], np.cumsum(ks**a)]) for a in range(len(coef))]
    acc = sum(c * (p[hi] - p[lo]) for c, p in zip(coef, sums, strict=True))
    total = sum(c * (p[hi] - p[lo]) for c, p in zip(coef, counts, strict=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        assert not np.all(np.abs(acc / total - ref) <= 1e-3 * np.abs(ref))


@pytest.mark.parametrize("kernel", WINDOW)
def test_keys_at_the_edge_of_the_support(kernel: str, rng: np.random.Generator) -> None:
    """Every key of these windows sits just inside the support: the weights are tiny and the
    moments would cancel, so such queries are summed key by key."""
    skip_without_extended()
    centres = np.arange(50) * 10.0
    keys = np.concatenate([centres - (1 - 1e-9), centres + (1 - 3e-9), centres + 5.0])
    values = rng.standard_normal((len(keys), 2))
    out = check(kernel, centres, keys, values, 1.0)
    assert np.all(np.isfinite(out))
    total, acc = np.zeros(len(centres)), np.zeros((len(centres), 2))
    direct = window_sums(kernel, keys, np.ascontiguousarray(values), centres,
                         Groups(centres, False, 7), False,
                         lambda fn, blocks: [fn(b) for b in blocks], 1, total, acc)
    assert direct == (0 if kernel == "uniform" else len(centres) * (2 if kernel == "tricube"
                                                                    else 1))


@pytest.mark.parametrize("kernel", WINDOW)
def test_values_near_one_and_duplicates(kernel: str, rng: np.random.Generator) -> None:
    keys = np.repeat(rng.uniform(0, 6, 40), 10)
    values = 1.0 - 2.0**-40 * rng.integers(0, 1000, 400)
    out = check(kernel, np.concatenate([keys[::7], rng.uniform(0, 6, 30)]), keys, values, 0.3)
    seen = ~np.isnan(out)
    assert np.all((out[seen] >= values.min()) & (out[seen] <= values.max()))


@pytest.mark.parametrize("kernel", WINDOW)
def test_empty_windows_follow_the_empty_policy(kernel: str, rng: np.random.Generator) -> None:
    keys = rng.uniform(0, 1, 300)
    values = rng.standard_normal(300)
    queries = np.array([0.5, 5.0, -7.0, 0.9])
    with pytest.raises(NadarayaError, match="2 of 4 queries"):
        sweep(queries, keys, values, kernel, bandwidth=0.1)
    out = sweep(queries, keys, values, kernel, bandwidth=0.1, empty="nan")
    assert np.isnan(out[1]) and np.isnan(out[2]) and np.all(np.isfinite(out[[0, 3]]))
    near = sweep(queries, keys, values, kernel, bandwidth=0.1, empty="nearest")
    dense = nadaraya.smooth(queries, keys, values, kernel, bandwidth=0.1, empty="nearest",
                            engine="dense")
    np.testing.assert_allclose(near, dense, rtol=1e-13, atol=1e-13)
    assert sweep(queries, keys, values, kernel, bandwidth=0.1, normalize=False)[1] == 0.0


@pytest.mark.parametrize("kernel", WINDOW)
def test_float32_support_is_the_dense_engines(kernel: str, rng: np.random.Generator) -> None:
    """In float32 the support is tested on float32 differences, as the dense engine tests
    it, so both see the same keys (to the last key one bandwidth away); the sums are then
    float64 sums of the float32 points, rounded once."""
    skip_without_extended()
    grid = (np.arange(400) * 0.25).astype(np.float32)  # supports end exactly on keys
    values = rng.standard_normal(400).astype(np.float32)
    queries = np.concatenate([grid[::9], rng.uniform(0, 100, 60).astype(np.float32)])
    out = sweep(torch.from_numpy(queries), torch.from_numpy(grid), torch.from_numpy(values),
                kernel, bandwidth=0.5, empty="nan").numpy()
    dense = nadaraya.smooth(torch.from_numpy(queries), torch.from_numpy(grid),
                            torch.from_numpy(values), kernel, bandwidth=0.5, empty="nan",
                            engine="dense").numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(dense))
    uq, uk = prepared(queries, grid, kernel, 0.5, torch.float32)
    ref = extended(kernel, uq, uk, values.astype(np.float64), single=True)["mean"][:, 0]
    seen = ~np.isnan(ref)
    tol = window_tolerance(kernel, extended(kernel, uq, uk, values.astype(np.float64),
                                            single=True))[:, 0] + 2.0**-23 * np.abs(ref)
    assert np.all(np.abs(out[seen] - ref[seen]) <= tol[seen] + 2.0**-23 * 4)
