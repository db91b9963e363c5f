"""Invariants of the operator, on random shapes (hypothesis)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import masks as M
from nadaraya.engine import SmoothState

from ._oracles import EPS32, FLOAT32_FACTOR, dense64, examples, rel_err, runnable_engines

SETTINGS = settings(max_examples=examples(25), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

KERNELS = ["gaussian", "laplacian", "cauchy", "epanechnikov", "tricube", "uniform", "softmax"]


class Problem:
    """A random problem; the mask is drawn as a kind and built for the data."""

    def __init__(self, m: int, n: int, d: int, p: int, seed: int, kernel: str, mask: str,
                 width: float) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.keys = rng.standard_normal((n, d))
        self.queries = self.keys[rng.integers(0, n, m)] + 0.3 * rng.standard_normal((m, d))
        self.values = rng.standard_normal((n, p))
        self.kernel = kernel
        self.bandwidth = None if kernel == "softmax" else width * math.sqrt(d)
        self.mask_kind = mask
        self.visible = None
        if mask == "matrix":
            self.visible = rng.random((m, n)) < 0.6
        elif mask == "causal":
            offset = int(rng.integers(-2, 3))
            self.visible = np.arange(n)[None, :] <= np.arange(m)[:, None] + offset
        elif mask == "knearest":
            self.k = int(rng.integers(1, n + 2))

    def mask(self, rows: Any = slice(None), cols: Any = slice(None)) -> Any:
        """The mask restricted to some queries and keys (a matrix, or KNearest)."""
        if self.mask_kind == "knearest":
            return M.KNearest(self.k) if cols == slice(None) else None
        if self.visible is None:
            return None
        return self.visible[rows][:, cols]

    def args(self) -> tuple[Any, ...]:
        return self.queries, self.keys, self.values, self.kernel, self.mask()


@st.composite
def problems(draw: st.DrawFn, masks: tuple[str, ...] = ("none", "matrix", "causal",
                                                          "knearest")) -> Problem:
    return Problem(
        m=draw(st.integers(1, 12)),
        n=draw(st.integers(1, 12)),
        d=draw(st.sampled_from([1, 2, 3, 5, 8, 16, 64])),
        p=draw(st.integers(1, 8)),
        seed=draw(st.integers(0, 2**32 - 1)),
        kernel=draw(st.sampled_from(KERNELS)),
        mask=draw(st.sampled_from(masks)),
        width=draw(st.sampled_from([0.3, 1.0, 3.0])),
    )


@SETTINGS
@given(problems(), st.sampled_from(["float64", "float32"]))
@example(Problem(1, 1, 64, 8, 0, "gaussian", "none", 1.0), "float32")
@example(Problem(1, 9, 64, 1, 1, "softmax", "knearest", 1.0), "float64")
@example(Problem(9, 1, 2, 8, 2, "epanechnikov", "causal", 3.0), "float64")
def test_every_engine_matches_dense_float64(pb: Problem, dtype: str) -> None:
    q, k, v = (a.astype(dtype) for a in (pb.queries, pb.keys, pb.values))
    mask = pb.mask()
    ref = dense64(q, k, v, pb.kernel, mask, bandwidth=pb.bandwidth, empty="nan")
    dense = nadaraya.smooth(q, k, v, pb.kernel, mask, bandwidth=pb.bandwidth, engine="dense",
                            empty="nan")
    bound = 1e-12 if dtype == "float64" else FLOAT32_FACTOR * max(rel_err(dense, ref), EPS32)
    for engine in runnable_engines(q, k, v, pb.kernel, mask, bandwidth=pb.bandwidth):
        out = nadaraya.smooth(q, k, v, pb.kernel, mask, bandwidth=pb.bandwidth, engine=engine,
                              empty="nan")
        assert out.dtype == np.dtype(dtype)
        assert rel_err(out, ref) <= bound, engine


@SETTINGS
@given(problems(masks=("none", "matrix", "knearest")))
def test_permuting_keys_changes_nothing(pb: Problem) -> None:
    perm = pb.rng.permutation(len(pb.keys))
    mask = pb.mask()
    permuted = mask[:, perm] if isinstance(mask, np.ndarray) else mask
    ref = dense64(*pb.args(), bandwidth=pb.bandwidth, empty="nan")
    for engine in runnable_engines(*pb.args(), bandwidth=pb.bandwidth):
        out = nadaraya.smooth(pb.queries, pb.keys[perm], pb.values[perm], pb.kernel, permuted,
                              bandwidth=pb.bandwidth, engine=engine, empty="nan")
        assert rel_err(out, ref) <= 1e-12, engine


@SETTINGS
@given(problems(), st.one_of(st.just(0.0), st.floats(1e-8, 1e3), st.floats(-1e3, -1e-8)))
def test_constant_values_give_the_constant(pb: Problem, c: float) -> None:
    values = np.full((len(pb.keys), 2), c)
    args = (pb.queries, pb.keys, values, pb.kernel, pb.mask())
    for engine in runnable_engines(*args, bandwidth=pb.bandwidth):
        out = nadaraya.smooth(*args, bandwidth=pb.bandwidth, engine=engine, empty="nan")
        rows = ~np.isnan(out[:, 0])
        np.testing.assert_allclose(out[rows], c, rtol=1e-13, atol=0, err_msg=engine)


@SETTINGS
@given(problems())
def test_weight_rows_are_a_distribution(pb: Problem) -> None:
    w = nadaraya.weights(pb.queries, pb.keys, pb.kernel, pb.mask(), bandwidth=pb.bandwidth,
                         empty="nan")
    assert w.shape == (len(pb.queries), len(pb.keys))
    rows = ~np.isnan(w).any(axis=1)
    assert (w[rows] >= 0).all()
    np.testing.assert_allclose(w[rows].sum(axis=1), 1.0, rtol=1e-13)
    if isinstance(pb.mask(), np.ndarray):
        assert (w[rows][~pb.mask()[rows]] == 0).all()
    # The weights reproduce smooth.
    out = dense64(*pb.args(), bandwidth=pb.bandwidth, empty="nan")
    np.testing.assert_allclose(w[rows] @ pb.values, out[rows], rtol=1e-12, atol=1e-12)


def _state(out: np.ndarray, lse: np.ndarray) -> SmoothState:
    """A partial result and its lse as a state (a query with no weight: total 0)."""
    seen = np.isfinite(lse)
    return SmoothState(torch.from_numpy(lse), torch.from_numpy(seen.astype(float)),
                       torch.from_numpy(np.where(seen[:, None], out, 0.0)))


@SETTINGS
@given(problems(masks=("none", "matrix", "causal")))
def test_merging_two_halves_gives_the_whole(pb: Problem) -> None:
    n = len(pb.keys)
    side = pb.rng.random(n) < 0.5
    whole, lse = nadaraya.smooth(*pb.args(), bandwidth=pb.bandwidth, engine="dense",
                                 empty="nan", return_lse=True)
    states = []
    for part in (side, ~side):
        if not part.any():
            states.append(SmoothState.empty(len(pb.queries), pb.values.shape[1],
                                            dtype=torch.float64, device=torch.device("cpu")))
            continue
        idx = np.flatnonzero(part)
        args = (pb.queries, pb.keys[idx], pb.values[idx], pb.kernel, pb.mask(cols=idx))
        engines = runnable_engines(*args, bandwidth=pb.bandwidth)
        engine = engines[int(pb.rng.integers(0, len(engines)))]
        out, part_lse = nadaraya.smooth(*args, bandwidth=pb.bandwidth, engine=engine,
                                        empty="nan", return_lse=True)
        states.append(_state(out, part_lse))
    merged = states[0].merge(states[1])
    assert rel_err(merged.mean().numpy(), whole) <= 1e-12
    np.testing.assert_allclose(merged.lse.numpy(), lse, rtol=1e-12, atol=1e-12)


_offsets = st.one_of(st.just(-math.inf), st.floats(-800, 800))


@st.composite
def states(draw: st.DrawFn, m: int = 4, p: int = 2) -> SmoothState:
    rows = []
    for _ in range(m):
        offset = draw(_offsets)
        total = 0.0 if offset == -math.inf else draw(st.floats(0.1, 100.0))
        acc = [0.0 if offset == -math.inf else draw(st.floats(-100.0, 100.0))
               for _ in range(p)]
        rows.append((offset, total, acc))
    return SmoothState(torch.tensor([r[0] for r in rows], dtype=torch.float64),
                       torch.tensor([r[1] for r in rows], dtype=torch.float64),
                       torch.tensor([r[2] for r in rows], dtype=torch.float64))


def _same(a: SmoothState, b: SmoothState) -> None:
    np.testing.assert_allclose(a.lse.numpy(), b.lse.numpy(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a.mean().numpy(), b.mean().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a.empty_rows.numpy(), b.empty_rows.numpy())


@settings(max_examples=examples(50), deadline=None)
@given(states(), states(), states())
def test_merge_is_a_commutative_monoid(a: SmoothState, b: SmoothState, c: SmoothState) -> None:
    _same(a.merge(b), b.merge(a))
    _same(a.merge(b).merge(c), a.merge(b.merge(c)))
    empty = SmoothState.empty(4, 2, dtype=torch.float64, device=torch.device("cpu"))
    for s in (a, empty.merge(a), a.merge(empty)):
        _same(s, a)
    # The merged mean is the weighted mean of the parts.
    both = a.merge(b)
    wa = torch.exp(a.lse - both.lse).nan_to_num(0.0)
    wb = torch.exp(b.lse - both.lse).nan_to_num(0.0)
    seen = ~both.empty_rows
    expect = (wa[:, None] * a.mean().nan_to_num(0.0) + wb[:, None] * b.mean().nan_to_num(0.0))
    np.testing.assert_allclose(both.mean()[seen].numpy(), expect[seen].numpy(), rtol=1e-12,
                               atol=1e-12)
