"""The policy for a query whose visible keys carry no weight: raise, nan, nearest."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine import ENGINES

from ._oracles import skip_unless_runs

# Keys on a line; queries 1 and 3 lie beyond the Epanechnikov support (0.3).
KEYS = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
VALUES = np.array([[1.0, -1.0], [2.0, 5.0], [4.0, 0.5], [8.0, 2.0], [16.0, 3.0]])
QUERIES = np.array([[0.1], [7.5], [2.2], [-3.0], [3.9]])
EMPTY_ROWS = [1, 3]


def _nearest_by_hand(queries: np.ndarray, keys: np.ndarray, values: np.ndarray,
                     visible: np.ndarray | None = None) -> np.ndarray:
    """Mean value of the nearest visible keys (ties averaged)."""
    out = []
    for i, q in enumerate(queries):
        d = np.abs(keys - q).sum(1)
        if visible is not None:
            d = np.where(visible[i], d, np.inf)
        out.append(values[d == d.min()].mean(0))
    return np.array(out)


def _smooth(engine: str, empty: str, **kwargs):  # type: ignore[no-untyped-def]
    args = (QUERIES, KEYS, VALUES, kwargs.pop("kernel", "epanechnikov"), kwargs.pop("mask", None))
    bandwidth = kwargs.pop("bandwidth", 0.3)
    skip_unless_runs(engine, *args, bandwidth=bandwidth)
    return nadaraya.smooth(*args, bandwidth=bandwidth, engine=engine, empty=empty, **kwargs)


@pytest.mark.parametrize("engine", ENGINES)
def test_raise_names_how_many_and_which(engine: str) -> None:
    with pytest.raises(NadarayaError, match=r"2 of 5 queries \(indices 1, 3\).*empty='nan'"):
        _smooth(engine, "raise")


@pytest.mark.parametrize("engine", ENGINES)
def test_raise_is_the_default(engine: str) -> None:
    skip_unless_runs(engine, QUERIES, KEYS, VALUES, "epanechnikov", bandwidth=0.3)
    with pytest.raises(NadarayaError, match="2 of 5 queries"):
        nadaraya.smooth(QUERIES, KEYS, VALUES, "epanechnikov", bandwidth=0.3, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_nan_marks_the_empty_rows_only(engine: str) -> None:
    out = _smooth(engine, "nan")
    assert np.isnan(out[EMPTY_ROWS]).all()
    seen = [0, 2, 4]
    ref = nadaraya.smooth(QUERIES[seen], KEYS, VALUES, "epanechnikov", bandwidth=0.3,
                          engine="dense")
    np.testing.assert_allclose(out[seen], ref, rtol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_nearest_gives_the_nearest_key(engine: str) -> None:
    out = _smooth(engine, "nearest")
    np.testing.assert_array_equal(out[EMPTY_ROWS], VALUES[[4, 0]])
    assert np.isfinite(out).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_nearest_for_composite_compact_kernels(engine: str) -> None:
    for kernel in (K.Epanechnikov(0.3) + K.Uniform(0.2), K.Epanechnikov(0.3) * K.Tricube(0.5)):
        skip_unless_runs(engine, QUERIES, KEYS, VALUES, kernel)
        out = nadaraya.smooth(QUERIES, KEYS, VALUES, kernel, engine=engine, empty="nearest")
        np.testing.assert_array_equal(out[EMPTY_ROWS], VALUES[[4, 0]])


@pytest.mark.parametrize("engine", ENGINES)
def test_nearest_averages_ties(engine: str) -> None:
    queries = np.array([[1.5], [-0.5], [10.0]])
    skip_unless_runs(engine, queries, KEYS, VALUES, "uniform", bandwidth=0.2)
    out = nadaraya.smooth(queries, KEYS, VALUES, "uniform", bandwidth=0.2, engine=engine,
                          empty="nearest")
    np.testing.assert_allclose(out, _nearest_by_hand(queries, KEYS, VALUES), rtol=1e-15)
    np.testing.assert_allclose(out[0], (VALUES[1] + VALUES[2]) / 2, rtol=1e-15)


@pytest.mark.parametrize("engine", ENGINES)
def test_nearest_respects_the_mask(engine: str) -> None:
    visible = np.ones((5, 5), dtype=bool)
    visible[1, 4] = False  # query 1's nearest key is hidden: the next one counts
    visible[3, 0] = visible[3, 1] = False
    out = _smooth(engine, "nearest", mask=visible)
    np.testing.assert_array_equal(out[EMPTY_ROWS], VALUES[[3, 2]])
    np.testing.assert_array_equal(out, np.where(
        np.isin(np.arange(5), EMPTY_ROWS)[:, None],
        _nearest_by_hand(QUERIES, KEYS, VALUES, visible), out))


@pytest.mark.parametrize("engine", ENGINES)
def test_nearest_raises_when_the_mask_hides_every_key(engine: str) -> None:
    visible = np.ones((5, 5), dtype=bool)
    visible[3] = False
    with pytest.raises(NadarayaError, match=r"empty='nearest' cannot help 1 of 5 queries "
                                            r"\(indices 3\).*mask hides every key"):
        _smooth(engine, "nearest", mask=visible)
    out = _smooth(engine, "nan", mask=visible)
    assert np.isnan(out[3]).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_fully_masked_rows_follow_the_policy_for_every_kernel(engine: str) -> None:
    # Causal(offset=-2): queries 0 and 1 see no key, whatever the kernel.
    for kernel, bw in (("gaussian", 1.0), ("softmax", None), ("laplacian", 2.0)):
        mask = M.Causal(offset=-2)
        skip_unless_runs(engine, QUERIES, KEYS, VALUES, kernel, mask, bandwidth=bw)
        with pytest.raises(NadarayaError, match=r"2 of 5 queries \(indices 0, 1\)"):
            nadaraya.smooth(QUERIES, KEYS, VALUES, kernel, mask, bandwidth=bw, engine=engine)
        out = nadaraya.smooth(QUERIES, KEYS, VALUES, kernel, mask, bandwidth=bw, engine=engine,
                              empty="nan")
        assert np.isnan(out[:2]).all() and np.isfinite(out[2:]).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_underflow_is_not_empty(engine: str) -> None:
    # Every Gaussian weight underflows, yet the keys carry weight: no policy applies.
    queries = np.array([[500.0], [-300.0]])
    skip_unless_runs(engine, queries, KEYS, VALUES, "gaussian", bandwidth=0.01)
    out = nadaraya.smooth(queries, KEYS, VALUES, "gaussian", bandwidth=0.01, engine=engine)
    np.testing.assert_allclose(out, VALUES[[4, 0]], rtol=1e-15)


def test_weights_follow_the_policy() -> None:
    with pytest.raises(NadarayaError, match=r"2 of 5 queries \(indices 1, 3\)"):
        nadaraya.weights(QUERIES, KEYS, "epanechnikov", bandwidth=0.3)
    w = nadaraya.weights(QUERIES, KEYS, "epanechnikov", bandwidth=0.3, empty="nan")
    assert np.isnan(w[EMPTY_ROWS]).all() and np.isfinite(w[[0, 2, 4]]).all()
    w = nadaraya.weights(QUERIES, KEYS, "epanechnikov", bandwidth=0.3, empty="nearest")
    np.testing.assert_array_equal(w[EMPTY_ROWS], np.eye(5)[[4, 0]])
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-15)
    tie = nadaraya.weights([[1.5]], KEYS, "uniform", bandwidth=0.2, empty="nearest")
    np.testing.assert_array_equal(tie, [[0.0, 0.5, 0.5, 0.0, 0.0]])
    hidden = np.ones((5, 5), dtype=bool)
    hidden[3] = False
    with pytest.raises(NadarayaError, match="hides every key"):
        nadaraya.weights(QUERIES, KEYS, "epanechnikov", hidden, bandwidth=0.3, empty="nearest")
    with pytest.raises(NadarayaError, match="empty must be one of"):
        nadaraya.weights(QUERIES, KEYS, empty="skip")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weights_of_far_queries_still_sum_to_one(dtype: type) -> None:
    # Keys nearly equidistant from queries far away: log-sums of the weights
    # near -60 (float32) or -600 (float64), whose rounding must not leak into
    # the normalization.
    reach = np.sqrt(120.0 if dtype == np.float32 else 1200.0)
    queries = np.stack([np.linspace(reach, reach + 1, 20), np.zeros(20)], 1).astype(dtype)
    keys = np.stack([np.zeros(11), np.linspace(-1, 1, 11)], 1).astype(dtype)
    w = nadaraya.weights(queries, keys, bandwidth=1.0)
    assert w.dtype == dtype
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=4 * np.finfo(dtype).eps, atol=0)
    q, k = queries.astype(np.float64), keys.astype(np.float64)
    s = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / 2
    expect = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(w, expect / expect.sum(1, keepdims=True),
                               rtol=64 * np.finfo(dtype).eps)
