"""Masks on Dask inputs: index masks with global indices; masks that need all keys refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.kernels.similarity import ArgMax, Exponential

from .conftest import as_dask, compute


def _data(rng: np.random.Generator, n: int = 90) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(rng.uniform(0, 5, n))
    return x, np.sin(x) + rng.normal(0, 0.1, n)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("chunks", [7, (30, 1, 59), 90])
def test_leave_one_out_with_queries_and_keys_the_same_dask_array(rng, chunks) -> None:
    x, y = _data(rng)
    X, Y = as_dask(x, chunks), as_dask(y, chunks)
    got = compute(nadaraya.smooth(X, X, Y, mask=M.LeaveOneOut(), bandwidth=0.3))
    _close(got, nadaraya.smooth(x, x, y, mask=M.LeaveOneOut(), bandwidth=0.3, engine="dense"))


def test_leave_one_out_with_rows_uses_global_key_indices(rng) -> None:
    x, y = _data(rng)
    rows = rng.permutation(90)[:25]
    mask = M.LeaveOneOut(rows=rows)
    got = compute(nadaraya.smooth(as_dask(x[rows], 6), as_dask(x, 11), as_dask(y, 11),
                                  mask=mask, bandwidth=0.3))
    _close(got, nadaraya.smooth(x[rows], x, y, mask=mask, bandwidth=0.3, engine="dense"))


@pytest.mark.parametrize("mask", [
    M.Causal(), M.Causal(offset=3), M.Window(4), M.Causal() & M.Window(6),
    M.Window(2) | M.Predicate(lambda i, j: (j % 10) == 0), M.Radius(0.4),
    M.Radius(0.6) & M.LeaveOneOut(), "causal",
], ids=repr)
def test_structured_masks_match_memory(rng, mask) -> None:
    x, y = _data(rng)
    X, Y = as_dask(x, (13, 40, 37)), as_dask(y, 20)
    got = compute(nadaraya.smooth(X, X, Y, mask=mask, bandwidth=0.3, empty="nan"))
    want = nadaraya.smooth(x, x, y, mask=mask, bandwidth=0.3, empty="nan", engine="dense")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    _close(np.nan_to_num(got), np.nan_to_num(want))


@pytest.mark.parametrize("sparse", [False, True])
def test_small_boolean_matrix_masks_match_memory(rng, sparse) -> None:
    x, y = _data(rng, 40)
    visible = rng.random((40, 40)) < 0.3
    visible[:, 0] = True
    mask = sp.csr_matrix(visible) if sparse else visible
    got = compute(nadaraya.smooth(as_dask(x, 9), as_dask(x, 11), as_dask(y, 11), mask=mask,
                                  bandwidth=0.3))
    _close(got, nadaraya.smooth(x, x, y, mask=mask, bandwidth=0.3, engine="dense"))


def test_k_nearest_is_refused_naming_the_mask(rng) -> None:
    x, y = _data(rng)
    with pytest.raises(NadarayaError, match=r"mask KNearest.*compute the inputs"):
        nadaraya.smooth(as_dask(x, 10), x, y, mask=M.KNearest(5))


def test_a_matrix_mask_over_the_budget_is_refused(rng) -> None:
    x, y = _data(rng)
    with nadaraya.config_context(working_memory=0.001), \
            pytest.raises(NadarayaError, match=r"mask is a 90 x 90 boolean matrix"):
        nadaraya.smooth(as_dask(x, 10), x, y, mask=np.ones((90, 90), dtype=bool))


def test_leave_one_out_rows_are_checked_on_the_client(rng) -> None:
    x, y = _data(rng)
    with pytest.raises(NadarayaError, match="LeaveOneOut rows must name one key per query"):
        nadaraya.smooth(as_dask(x, 10), x, y, mask=M.LeaveOneOut(rows=[0, 1]))


@pytest.mark.parametrize("kernel", [
    ArgMax(K.LinearKernel()), K.LinearKernel(intercept=True), K.LinearKernel("whitened"),
    K.Gaussian(0.3) * Exponential(K.LinearKernel("whitened"), 1.0),
], ids=repr)
def test_kernels_needing_all_keys_are_refused(rng, kernel) -> None:
    x, y = _data(rng)
    with pytest.raises(NadarayaError, match=r"kernel .* needs .* cannot split the keys"):
        nadaraya.smooth(as_dask(x, 10), x, y, kernel)
