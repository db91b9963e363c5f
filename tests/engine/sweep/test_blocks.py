"""The sweeps in bounded memory: groups, blocks, chunks and orders against the dense engine.

The engine reads keys and queries through their sorted orders, a group of
points at a time, and writes every result straight to its query's row. Here
the group size, the keys per block, the queries per chunk, the insertion
leaf of the sort and the fronts' stride are forced small, so problems of a
few hundred points cross many of each boundary; and the orders are forced to
int64. Each result is compared with the float64 dense engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine._scale import scale_values
from nadaraya.engine._state import MeanState, SmoothState
from nadaraya.engine.sweep import SweepEngine, _exp, _order, _window
from nadaraya.engine.sweep._order import Groups, sort_order

from ._helpers import EXP, WINDOW, any_size, need_native, patched, sweep

KERNELS = [*EXP, *WINDOW]

# (name, make(rng) -> queries, keys, values)
Problem = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _random(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return rng.uniform(0, 6, 410), rng.uniform(0, 6, 530), rng.standard_normal(530)


def _duplicate_keys(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.repeat(rng.uniform(0, 6, 60), rng.integers(1, 15, 60))
    rng.shuffle(keys)
    queries = np.concatenate([rng.uniform(0, 6, 200), keys[:50]])
    return queries, keys, rng.standard_normal(keys.size)


def _outside(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = rng.uniform(2, 4, 400)
    queries = np.concatenate([rng.uniform(-3, 9, 300), [-40.0, 50.0, 2.0, 4.0]])
    return queries, keys, rng.standard_normal(400)


def _clusters(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.concatenate([rng.normal(1, 1e-3, 250), rng.normal(5, 0.2, 150),
                           rng.uniform(0, 6, 40)])
    queries = np.concatenate([rng.normal(1, 2e-3, 200), rng.normal(5, 0.3, 100)])
    rng.shuffle(keys)
    return queries, keys, rng.standard_normal(keys.size)


def _queries_are_keys(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.concatenate([rng.uniform(0, 6, 450), np.full(40, 3.0)])
    rng.shuffle(keys)
    return keys, keys, rng.standard_normal(keys.size)


def _sorted(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.sort(np.repeat(rng.uniform(0, 6, 150), 3))  # ties across group boundaries
    return np.sort(rng.uniform(-1, 7, 333)), keys, rng.standard_normal(keys.size)


def _reversed(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = np.sort(rng.uniform(0, 6, 480))[::-1].copy()
    return np.sort(rng.uniform(0, 6, 260))[::-1].copy(), keys, rng.standard_normal(480)


def _one_query(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([2.5]), rng.uniform(0, 6, 500), rng.standard_normal(500)


def _many_columns(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = rng.uniform(0, 6, 350)
    values = rng.standard_normal((350, 3)) * np.array([1.0, 1e-8, 1e6])
    return rng.uniform(0, 6, 700), keys, values


PROBLEMS: dict[str, Problem] = {
    "random": _random, "duplicate keys": _duplicate_keys, "queries outside": _outside,
    "clusters": _clusters, "queries are keys": _queries_are_keys, "sorted": _sorted,
    "reverse sorted": _reversed, "one query": _one_query, "three columns": _many_columns,
}


@contextlib.contextmanager
def small_pieces(wide: bool = False) -> Iterator[None]:
    """Groups of 37 points, blocks of about sqrt(n) keys, chunks of 3 queries, buckets of 2
    points sorted by insertion, fronts kept at every 3rd key; int64 orders if ``wide``."""
    with contextlib.ExitStack() as stack:
        for module, name, value in [(_order, "GROUP", 37), (_exp, "MIN_BLOCK", 1),
                                    (_exp, "QUERY_CHUNK", 3), (_order, "LEAF", 2),
                                    (_window, "_MIN_STRIDE", 3),
                                    (_order, "INT32_POINTS", 0 if wide else 2**31)]:
            stack.enter_context(patched(module, name, value))
        yield


def _bandwidth(kernel: str) -> float:
    return 0.2 if kernel in EXP else 0.4


def _compare(out: np.ndarray, ref: np.ndarray, values: np.ndarray, rel: float) -> None:
    out, ref = out.reshape(len(ref), -1), ref.reshape(len(ref), -1)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    scale = np.abs(values.reshape(-1, out.shape[1])).max(axis=0)
    seen = ~np.isnan(ref)
    err = np.abs(out - ref)[seen]
    assert np.all(err <= (rel * np.broadcast_to(scale, out.shape))[seen]), err.max()


@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("kernel", KERNELS)
def test_small_pieces_match_dense(kernel: str, problem: str,
                                  rng: np.random.Generator) -> None:
    queries, keys, values = PROBLEMS[problem](rng)
    h = _bandwidth(kernel)
    ref = nadaraya.smooth(queries, keys, values, kernel, bandwidth=h, engine="dense",
                          empty="nan")
    with small_pieces():
        out = sweep(queries, keys, values, kernel, bandwidth=h, empty="nan")
    _compare(out, ref, values, 1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_int64_orders_match_int32(kernel: str, rng: np.random.Generator) -> None:
    """Orders with int64 entries (past 2^31 points) give the int32 orders' results."""
    queries, keys, values = _clusters(rng)
    h = _bandwidth(kernel)
    with small_pieces():
        narrow = sweep(queries, keys, values, kernel, bandwidth=h, empty="nan")
    with small_pieces(wide=True):
        wide = sweep(queries, keys, values, kernel, bandwidth=h, empty="nan")
    np.testing.assert_array_equal(wide, narrow)


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_small_pieces_match_dense(kernel: str, rng: np.random.Generator) -> None:
    """A float32 job: its state in float32, within float32 rounding of the dense engine in
    the same dtype (whose support test, for the compact kernels, is the same)."""
    queries, keys, values = (torch.as_tensor(x, dtype=torch.float32) for x in _random(rng))
    h = _bandwidth(kernel)
    ref = nadaraya.smooth(queries, keys, values, kernel, bandwidth=h, engine="dense",
                          empty="nan")
    with small_pieces():
        out = sweep(queries, keys, values, kernel, bandwidth=h, empty="nan")
    assert out.dtype == torch.float32
    _compare(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), values.numpy(),
             2e-5)


@pytest.mark.parametrize("kernel", ["laplacian", "matern32", "epanechnikov", "uniform"])
def test_unnormalized_sums_and_lse_match_dense(kernel: str, rng: np.random.Generator) -> None:
    queries, keys, values = _duplicate_keys(rng)
    h = _bandwidth(kernel)
    kw = {"bandwidth": h, "normalize": False}
    ref = nadaraya.smooth(queries, keys, values, kernel, engine="dense", **kw)
    _, lse_ref = nadaraya.smooth(queries, keys, values, kernel, engine="dense", empty="nan",
                                 return_lse=True, bandwidth=h)
    with small_pieces():
        out = sweep(queries, keys, values, kernel, **kw)
        _, lse = sweep(queries, keys, values, kernel, empty="nan", return_lse=True,
                       bandwidth=h)
    np.testing.assert_allclose(out, ref, rtol=1e-11, atol=1e-11 * np.abs(ref).max())
    seen = np.isfinite(lse_ref)
    np.testing.assert_array_equal(np.isfinite(lse), seen)
    np.testing.assert_allclose(lse[seen], lse_ref[seen], rtol=0, atol=1e-11)


@pytest.mark.parametrize("kernel", ["laplacian", "matern52", "tricube"])
def test_state_keeps_log_sums_and_merges(kernel: str, rng: np.random.Generator) -> None:
    """The state holds the log-sums, total 1 and the means; the states of two halves of the
    keys merge into the state of all of them (as the Dask engine merges key chunks)."""
    need_native()
    queries, keys = rng.uniform(0, 6, 410), rng.uniform(0, 6, 530)
    values = rng.uniform(-0.99, 0.99, 530)  # within [1/2, 1) at most: no scaling by 2^-e

    def state(rows: np.ndarray | slice) -> SmoothState:
        job, _ = build_job(queries, keys[rows], values[rows], kernel, None,
                           _bandwidth(kernel))
        scale_values(job)
        with any_size(), small_pieces():
            return SweepEngine().run(job)

    whole = state(slice(None))
    assert isinstance(whole, MeanState) and whole.keeps_offset
    assert whole.offset.shape == (410,) and whole.acc.shape == (410, 1)
    dense, lse = nadaraya.smooth(queries, keys, values, kernel, bandwidth=_bandwidth(kernel),
                                 engine="dense", empty="nan", return_lse=True)
    seen = np.isfinite(lse)
    np.testing.assert_array_equal((whole.total > 0).numpy(), seen)
    np.testing.assert_allclose(whole.mean()[seen, 0].numpy(), dense[seen], atol=1e-12)
    np.testing.assert_allclose(whole.lse[seen].numpy(), lse[seen], atol=1e-11)
    halves = rng.permutation(530)
    merged = state(halves[:265]).merge(state(halves[265:]))
    np.testing.assert_allclose(merged.lse[seen].numpy(), lse[seen], atol=1e-11)
    np.testing.assert_allclose(merged.mean()[seen, 0].numpy(), dense[seen], atol=1e-12)


def test_state_without_log_sums_refuses_to_merge() -> None:
    state = MeanState(torch.zeros(()).expand(3), torch.ones(3), torch.zeros(3, 1),
                      keeps_offset=False)
    with pytest.raises(TypeError, match="keeps_offset=False"):
        state.merge(state)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("leaf", [1, 2, 32])
def test_groups_sort_every_point_once(wide: bool, leaf: int, rng: np.random.Generator) -> None:
    """The groups' orders, one after another, are a stable argsort of the points (buckets
    sorted by insertion, by buckets again or by the radix sort alike)."""
    need_native()
    x = np.concatenate([rng.standard_normal(400) * 10.0 ** rng.integers(-30, 30, 400),
                        np.repeat(rng.uniform(-1, 1, 30), 20), 2.0 ** -np.arange(60.0)])
    rng.shuffle(x)
    with patched(_order, "LEAF", leaf):
        for size in (1, 37, 5000):
            groups = Groups(x, wide, size)
            parts = [groups.order(g) for g in range(len(groups))]
            assert all(p.dtype == (np.int64 if wide else np.int32) for p in parts)
            order = np.concatenate(parts)
            np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))
        whole = sort_order(x, wide)
        assert whole is not None
        np.testing.assert_array_equal(whole, np.argsort(x, kind="stable"))
    ordered = np.sort(x)
    groups = Groups(ordered, wide, 37)  # sorted points: consecutive runs, no sort
    order = np.concatenate([groups.order(g) for g in range(len(groups))])
    np.testing.assert_array_equal(order, np.arange(x.size))
