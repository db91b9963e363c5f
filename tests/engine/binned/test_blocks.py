"""Binning prepared once, queries evaluated block by block; keys binned block by block.

A query's interpolated sums and bound read the node sums and its own
position only, so any blocks of queries give the one-block bits. Keys binned
a block at a time sum the same products per node in another order: the
masses agree to rounding and every bound still holds against the exact sums.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya.engine.binned import BinnedMethod
from nadaraya.engine.binned import _method as binned_method
from nadaraya.engine.binned._transform import _library, bin_keys
from nadaraya.engine.certified import Sums

from ._problems import KERNELS, LAYOUTS, check_bounds, layout, make_job

METHOD = BinnedMethod()


def _cat(parts: list[Sums]) -> Sums:
    return Sums(*(torch.cat([getattr(s, f) for s in parts])
                  for f in ("total", "acc", "total_err", "acc_err")))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), kernel=st.sampled_from(KERNELS),
       kind=st.sampled_from(LAYOUTS), d=st.integers(1, 2), step=st.integers(1, 90),
       keys_at_once=st.integers(40, 300))
def test_blocks_equal_one_block_and_keep_their_bounds(seed: int, kernel: str, kind: str,
                                                      d: int, step: int,
                                                      keys_at_once: int) -> None:
    rng = np.random.default_rng(seed)
    keys = layout(kind, 300, d, rng)
    queries = np.r_[layout("uniform", 120, d, rng) * 1.4 - 0.2, np.full((1, d), 9.0)]
    job = make_job(queries, keys, rng.standard_normal((keys.shape[0], 2)), kernel, 0.1)
    why = METHOD.refuse(job, 1e-3)
    if why is not None:  # spread-out keys can need a grid too large (or too slow) to pay
        assert why.startswith("the grid for tolerance"), why
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(binned_method, "block_rows", lambda job: keys_at_once)
        ready = METHOD.prepare(job, 1e-3)
        whole = METHOD.sums(job, 1e-3)
    m = queries.shape[0]
    blocks = _cat([ready.evaluate(slice(a, a + step)) for a in range(0, m, step)])
    for f in ("total", "acc", "total_err", "acc_err"):
        assert torch.equal(getattr(blocks, f), getattr(whole, f)), f
    check_bounds(job, kernel, blocks)


def test_keys_binned_in_blocks_match_to_rounding(rng: np.random.Generator) -> None:
    job = make_job(rng.uniform(0, 1, 50), rng.uniform(0, 1, 2000),
                   rng.standard_normal((2000, 3)), "gaussian", 0.05)
    grid = METHOD._grid(job, 1e-4)
    keys, values = job.kernel.k.double(), job.values.double()
    whole, crowd = bin_keys(grid, keys, values, compiled=False)
    parts, crowd_parts = bin_keys(grid, keys, values, rows=77, compiled=False)
    assert crowd_parts == crowd
    torch.testing.assert_close(parts, whole, rtol=0, atol=1e-12 * float(whole.abs().max()))


@pytest.mark.parametrize("p", [0, 1, 3])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "edges"])
def test_compiled_binning_is_the_tensor_binning(rng: np.random.Generator, p: int,
                                               kind: str) -> None:
    # the same sums in the same order: bit for bit, keys on nodes and beyond them included
    keys = {"uniform": rng.uniform(0, 1, 3000),
            "clustered": np.r_[rng.normal(0.3, 1e-3, 2000), rng.uniform(0, 1, 500)],
            "edges": np.r_[np.zeros(50), np.ones(50), np.linspace(0, 1, 101)]}[kind]
    job = make_job(rng.uniform(0, 1, 20), keys, rng.standard_normal((keys.size, p)) * 1e3,
                   "gaussian", 0.05)
    grid = METHOD._grid(job, 1e-4)
    k, v = job.kernel.k.double(), job.values.double()
    beyond = torch.cat([k, torch.tensor([[float(grid.origin[0]) - 3.0],
                                         [float(grid.origin[0]) + 1e6]], dtype=torch.float64)])
    vb = torch.cat([v, torch.ones(2, p, dtype=torch.float64)])
    if _library() is None:
        pytest.skip("no compiled code on this machine (NADARAYA_NATIVE=0 or no compiler)")
    for points, vals in ((k, v), (beyond, vb)):
        c_masses, c_crowd = bin_keys(grid, points, vals)
        n_masses, n_crowd = bin_keys(grid, points, vals, compiled=False)
        assert torch.equal(c_masses, n_masses)
        assert c_crowd == n_crowd


def test_smooth_forced_binned_in_small_blocks(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, 3000)
    y = np.sin(x) + 0.1 * rng.standard_normal(3000)
    q = rng.uniform(0, 6, 1000)
    want = nadaraya.smooth(q, x, y, bandwidth=0.2, tolerance=1e-4, engine="binned")
    with pytest.MonkeyPatch.context() as mp:
        from nadaraya.engine.certified import _run

        mp.setattr(_run, "block_rows", lambda job: 33)
        got = nadaraya.smooth(q, x, y, bandwidth=0.2, tolerance=1e-4, engine="binned")
    np.testing.assert_array_equal(got, want)
    exact = nadaraya.smooth(q, x, y, bandwidth=0.2)
    assert np.abs(got - exact).max() <= 1e-4 * np.abs(y).max()
