"""The transform prepared once and evaluated block by block equals the one-block run.

A query's sums and bound depend only on its box and its own coordinates, so
any partition of the queries into blocks gives the same numbers, to the last
bit, as one block of all of them (and the bounds still hold against the exact
sums). The pieces that make the blocks possible are checked on their own:
keys sorted without a permutation, queries counted per box without being
sorted; and the peak memory of a whole call at a million points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya.engine.certified import Sums, _run, block_rows
from nadaraya.engine.fgt import FastGaussTransform, _method, _native
from nadaraya.engine.fgt._basis import Basis
from nadaraya.engine.fgt._boxes import bin_points, count_boxes, sort_keys
from nadaraya.engine.fgt._plan import Params
from nadaraya.engine.fgt._transform import prepare, transform
from nadaraya.masks import LeaveOneOut

from ._exact import check, job_of, requires_native

pytestmark = requires_native

FGT = FastGaussTransform()


def _cloud(rng: np.random.Generator, kind: str, n: int, d: int) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0, 8, (n, d))
    if kind == "clusters":
        centres = rng.uniform(0, 8, (3, d))
        return centres[rng.integers(0, 3, n)] + rng.normal(0, 0.2, (n, d))
    if kind == "duplicates":
        base = rng.uniform(0, 8, (max(1, n // 10), d))
        return base[rng.integers(0, base.shape[0], n)]
    return rng.standard_cauchy((n, d))  # heavy tails: a sparse grid of boxes


def _cat(parts: list[Sums]) -> Sums:
    return Sums(*(torch.cat([getattr(s, f) for s in parts])
                  for f in ("total", "acc", "total_err", "acc_err")))


def _same(a: Sums, b: Sums) -> None:
    for f in ("total", "acc", "total_err", "acc_err"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f


def _plan(basis: str, order: int, d: int) -> Params:
    side, reach = 0.5, 4
    factor = Basis(basis).factor(side, order, d, reach, 400) if order else 0.0
    return Params(side, basis, order, reach, factor, 0.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), kind=st.sampled_from(["uniform", "clusters", "duplicates",
                                                          "heavy"]),
       d=st.integers(1, 2), m=st.integers(1, 300), step=st.integers(1, 120),
       mode=st.sampled_from([None, True, False]),
       basis=st.sampled_from(["hermite", "chebyshev"]))
def test_blocks_equal_one_block_to_the_bit(seed: int, kind: str, d: int, m: int, step: int,
                                           mode: bool | None, basis: str) -> None:
    rng = np.random.default_rng(seed)
    keys, queries = _cloud(rng, kind, 200, d), _cloud(rng, kind, m, d)
    q, k = torch.from_numpy(queries), torch.from_numpy(keys)
    v = torch.from_numpy(rng.uniform(-1, 1, (200, 2)))
    plan = _plan(basis, 6, d)
    whole = transform(q, k, v, plan, mode).sums
    ready = prepare(q, k, v, plan, mode, rows=max(1, step // 2))
    blocks = _cat([ready.evaluate(q[a:a + step].contiguous()) for a in range(0, m, step)])
    _same(blocks, whole)
    check(blocks, q, k, v)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), step=st.integers(1, 200), h=st.sampled_from([0.05, 0.3]))
def test_smooth_in_small_blocks_equals_one_block(seed: int, step: int, h: float) -> None:
    """Through ``smooth``: blocks of a few queries change no bit of the result."""
    rng = np.random.default_rng(seed)
    x, q = rng.uniform(0, 6, 700), rng.uniform(-0.5, 6.5, 500)
    y = np.stack([np.sin(x), np.zeros_like(x), x], 1)
    want = nadaraya.smooth(q, x, y, bandwidth=h, tolerance=1e-9, engine="fgt")
    with _blocks_of(step):
        got = nadaraya.smooth(q, x, y, bandwidth=h, tolerance=1e-9, engine="fgt")
    np.testing.assert_array_equal(got, want)


@contextmanager
def _blocks_of(rows: int) -> Iterator[None]:
    """Certified runs in blocks of ``rows`` queries (``working_memory`` sets them, and the
    plan too: this changes the blocks only)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_run, "block_rows", lambda job: rows)
        mp.setattr(_method, "block_rows", lambda job: rows)
        yield


def test_block_rows_follow_the_working_memory() -> None:
    job = job_of(np.zeros((10, 1)), np.zeros((10, 1)), np.zeros((10, 1)))
    with nadaraya.config_context(working_memory=8):
        small = block_rows(job)
    with nadaraya.config_context(working_memory=64):
        large = block_rows(job)
    assert 1 <= small < large
    assert large == pytest.approx(8 * small, rel=1e-2)


@pytest.mark.parametrize("options", [{"return_lse": True}, {"normalize": False},
                                     {"mask": LeaveOneOut()}])
def test_small_blocks_with_lse_sums_and_leave_one_out(options: dict,
                                                      rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, 600)
    y = np.sin(x) + 0.1 * rng.standard_normal(600)
    q = x if "mask" in options else rng.uniform(0, 6, 400)
    want = nadaraya.smooth(q, x, y, bandwidth=0.2, tolerance=1e-9, engine="fgt", **options)
    with _blocks_of(23):
        got = nadaraya.smooth(q, x, y, bandwidth=0.2, tolerance=1e-9, engine="fgt", **options)
    exact = nadaraya.smooth(q, x, y, bandwidth=0.2, **options)
    for a, b, c in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want, exact)),
                       strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=0, atol=1e-8 * max(1.0, float(np.abs(c).max())))


def test_method_sums_equal_its_blocks(rng: np.random.Generator) -> None:
    job = job_of(rng.uniform(0, 5, (300, 2)), rng.uniform(0, 5, (400, 2)),
                 rng.standard_normal((400, 1)), 0.4)
    whole = FGT.sums(job, 1e-8)
    ready = FGT.prepare(job, 1e-8)
    _same(_cat([ready.evaluate(slice(a, a + 37)) for a in range(0, 300, 37)]), whole)


@pytest.mark.parametrize("kind", ["uniform", "duplicates", "heavy"])
@pytest.mark.parametrize("d", [1, 3])
def test_keys_sorted_without_a_permutation_as_with_one(kind: str, d: int,
                                                       rng: np.random.Generator) -> None:
    """Both ways to sort keys (scatter on a dense grid, lexicographic sort on a sparse one)."""
    k = torch.from_numpy(_cloud(rng, kind, 500, d))
    v = torch.from_numpy(rng.standard_normal((500, 2)))
    boxes, got = sort_keys(k, v, 0.5)
    ref = bin_points(k, 0.5)
    want = _native.gather(ref.start, ref.order, k, v)
    assert torch.equal(boxes.coords, ref.coords) and torch.equal(boxes.start, ref.start)
    for name in ("points_t", "values_t", "mass"):
        assert torch.equal(got[name], want[name]), name


@pytest.mark.parametrize("kind", ["uniform", "heavy"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_queries_counted_per_box_in_blocks(kind: str, dtype: torch.dtype,
                                           rng: np.random.Generator) -> None:
    q = torch.from_numpy(_cloud(rng, kind, 700, 2)).to(dtype)
    got = count_boxes(q, 0.5, 64)
    ref = bin_points(q.double().contiguous(), 0.5)
    assert torch.equal(got.coords, ref.coords)
    assert torch.equal(got.count, ref.count)


_PEAK = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import nadaraya

    n = int(sys.argv[1])
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 6, n); y = 2 * np.sin(x) + rng.normal(size=n); q = rng.uniform(0, 6, n)
    with nadaraya.config_context(working_memory=64):
        nadaraya.smooth(q[:2000], x[:2000], y[:2000], bandwidth=0.03, tolerance=1e-10)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        nadaraya.smooth(q, x, y, bandwidth=0.03, tolerance=1e-10)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mib": (peak - base) / 1024}))
""")


@pytest.mark.slow
def test_peak_memory_a_few_arrays_of_the_inputs_size() -> None:
    """n = m = 1e6: the call holds the job's three arrays, the result and the sorted keys.

    It held twelve arrays of the inputs' size (91 MiB) when every stage ran on all
    queries at once.
    """
    n = 10**6
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(n)], capture_output=True,
                          text=True, env=env, timeout=600, check=True)
    mib = float(json.loads(proc.stdout.strip().splitlines()[-1])["mib"])
    assert mib <= 6 * 8 * n / 2**20
