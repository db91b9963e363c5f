"""What goes in comes out: array kind, dtype, device and shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import kernels as K
from nadaraya.engine import ENGINES

from ._oracles import dense64, rel_err, runnable_engines, skip_unless_runs

rng = np.random.default_rng(0)
Q, KEYS, V = rng.random((9, 2)), rng.random((14, 2)), rng.standard_normal((14, 3))
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kernel", ["gaussian", "softmax", "epanechnikov"])
@pytest.mark.parametrize("engine", ENGINES)
def test_torch_in_torch_out(engine: str, kernel: str, dtype: torch.dtype, device: str) -> None:
    q, k, v = (torch.tensor(a, dtype=dtype, device=device) for a in (Q, KEYS, V))
    bw = None if kernel == "softmax" else 0.6
    skip_unless_runs(engine, q, k, v, kernel, bandwidth=bw)
    out = nadaraya.smooth(q, k, v, kernel, bandwidth=bw, engine=engine)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == dtype and out.device == q.device and out.shape == (9, 3)
    out1 = nadaraya.smooth(q, k, v[:, 0], kernel, bandwidth=bw, engine=engine)
    assert isinstance(out1, torch.Tensor) and out1.shape == (9,) and out1.dtype == dtype
    torch.testing.assert_close(out1, out[:, 0])
    out2, lse = nadaraya.smooth(q, k, v, kernel, bandwidth=bw, engine=engine, return_lse=True)
    assert isinstance(lse, torch.Tensor) and lse.shape == (9,) and lse.dtype == dtype
    assert lse.device == q.device
    torch.testing.assert_close(out2, out)
    ref = dense64(q, k, v, kernel, bandwidth=bw)
    assert rel_err(out, ref) <= (1e-12 if dtype == torch.float64 else 1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("engine", ENGINES)
def test_numpy_in_numpy_out(engine: str, dtype: type) -> None:
    q, k, v = (a.astype(dtype) for a in (Q, KEYS, V))
    skip_unless_runs(engine, q, k, v, bandwidth=0.6)
    out = nadaraya.smooth(q, k, v, bandwidth=0.6, engine=engine)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (9, 3)
    out1 = nadaraya.smooth(q, k, v[:, 1], bandwidth=0.6, engine=engine)
    assert isinstance(out1, np.ndarray) and out1.shape == (9,) and out1.dtype == dtype
    np.testing.assert_allclose(out1, out[:, 1], rtol=1e-6)
    _, lse = nadaraya.smooth(q, k, v, bandwidth=0.6, engine=engine, return_lse=True)
    assert isinstance(lse, np.ndarray) and lse.shape == (9,) and lse.dtype == dtype
    np.testing.assert_allclose(lse, _lse_by_hand(q, k, 0.6), rtol=1e-5 if dtype == np.float32
                               else 1e-12)


def _lse_by_hand(q: np.ndarray, k: np.ndarray, h: float) -> np.ndarray:
    q, k = q.astype(np.float64), k.astype(np.float64)
    d2 = ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)
    s = -d2 / (2 * h * h)
    top = s.max(1)
    return top + np.log(np.exp(s - top[:, None]).sum(1))


def test_one_dimensional_points_and_lists() -> None:
    x = np.linspace(0, 1, 12)
    y = np.sin(3 * x)
    out = nadaraya.smooth(x, x, y, bandwidth=0.2)
    assert out.shape == (12,) and out.dtype == np.float64
    np.testing.assert_allclose(out, nadaraya.smooth(x[:, None], x[:, None], y, bandwidth=0.2))
    listed = nadaraya.smooth(x.tolist(), x.tolist(), y.tolist(), bandwidth=0.2)
    assert isinstance(listed, np.ndarray) and listed.dtype == np.float64
    np.testing.assert_allclose(listed, out)
    ints = nadaraya.smooth(np.arange(5), np.arange(5), np.arange(5), bandwidth=1.0)
    assert ints.dtype == np.float64
    np.testing.assert_allclose(ints, dense64(np.arange(5), np.arange(5), np.arange(5),
                                             bandwidth=1.0))


def test_float32_numpy_computes_in_float32() -> None:
    q, k, v = (a.astype(np.float32) for a in (Q, KEYS, V))
    ex = nadaraya.explain(q, k, v, bandwidth=0.6)
    assert ex.detail["dtype"] == "float32"
    assert nadaraya.explain(q, k, V, bandwidth=0.6).detail["dtype"] == "float64"


def test_float16_and_bfloat16_tensors_keep_their_dtype() -> None:
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (torch.tensor(a, dtype=dtype) for a in (Q, KEYS, V))
        out = nadaraya.smooth(q, k, v, bandwidth=0.6)
        assert out.dtype == dtype
        ref = dense64(q, k, v, bandwidth=0.6)
        assert rel_err(out.float(), ref) <= 2 * float(torch.finfo(dtype).eps)


def test_weights_give_the_callers_kind() -> None:
    w = nadaraya.weights(torch.tensor(Q, dtype=torch.float32), torch.tensor(KEYS,
                         dtype=torch.float32), bandwidth=0.6)
    assert isinstance(w, torch.Tensor) and w.dtype == torch.float32 and w.shape == (9, 14)
    w = nadaraya.weights(Q, KEYS, bandwidth=0.6)
    assert isinstance(w, np.ndarray) and w.dtype == np.float64


def test_gradients_match_finite_differences() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.rand(4, 2, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.rand(6, 2, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.rand(6, 2, generator=g, dtype=torch.float64, requires_grad=True)
    h = torch.tensor([0.5, 0.8], dtype=torch.float64, requires_grad=True)

    def f(q, k, v, h):  # type: ignore[no-untyped-def]
        return nadaraya.smooth(q, k, v, K.Gaussian(h) * K.ExpDot(0.3))

    assert torch.autograd.gradcheck(f, (q, k, v, h))
    assert runnable_engines(q, k, v, K.Gaussian(h)) and "streamed" not in runnable_engines(
        q, k, v, K.Gaussian(h))
