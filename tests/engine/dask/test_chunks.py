"""Chunkings that split anywhere give the in-memory result (hypothesis)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya import masks as M

from .conftest import as_dask, compute


@st.composite
def chunkings(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    """Row chunks of ``n`` rows: one per row, one chunk, or uneven cuts."""
    kind = draw(st.sampled_from(["rows", "single", "uneven"]))
    if kind == "rows":
        return (1,) * n
    if kind == "single":
        return (n,)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1)))
    edges = [0, *cuts, n]
    return tuple(b - a for a, b in itertools.pairwise(edges))


@given(data=st.data(), m=st.integers(1, 12), n=st.integers(2, 20),
       mask=st.sampled_from([None, "leave-one-out", "causal", "window"]),
       seed=st.integers(0, 2**16))
def test_any_chunking_equals_memory(data: st.DataObject, m: int, n: int, mask: str | None,
                                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    if mask is not None:
        m = n
    k = rng.uniform(-2, 2, (n, 2))
    q = k.copy() if mask is not None else rng.uniform(-2, 2, (m, 2))
    v = rng.normal(size=(n, 2))
    masks = {"leave-one-out": M.LeaveOneOut(), "causal": M.Causal(), "window": M.Window(2)}
    chosen = masks.get(mask) if mask is not None else None
    qc = data.draw(chunkings(m) if m > 1 else st.just((1,)), label="query chunks")
    kc = data.draw(chunkings(n), label="key chunks")
    vc = data.draw(chunkings(n), label="value chunks")
    got = compute(nadaraya.smooth(as_dask(q, qc), as_dask(k, kc), as_dask(v, vc), mask=chosen,
                                  bandwidth=0.7, empty="nan", return_lse=True))
    want = nadaraya.smooth(q, k, v, mask=chosen, bandwidth=0.7, empty="nan", return_lse=True,
                           engine="dense")
    # the values' error scales with the largest value; the lse's (a logarithm: c + log t)
    # with the scores it is formed from, which are of order one here however small it is
    for g, w, unit in zip(got, want, (np.abs(v).max(), 1.0), strict=True):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(np.nan_to_num(g, neginf=0), np.nan_to_num(w, neginf=0),
                                   rtol=1e-12, atol=1e-12 * unit)
