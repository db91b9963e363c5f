"""tolerance= on Dask inputs: certified block sums, merged, checked and redone, within the bound."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import masks as M

from .conftest import as_dask, compute


def _data(rng: np.random.Generator, n: int = 3000, m: int = 200,
          d: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = rng.normal(size=(n, d))
    q = np.concatenate([rng.normal(size=(m - 3, d)), np.full((3, d), 9.0)])  # 3 far queries
    v = np.stack([np.sin(k[:, 0]), 100 * np.cos(k[:, 0]), np.zeros(n)], axis=1)
    return q, k, v


def _within(got: np.ndarray, want: np.ndarray, tol: float, scale: np.ndarray) -> None:
    err = np.abs(got - want)
    assert np.all(err <= tol * scale * (1 + 1e-9) + 1e-300), err.max(axis=0)


@pytest.mark.parametrize("method", ["fgt", "binned", "auto"])
def test_within_the_tolerance_of_the_dense_result(rng, method) -> None:
    q, k, v = _data(rng)
    tol = 1e-6
    out = nadaraya.smooth(as_dask(q, 70), as_dask(k, 900), as_dask(v, 900), bandwidth=0.3,
                          tolerance=tol, engine=method, empty="nan")
    want = nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dense", empty="nan")
    got = compute(out)
    ok = ~np.isnan(want[:, 0])
    _within(got[ok], want[ok], tol, np.abs(v).max(axis=0))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_sums_and_log_sums_within_the_tolerance(rng) -> None:
    q, k, v = _data(rng, d=2)
    tol = 1e-5
    out, lse = nadaraya.smooth(as_dask(q, 64), as_dask(k, 1000), v, bandwidth=0.4,
                               tolerance=tol, engine="fgt", normalize=False, return_lse=True)
    got, got_lse = compute(out, lse)
    want, want_lse = nadaraya.smooth(q, k, v, bandwidth=0.4, engine="dense", normalize=False,
                                     return_lse=True)
    total = np.exp(want_lse)
    _within(got, want, tol, np.abs(v).max(axis=0) * total[:, None])
    finite = np.isfinite(want_lse)
    assert np.all(np.abs(got_lse[finite] - want_lse[finite]) <= 2 * tol)


def test_leave_one_out_through_a_certified_method(rng) -> None:
    _, k, v = _data(rng, n=2000)
    x, y = as_dask(k, 500), as_dask(v, 500)
    tol = 1e-6
    got = compute(nadaraya.smooth(x, x, y, mask=M.LeaveOneOut(), bandwidth=0.2, tolerance=tol,
                                  engine="fgt"))
    want = nadaraya.smooth(k, k, v, mask=M.LeaveOneOut(), bandwidth=0.2, engine="dense")
    _within(got, want, tol, np.abs(v).max(axis=0))


def test_a_method_refusing_a_masked_block_falls_back_to_the_exact_engines(rng) -> None:
    _, k, v = _data(rng, n=600)
    x = as_dask(k, 150)
    got = compute(nadaraya.smooth(x, x, as_dask(v, 150), mask=M.Window(40), bandwidth=0.3,
                                  tolerance=1e-6))
    want = nadaraya.smooth(k, k, v, mask=M.Window(40), bandwidth=0.3, engine="dense")
    _within(got, want, 1e-6, np.abs(v).max(axis=0))


def test_explain_says_how_the_method_is_chosen(rng) -> None:
    q, k, v = _data(rng)
    why = nadaraya.explain(as_dask(q, 70), as_dask(k, 900), v, bandwidth=0.3, tolerance=1e-6,
                           engine="fgt")
    assert why.engine == "dask"
    assert why.detail["method_choice"].startswith("per task")
    assert why.reasons["fgt"] == "per block: chosen: requested by the caller"
    assert why.plan
    assert {"sums", "check", "redo", "patch"} <= set(why.detail["stages"])
