"""The compiled loop's exponential: within one ulp, and the roofline probe's sums."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from nadaraya.engine._job import exp_floor
from nadaraya.engine.compiled import _library

from ._common import needs_native

pytestmark = pytest.mark.usefixtures("native")


@pytest.fixture
def native() -> None:
    needs_native()


def _arguments(dtype: torch.dtype, rng: np.random.Generator) -> np.ndarray:
    """Arguments over the whole range the loop passes to exp, and its edges."""
    floor = exp_floor(dtype)
    ln2 = math.log(2)
    edges = [0.0, -0.0, floor, -1e-30, -ln2 / 2, -ln2 / 2 * (1 + 1e-12), -ln2 * 1.5]
    # arguments next to n ln 2 +- ln 2 / 2, where the reduced argument is largest
    n = rng.integers(1, int(-floor / ln2), 300)
    near = np.concatenate([-(n + 0.5) * ln2, -(n - 0.5) * ln2])
    return np.concatenate([edges, near, rng.uniform(floor, 0, 2000), rng.uniform(-2, 0, 1000)])


def _ulps(got: np.ndarray, x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Errors in units of the last place of ``got``'s dtype, against exact exp."""
    mpmath.mp.prec = 120
    exact = np.array([float(mpmath.exp(mpmath.mpf(float(v)))) for v in x])
    err = np.array([float(abs(mpmath.mpf(float(g)) - mpmath.exp(mpmath.mpf(float(v)))))
                    for g, v in zip(got, x, strict=True)])
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    return err / np.spacing(exact.astype(np_dtype)).astype(np.float64)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_within_one_ulp(dtype: torch.dtype) -> None:
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    x = _arguments(dtype, np.random.default_rng(0)).astype(np_dtype)
    got = _library.exp(torch.from_numpy(x)).numpy()
    ulps = _ulps(got, x, dtype)
    assert ulps.max() <= 1.0, (x[ulps.argmax()], ulps.max())
    assert np.median(ulps) <= 0.5


@pytest.mark.parametrize("count", [1, 7, 16, 33])
def test_any_length(count: int) -> None:
    # whole vectors and the tail: every element computed, none beyond
    x = -torch.rand(count, dtype=torch.float64) * 5
    np.testing.assert_allclose(_library.exp(x).numpy(), np.exp(x.numpy()), rtol=3e-16)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_roofline_probe_sums(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1)
    x = (-torch.rand(4, 64, generator=g, dtype=torch.float64) * 10).to(dtype)
    v = torch.randn(64, generator=g, dtype=torch.float64).to(dtype)
    total, acc = _library.exp_fma(x, v, repeats=3)
    w = torch.exp(x.double())
    assert total == pytest.approx(3 * float(w.sum()), rel=1e-5)
    assert acc == pytest.approx(3 * float((w * v.double()).sum()), rel=1e-4, abs=1e-4)
