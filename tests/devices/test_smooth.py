"""``nadaraya.smooth``, ``weights`` and ``explain`` on tensors on the device.

Oracle: the dense engine in float64 on NumPy inputs (the device's inputs
rounded to its dtype, then widened), on the CPU. Every output must stay on the
input's device and hold no NaN.

Tolerance of the exact engines. A weight ``exp(s)`` computed from a score
``s`` of magnitude at most ``S`` (here ``S = max r^2 / 2h^2`` over all pairs
for the radial kernels, ``max |q.k|`` for the dot kernels; the Gaussian's
key-bias form in the fused engine sums terms of that size too) is off by
about ``eps * S`` relative, plus a few ``eps`` from the distance, the
exponential and the division. The smoothed value is a convex combination of
the values, so its error is at most that relative error times ``max |v|``:
``16 * eps * (1 + S) * max |v|`` is about thirty times the largest error
seen on the CPU (``0.45 eps (1 + S)``), room for GPU kernels that sum in
another order, and far below any wrong weight. For float32 and ``S`` of
order ten it is a few 1e-6 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine import ENGINES
from nadaraya.engine.certified import METHODS
from nadaraya.masks import Causal, LeaveOneOut, Window

from ._helpers import eps, host, on, rounded

RADIAL = ["gaussian", "laplacian", "matern32", "matern52", "epanechnikov", "tricube",
          "uniform", "cauchy"]
KERNELS = [*RADIAL, "softmax", "linear"]
DTYPES = [torch.float32, torch.float64]
MASKS = {"none": None, "leave-one-out": LeaveOneOut(), "causal": Causal(), "window": Window(16)}
H = {1: 0.3, 3: 1.0}  # radial bandwidths: a compact kernel's support holds dozens of keys
N = 96


def _problem(rng: np.random.Generator, kernel: str, d: int, dtype: torch.dtype):
    """Keys (also the queries, so every mask leaves each query a key) and values, rounded."""
    x = rng.uniform(-1.0, 1.0, (N, d))
    if kernel == "linear":  # a signed kernel: keep the normaliser q.k away from zero
        x = rng.uniform(0.5, 1.5, (N, d))
    y = np.sin(3 * x).sum(1) + 0.1 * rng.standard_normal(N)
    return rounded(x, dtype), rounded(y, dtype)


def _score_span(x: np.ndarray, kernel: str) -> float:
    """Largest |score| the kernel can meet on these points (see the module's docstring)."""
    if kernel in ("softmax", "linear"):
        return float(np.abs(x @ x.T).max())
    r2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return float(r2.max()) / (2 * H[x.shape[1]] ** 2)


def _kw(kernel: str, d: int) -> dict:
    return {"bandwidth": H[d]} if kernel in RADIAL else {}


def _tol(dtype: torch.dtype, span: float, scale: float) -> float:
    return 16 * eps(dtype) * (1 + span) * scale


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_smooth_equals_float64_dense(rng, device, kernel, dtype, d, mask):
    x, y = _problem(rng, kernel, d, dtype)
    ref = nadaraya.smooth(x, x, y, kernel, MASKS[mask], engine="dense", empty="nan",
                          **_kw(kernel, d))
    assert np.isfinite(ref).all()  # the problem leaves every query a key with weight
    X, Y = on(x, dtype, device), on(y, dtype, device)
    out = nadaraya.smooth(X, X, Y, kernel, MASKS[mask], empty="nan", **_kw(kernel, d))
    assert out.dtype == dtype and out.shape == (N,)
    err = np.abs(host(out, device) - ref).max()
    assert err <= _tol(dtype, _score_span(x, kernel), np.abs(y).max()), err


@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_weights_equal_float64_dense(rng, device, kernel, dtype, d, mask):
    x, _ = _problem(rng, kernel, d, dtype)
    x = x[:64]
    X = on(x, dtype, device)
    # each row is a convex combination's coefficients: errors as the smoothed values' with v = 1
    tol = _tol(dtype, _score_span(x, kernel), 1.0)
    if kernel == "linear":
        # signed: no log-weights, so weights() refuses it and names the route it documents,
        # the weighted sums of the identity (entries q.k, of size up to the span: tol * span)
        with pytest.raises(NadarayaError, match="signed"):
            nadaraya.weights(X, X, kernel, MASKS[mask])
        ref = nadaraya.smooth(x, x, np.eye(64), kernel, MASKS[mask], engine="dense",
                              normalize=False)
        w = nadaraya.smooth(X, X, on(np.eye(64), dtype, device), kernel, MASKS[mask],
                            normalize=False)
        tol *= _score_span(x, kernel)
    else:
        ref = nadaraya.weights(x, x, kernel, MASKS[mask], **_kw(kernel, d))
        w = nadaraya.weights(X, X, kernel, MASKS[mask], **_kw(kernel, d))
    assert w.dtype == dtype and w.shape == (64, 64)
    got = host(w, device)
    assert np.abs(got - ref).max() <= tol
    if kernel != "linear":
        np.testing.assert_allclose(got.sum(1), 1.0, rtol=0, atol=64 * tol)
    if mask == "causal":
        assert (got[np.triu_indices(64, 1)] == 0).all()


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("kernel", KERNELS)
def test_explain_names_an_engine(rng, device, kernel, d):
    x, y = _problem(rng, kernel, d, torch.float32)
    X, Y = on(x, torch.float32, device), on(y, torch.float32, device)
    why = nadaraya.explain(X, X, Y, kernel, "causal", **_kw(kernel, d))
    assert why.engine in ENGINES or why.engine in METHODS, why.engine
    assert why.engine in str(why)
    assert why.reasons[why.engine].startswith("chosen")


# -- certified methods: tolerance= ---------------------------------------------------
# The promise (nadaraya.engine.certified._tolerance): every output within
# ``tolerance * max_j |v_j|`` of the exact mean. The device result is then rounded
# to its dtype once more: half an ulp of the output, at most ``eps * max |v|``.

CERTIFIED = ["gaussian", "laplacian", "epanechnikov"]


def _certified(rng, device, dtype, kernel, d, n, h, engine, tolerance):
    x = rounded(rng.uniform(0.0, 1.0, (n, d)), dtype)
    y = rounded(np.sin(6 * x).sum(1) + 2.0, dtype)
    q = rounded(rng.uniform(0.0, 1.0, (n // 2, d)), dtype)
    ref = nadaraya.smooth(q, x, y, kernel, bandwidth=h, engine="dense")
    X, Y, Q = (on(a, dtype, device) for a in (x, y, q))
    why = nadaraya.explain(Q, X, Y, kernel, bandwidth=h, engine=engine, tolerance=tolerance)
    assert isinstance(why.engine, str) and why.engine
    out = nadaraya.smooth(Q, X, Y, kernel, bandwidth=h, engine=engine, tolerance=tolerance)
    assert out.dtype == dtype
    err = np.abs(host(out, device) - ref).max()
    scale = np.abs(y).max()
    assert err <= (tolerance + eps(dtype)) * scale, (err / scale, why.engine)
    return why.engine


def _method(rng, device, dtype, kernel, d, n, h, method, tolerance):
    """Run a certified method and check it ran where it runs; elsewhere its refusal.

    Binning runs on the CPU and on CUDA; the fast Gauss transform on the CPU
    only: asked for by name on CUDA data it refuses, naming the device and
    ``engine='auto'``, which then computes on the device within the same
    tolerance (with binning or an exact engine there).
    """
    if device.type == "cuda" and method != "binned":
        x = on(rng.uniform(0.0, 1.0, (50, d)), dtype, device)
        with pytest.raises(NadarayaError, match=rf"{method}.*cuda.*engine='auto'"):
            nadaraya.smooth(x, x, x[:, 0], kernel, bandwidth=h, engine=method,
                            tolerance=tolerance)
        engine = _certified(rng, device, dtype, kernel, d, n, h, "auto", tolerance)
        assert engine != method
    else:
        assert _certified(rng, device, dtype, kernel, d, n, h, method, tolerance) == method


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", CERTIFIED)
def test_binned_1d_within_tolerance(rng, device, kernel, dtype):
    _method(rng, device, dtype, kernel, 1, 400, 0.1, "binned", 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", CERTIFIED)
def test_binned_2d_within_tolerance(rng, device, kernel, dtype):
    # a 2-D grid at 1e-6 would need ~1e9 nodes for these points (refused, below): 1e-2 is
    # the tolerance whose grid fits the default working memory for all three kernels
    _method(rng, device, dtype, kernel, 2, 1000, 0.5, "binned", 1e-2)


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", CERTIFIED)
def test_auto_within_tolerance(rng, device, kernel, dtype, d):
    _certified(rng, device, dtype, kernel, d, 1000, 0.2, "auto", 1e-6)


def test_fgt_2d_within_tolerance(rng, device):
    _method(rng, device, torch.float32, "gaussian", 2, 2000, 0.2, "fgt", 1e-6)


def test_binned_grid_too_large_is_refused(rng, device):
    x = on(rng.uniform(0.0, 1.0, (500, 2)), torch.float32, device)
    with pytest.raises(NadarayaError, match=r"binned.*tolerance=1e-06"):
        nadaraya.smooth(x, x, x[:, 0], "gaussian", bandwidth=0.1, engine="binned",
                        tolerance=1e-6)


# -- a query that sees no key ---------------------------------------------------------
@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube", "uniform"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unreachable_query_gets_the_empty_policy(rng, device, kernel, dtype):
    x = rng.uniform(0.0, 1.0, (50, 2))
    y = rng.standard_normal(50)
    q = np.array([[0.5, 0.5], [100.0, 100.0]])  # the second is far outside every support
    X, Y, Q = (on(a, dtype, device) for a in (x, y, q))
    with pytest.raises(NadarayaError, match="1 of 2 queries"):
        nadaraya.smooth(Q, X, Y, kernel, bandwidth=0.3)
    out = nadaraya.smooth(Q, X, Y, kernel, bandwidth=0.3, empty="nan")
    assert out.device.type == device.type and out.dtype == dtype
    assert bool(torch.isnan(out[1])) and bool(torch.isfinite(out[0]))
    near = nadaraya.smooth(Q, X, Y, kernel, bandwidth=0.3, empty="nearest")
    nearest = int(np.argmin(((rounded(x, dtype) - [100.0, 100.0]) ** 2).sum(1)))
    got = host(near, device)
    assert got[1] == float(Y[nearest])
    ref = nadaraya.smooth(rounded(q, dtype), rounded(x, dtype), rounded(y, dtype), kernel,
                          bandwidth=0.3, engine="dense", empty="nearest")
    np.testing.assert_allclose(got, ref, rtol=0, atol=_tol(dtype, 1.0, np.abs(y).max()))
    w = nadaraya.weights(Q, X, kernel, bandwidth=0.3, empty="nan")
    assert w.device.type == device.type and bool(torch.isnan(w[1]).all())
