"""Peers that compute the same operator: PyTorch SDPA, scikit-learn, statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import masks as M
from nadaraya.engine import ENGINES

from ._oracles import skip_unless_runs

sdpa = torch.nn.functional.scaled_dot_product_attention


def _attention_inputs(seed: int, m: int = 13, n: int = 17, d: int = 8, p: int = 5):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, d, generator=g, dtype=torch.float64),
            torch.randn(n, d, generator=g, dtype=torch.float64),
            torch.randn(n, p, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("engine", ENGINES)
def test_softmax_equals_sdpa(engine: str) -> None:
    q, k, v = _attention_inputs(0)
    skip_unless_runs(engine, q, k, v, "softmax")
    out = nadaraya.smooth(q, k, v, "softmax", engine=engine)
    torch.testing.assert_close(out, sdpa(q, k, v), rtol=1e-12, atol=1e-12)
    scaled = nadaraya.smooth(q, k, v, nadaraya.kernels.ExpDot(scale=0.2), engine=engine)
    torch.testing.assert_close(scaled, sdpa(q, k, v, scale=0.2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_softmax_with_boolean_mask_equals_sdpa(engine: str) -> None:
    q, k, v = _attention_inputs(1)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(q.shape[0], k.shape[0], generator=g) < 0.4
    mask[:, 0] = True
    skip_unless_runs(engine, q, k, v, "softmax", mask)
    out = nadaraya.smooth(q, k, v, "softmax", mask, engine=engine)
    torch.testing.assert_close(out, sdpa(q, k, v, attn_mask=mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_softmax_causal_equals_sdpa(engine: str) -> None:
    q, k, v = _attention_inputs(2, m=17, n=17)
    for mask in (M.Causal(), "causal"):
        skip_unless_runs(engine, q, k, v, "softmax", mask)
        out = nadaraya.smooth(q, k, v, "softmax", mask, engine=engine)
        torch.testing.assert_close(out, sdpa(q, k, v, is_causal=True), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_softmax_float32_is_as_close_to_sdpa_as_float64(engine: str) -> None:
    q, k, v = (t.float() for t in _attention_inputs(4, m=40, n=60, d=16))
    skip_unless_runs(engine, q, k, v, "softmax")
    out = nadaraya.smooth(q, k, v, "softmax", engine=engine)
    assert out.dtype == torch.float32
    ref = sdpa(q.double(), k.double(), v.double())
    err_sdpa = (sdpa(q, k, v).double() - ref).abs().max()
    err = (out.double() - ref).abs().max()
    assert err <= 16 * max(float(err_sdpa), float(torch.finfo(torch.float32).eps))


def _regression_data(d: int, seed: int = 0, n: int = 60, m: int = 25):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, d))
    y = np.sin(x).sum(1) + 0.1 * rng.standard_normal(n)
    xq = rng.uniform(-2, 2, (m, d))
    return x, y, xq


@pytest.mark.parametrize("k", [1, 3, 7])
@pytest.mark.parametrize("engine", ENGINES)
def test_uniform_knearest_equals_kneighbors_regressor(engine: str, k: int) -> None:
    from sklearn.neighbors import KNeighborsRegressor

    x, y, xq = _regression_data(2)
    mask = M.KNearest(k)
    skip_unless_runs(engine, xq, x, y, "uniform", mask, bandwidth=100.0)
    out = nadaraya.smooth(xq, x, y, "uniform", mask, bandwidth=100.0, engine=engine)
    ref = KNeighborsRegressor(n_neighbors=k).fit(x, y).predict(xq)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("engine", ENGINES)
def test_gaussian_equals_sklearn_rbf_recipe(engine: str, d: int) -> None:
    from sklearn.metrics.pairwise import rbf_kernel

    x, y, xq = _regression_data(d, seed=d)
    h = 0.4
    skip_unless_runs(engine, xq, x, y, "gaussian", bandwidth=h)
    out = nadaraya.smooth(xq, x, y, "gaussian", bandwidth=h, engine=engine)
    w = rbf_kernel(xq, x, gamma=1 / (2 * h**2))
    ref = (w / w.sum(1, keepdims=True)) @ y
    np.testing.assert_allclose(out, ref, rtol=1e-10)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("engine", ENGINES)
def test_gaussian_equals_statsmodels_kernelreg(engine: str, d: int) -> None:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    x, y, xq = _regression_data(d, seed=10 + d)
    h = 0.5
    skip_unless_runs(engine, xq, x, y, "gaussian", bandwidth=h)
    out = nadaraya.smooth(xq, x, y, "gaussian", bandwidth=h, engine=engine)
    model = KernelReg(endog=y, exog=x, var_type="c" * d, reg_type="lc", bw=[h] * d)
    ref = model.fit(xq)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-10)
    # Per-feature bandwidths are statsmodels' product kernel.
    hs = [0.3, 0.6, 0.9][:d]
    out = nadaraya.smooth(xq, x, y, "gaussian", bandwidth=hs, engine=engine)
    ref = KernelReg(endog=y, exog=x, var_type="c" * d, reg_type="lc", bw=hs).fit(xq)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-10)
