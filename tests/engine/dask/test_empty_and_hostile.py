"""Empty queries (the empty= policies) and hostile inputs on the Dask engine."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError
from nadaraya import masks as M

from .conftest import as_dask, compute, da


def _problem(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compact kernel: queries 40..44 lie far from every key (no weight)."""
    k = np.sort(rng.uniform(0, 4, 60))
    q = np.concatenate([rng.uniform(0, 4, 40), [9.0, 9.5, 10.0, 10.5, 11.0]])
    v = np.stack([np.cos(k), k], axis=1)
    return q, k, v


def test_raise_names_the_empty_queries_by_global_index_at_compute_time(rng) -> None:
    q, k, v = _problem(rng)
    out = nadaraya.smooth(as_dask(q, 7), as_dask(k, 13), v, "epanechnikov", bandwidth=0.3)
    with pytest.raises(NadarayaError, match=r"query chunk of rows (35\.\.41: 2 of 45 queries \(ind"
                                            r"ices 40, 41|42\.\.44: 3 of 45 queries \(indices 42,"
                                            r" 43, 44)\) see no key"):
        compute(out)


def test_nan_policy_matches_memory(rng) -> None:
    q, k, v = _problem(rng)
    got = compute(nadaraya.smooth(as_dask(q, 7), as_dask(k, 13), v, "epanechnikov",
                                  bandwidth=0.3, empty="nan"))
    want = nadaraya.smooth(q, k, v, "epanechnikov", bandwidth=0.3, empty="nan", engine="dense")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[40:]).all()
    np.testing.assert_allclose(got[:40], want[:40], rtol=1e-12)


@pytest.mark.parametrize("chunks", [7, 45])
def test_nearest_policy_reduces_over_key_chunks(rng, chunks) -> None:
    q, k, v = _problem(rng)
    k[30] = k[31]  # a tie, in two key chunks
    got = compute(nadaraya.smooth(as_dask(q, chunks), as_dask(k, 13), as_dask(v, 13),
                                  "epanechnikov", bandwidth=0.3, empty="nearest"))
    want = nadaraya.smooth(q, k, v, "epanechnikov", bandwidth=0.3, empty="nearest",
                           engine="dense")
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_nearest_with_a_mask_hiding_everything_names_the_queries(rng) -> None:
    _q, k, v = _problem(rng)
    x = as_dask(k, 13)
    out = nadaraya.smooth(x, x, as_dask(v, 13), "epanechnikov", bandwidth=0.3,
                          mask=M.Causal(offset=-1), empty="nearest")
    with pytest.raises(NadarayaError, match=r"cannot help, in the query chunk of rows "
                                            r"0\.\.12: 1 of 60 queries \(indices 0\)"):
        compute(out)


def test_unknown_chunk_sizes_are_refused_with_the_fix(rng) -> None:
    k = rng.uniform(size=20)
    lazy = as_dask(k, 5)
    unknown = lazy[lazy > 0.5]
    with pytest.raises(NadarayaError, match=r"keys is a Dask array with unknown chunk sizes.*"
                                            r"compute_chunk_sizes"):
        nadaraya.smooth(k, unknown, np.ones(20))


def test_nan_in_keys_or_values_fails_as_in_memory(rng) -> None:
    k = rng.uniform(size=20)
    v = np.ones(20)
    k[13] = np.nan
    q = np.ones(3)
    with pytest.raises(NadarayaError, match=r"keys contains NaN .* \(rows 13\)"):
        nadaraya.smooth(q, k, v)
    with pytest.raises(NadarayaError, match=r"keys contains NaN .* \(rows 3\).* key rows 10\.\.14"):
        compute(nadaraya.smooth(q, as_dask(k, 5), v))
    v[3] = np.nan
    with pytest.raises(NadarayaError, match="values"):
        compute(nadaraya.smooth(np.ones(3), as_dask(np.ones(20), 5), as_dask(v, 5)))


@pytest.mark.parametrize("bad, match", [
    (np.zeros((0, 1)), r"keys is empty"),
    (np.float64(1.0), r"keys must be 1-D \(n,\) or 2-D"),
    (np.zeros((2, 2, 2)), r"keys must be 1-D \(n,\) or 2-D"),
])
def test_empty_and_misshapen_dask_arrays_are_refused(bad, match) -> None:
    with pytest.raises(NadarayaError, match=match):
        nadaraya.smooth(np.ones(3), da.from_array(bad), np.ones(3))


def test_mismatched_rows_and_features_are_refused(rng) -> None:
    k = as_dask(rng.uniform(size=(20, 2)), 5)
    with pytest.raises(NadarayaError, match="values have 19 row"):
        nadaraya.smooth(np.ones((3, 2)), k, np.ones(19))
    with pytest.raises(NadarayaError, match="queries have 3 feature"):
        nadaraya.smooth(np.ones((3, 3)), k, np.ones(20))


def test_strings_are_refused_by_name() -> None:
    with pytest.raises(NadarayaError, match="queries must hold numbers"):
        nadaraya.smooth(da.from_array(np.array(["a", "b"])), np.ones(2), np.ones(2))


def test_random_features_are_refused_on_dask_inputs(rng) -> None:
    x = as_dask(rng.uniform(size=20), 5)
    with pytest.raises(NadarayaError, match="approximate="):
        nadaraya.smooth(x, x, x, "softmax", approximate="random-features")
