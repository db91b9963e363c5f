"""Binning off the CPU: the tensor binning and ``torch.fft`` keep every bound.

On a CUDA device the method bins with ``index_add_`` (unordered additions),
convolves with cuFFT and assembles the bounds there. Here the same tensor
code runs on the CPU with ``torch.fft`` forced ("cpu-tensor"); with a CUDA
device the tests run there too, against the exact float64 sums.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine.binned import BinnedMethod
from nadaraya.engine.binned import _method as binned_method
from nadaraya.engine.binned._transform import bin_keys, convolve

from ._problems import KERNELS, LAYOUTS, check_bounds, layout, make_job

METHOD = BinnedMethod()
TARGETS = ["cpu-tensor", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


@pytest.fixture(params=TARGETS)
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "cpu-tensor":
        monkeypatch.setattr(binned_method, "bin_keys", functools.partial(bin_keys,
                                                                          compiled=False))
        monkeypatch.setattr(binned_method, "convolve", functools.partial(convolve,
                                                                          device_fft=True))
        return "cpu"
    return request.param


def _on(device: str, *arrays: np.ndarray) -> list[torch.Tensor]:
    return [torch.as_tensor(a, dtype=torch.float64, device=device) for a in arrays]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("d", [1, 2])
def test_error_within_bound_on_device(device: str, kernel: str, kind: str, d: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{kernel} {kind} {d}".encode()))
    keys = layout(kind, 400, d, rng)
    queries = np.concatenate([
        keys.min(0) + (keys.max(0) - keys.min(0) + 0.2) * rng.uniform(-0.2, 1.2, (60, d)),
        keys[rng.integers(0, keys.shape[0], 3)],
        keys.mean(0)[None] + 30.0,  # beyond the grid: bounded by the nearest possible key
    ])
    values = rng.standard_normal((keys.shape[0], 2)) * 10.0 ** rng.uniform(-3, 3, 2)
    q, k, v = _on(device, queries, keys, values)
    job = make_job(q, k, v, kernel, 0.1 if d == 1 else 0.3)
    tolerance = 1e-3 if d == 1 else 1e-2
    why = METHOD.refuse(job, tolerance)
    if why is not None:  # spread-out keys can need a grid too large to pay
        assert why.startswith("the grid for tolerance"), why
        return
    sums = METHOD.sums(job, tolerance)
    assert sums.total.device.type == job.device.type == torch.device(device).type
    check_bounds(job, kernel, sums)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "epanechnikov"])
def test_smooth_within_tolerance_on_device(device: str, kernel: str) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 6, 3000)
    y = 2 * np.sin(x) + rng.standard_normal(3000)
    xq = np.r_[rng.uniform(-0.5, 6.5, 500), 40.0]
    q, k, v = _on(device, xq, x, y)
    for dtype in (torch.float64, torch.float32):
        got = nadaraya.smooth(q.to(dtype), k.to(dtype), v.to(dtype), kernel, bandwidth=0.2,
                              tolerance=1e-5, engine="binned", empty="nan")
        assert got.device.type == torch.device(device).type and got.dtype == dtype
        got = got.double().cpu().numpy()
        # the oracle sees the inputs the method saw (float32 inputs are rounded ones)
        inputs = [torch.as_tensor(a).to(dtype).double().numpy() for a in (xq, x, y)]
        exact = nadaraya.smooth(*inputs, kernel, bandwidth=0.2, engine="dense", empty="nan")
        assert np.array_equal(np.isnan(got), np.isnan(exact)), kernel
        scale = np.abs(inputs[2]).max()
        ok = ~np.isnan(exact)
        if dtype == torch.float32:
            # the far query is left to the exact float32 engine, whose distances 170
            # bandwidths out move the weights by 1e-3: compare the queries among the keys
            ok &= np.abs(xq - 3.0) < 4.0
        # the method sums in float64: float32 outputs add only their own rounding
        slack = 1e-5 * scale + (np.finfo(np.float32).eps * scale if dtype == torch.float32
                                else 0.0)
        assert np.abs(got[ok] - exact[ok]).max() <= slack, kernel


def test_tensor_fft_matches_pocketfft_within_its_bound() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 6, 5000)
    y = rng.standard_normal(5000)
    job = make_job(x[:10], x, y, "gaussian", 0.05)
    a = METHOD.sums(job, 1e-6)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(binned_method, "convolve", functools.partial(convolve, device_fft=True))
        b = METHOD.sums(job, 1e-6)
    torch.testing.assert_close(b.total, a.total, rtol=0,
                               atol=float((a.total_err + b.total_err).max()))
    torch.testing.assert_close(b.acc, a.acc, rtol=0, atol=float((a.acc_err + b.acc_err).max()))
