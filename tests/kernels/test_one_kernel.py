"""One kernel object for every face: smooth, scikit-learn, torch attention.

The same :class:`Gaussian` is used in :func:`nadaraya.smooth`, as a
scikit-learn estimator parameter and as a trainable attention kernel; the
oracles are the naive float64 formula and torch's SDPA for softmax.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import nadaraya
from nadaraya.estimators import NadarayaWatsonRegressor
from nadaraya.kernels import (
    Cosine,
    ExpDot,
    Exponential,
    Gaussian,
    Laplacian,
    LinearKernel,
    Polynomial,
    ProductKernel,
    get_attention_kernel,
)
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention


def _naive(q, k, v, logw):
    """sum_j K v_j / sum_j K from the log-weights (float64)."""
    w = torch.softmax(logw, dim=-1)
    return w @ v


def _sq(q, k):
    return (q[..., :, None, :] - k[..., None, :, :]).square().sum(-1)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=g)
    k = torch.randn(2, 3, 7, 4, dtype=torch.float64, generator=g)
    v = torch.randn(2, 3, 7, 2, dtype=torch.float64, generator=g)
    return q, k, v


def test_one_gaussian_in_smooth_and_attention(data):
    q, k, v = data
    gauss = Gaussian(0.8)
    ref = _naive(q, k, v, -_sq(q, k) / (2 * 0.8**2))
    torch.testing.assert_close(nadaraya.smooth(q[0, 0], k[0, 0], v[0, 0], gauss), ref[0, 0])
    torch.testing.assert_close(kernel_attention(q, k, v, gauss), ref)
    # and the attention name with SDPA's scale is that Gaussian
    torch.testing.assert_close(kernel_attention(q, k, v, "rbf", scale=0.8**-2), ref)
    assert get_attention_kernel("rbf", scale=0.8**-2).get_params()["bandwidth"] == \
        pytest.approx(0.8)


def test_one_gaussian_as_an_estimator_parameter():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 6, (60, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    gauss = Gaussian(0.5)
    est = NadarayaWatsonRegressor(kernel=gauss, bandwidth=None)
    assert est.get_params()["kernel__bandwidth"] == 0.5
    copy_ = clone(est)
    assert copy_.kernel is not gauss and copy_.kernel.get_params() == gauss.get_params()
    est.set_params(kernel__bandwidth=0.3)
    assert gauss.bandwidth == 0.3 and repr(gauss) == "Gaussian(bandwidth=0.3)"
    fit = est.fit(X, y).predict(X)
    ref = nadaraya.smooth(X, X, y, "gaussian", bandwidth=0.3)
    np.testing.assert_allclose(fit, np.asarray(ref), rtol=1e-12)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_allclose(back.predict(X), fit, rtol=1e-12)
    grid = [0.05, 0.4, 3.0]
    search = GridSearchCV(NadarayaWatsonRegressor(kernel=Gaussian(1.0), bandwidth=None),
                          {"kernel__bandwidth": grid}, cv=3).fit(X, y)
    named = GridSearchCV(NadarayaWatsonRegressor(kernel="gaussian"),
                         {"bandwidth": grid}, cv=3).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               named.cv_results_["mean_test_score"], rtol=1e-10)
    assert len(set(search.cv_results_["mean_test_score"])) == 3
    best = named.best_params_["bandwidth"]
    assert search.best_estimator_.kernel.bandwidth == best


def test_bandwidth_trains_in_attention_per_head(data):
    q, k, v = data
    gauss = Gaussian(1.0, learnable=True, heads=3).double()
    assert [n for n, _ in gauss.named_parameters()] == ["raw_scale"]
    # at the start: the fixed Gaussian, and the naive formula
    torch.testing.assert_close(kernel_attention(q, k, v, gauss),
                               _naive(q, k, v, -_sq(q, k) / 2))
    target = _naive(q, k, v, -_sq(q, k) / (2 * torch.tensor([0.5, 1.0, 2.0],
                                                            dtype=torch.float64)[:, None, None]**2))
    opt = torch.optim.Adam(gauss.parameters(), lr=0.05)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = (kernel_attention(q, k, v, gauss) - target).square().mean()
        loss.backward()
        assert gauss.raw_scale.grad is not None and bool((gauss.raw_scale.grad != 0).any())
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]
    h = torch.nn.functional.softplus(gauss.raw_scale.detach())
    assert float(h[0]) < 0.9 < 1.1 < float(h[2])  # per-head bandwidths went apart
    assert gauss.get_params()["bandwidth"] == 1.0  # the init value stays
    # the trained object still works in nadaraya.smooth for one head's problem
    one = Gaussian(1.0, learnable=True).double()
    with torch.no_grad():
        one.raw_scale.copy_(gauss.raw_scale[2])
    ref = _naive(q[0, 2], k[0, 2], v[0, 2], -_sq(q[0, 2], k[0, 2]) / (2 * float(h[2]) ** 2))
    torch.testing.assert_close(nadaraya.smooth(q[0, 2], k[0, 2], v[0, 2], one), ref)


def test_kernel_attention_module_trains_the_gaussian():
    torch.manual_seed(0)
    attn = KernelAttention(8, 2, kernel=Gaussian(2.0, learnable=True, heads=2), batch_first=True)
    assert "kernel.raw_scale" in dict(attn.named_parameters())
    x = torch.randn(3, 6, 8)
    out, _ = attn(x, x, x)
    out.square().sum().backward()
    assert float(attn.kernel.raw_scale.grad.abs().sum()) > 0
    state = attn.double().state_dict()
    assert state["kernel.raw_scale"].dtype == torch.float64


def test_softmax_and_cosine_against_their_oracles(data):
    q, k, v = data
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(kernel_attention(q, k, v, ExpDot(0.3)), sdpa)
    torch.testing.assert_close(kernel_attention(q, k, v, "softmax", scale=0.3), sdpa)
    cos = (q @ k.mT) / (q.norm(dim=-1)[..., None] * k.norm(dim=-1)[..., None, :])
    torch.testing.assert_close(kernel_attention(q, k, v, Exponential(Cosine(), 1.5)),
                               _naive(q, k, v, 1.5 * cos))
    torch.testing.assert_close(kernel_attention(q, k, v, "cosine"), _naive(q, k, v, 2.0 * cos))
    torch.testing.assert_close(kernel_attention(q, k, v, Laplacian(0.5)),
                               _naive(q, k, v, -_sq(q, k).sqrt() / 0.5))
    w = (0.5 * q @ k.mT + 1.0) ** 2
    torch.testing.assert_close(kernel_attention(q, k, v, Polynomial(2, 1.0, scale=0.5)),
                               (w / w.sum(-1, keepdim=True)) @ v)
    w = q.abs() @ k.abs().mT
    torch.testing.assert_close(kernel_attention(q.abs(), k.abs(), v, LinearKernel()),
                               (w / w.sum(-1, keepdim=True)) @ v)


def test_positional_product_on_column_slices(data):
    q, k, v = data  # E = 4: content on columns 0-1, positions on columns 2-3
    prod = Gaussian(0.7).on(slice(0, 2)) * ExpDot(0.4).on(slice(2, 4))
    assert isinstance(prod, ProductKernel)
    logw = -_sq(q[..., :2], k[..., :2]) / (2 * 0.7**2) + 0.4 * q[..., 2:] @ k[..., 2:].mT
    torch.testing.assert_close(kernel_attention(q, k, v, prod), _naive(q, k, v, logw))
    torch.testing.assert_close(nadaraya.smooth(q[1, 1], k[1, 1], v[1, 1], prod),
                               _naive(q, k, v, logw)[1, 1])


def test_on_and_bind_never_change_the_kernel():
    base = Gaussian(1.0, learnable=True)
    view = base.on([0])
    assert base.columns is None and view.columns == [0]
    assert view.raw_scale is base.raw_scale  # the view trains with the kernel
    view.register_parameter("extra", torch.nn.Parameter(torch.zeros(())))
    assert "extra" not in dict(base.named_parameters())
    prod = base.on([0]) * ExpDot().on([1])
    before = list(prod.parts)
    x = torch.randn(4, 2, dtype=torch.float64)
    bound = prod.bind(x, x)
    assert list(prod.parts) == before and isinstance(prod.parts, torch.nn.ModuleList)
    assert not hasattr(prod, "_slices") and bound.kernel is not prod
    nested = (prod.on([1, 0]) * Gaussian(2.0).on([0]))
    nested.bind(x, x)
    assert nested.parts[0].columns == [1, 0]
    assert copy.deepcopy(prod).get_params().keys() == {"parts"}


def test_clone_keeps_columns_and_drops_training():
    k = Gaussian(0.5, learnable=True).on([1])
    with torch.no_grad():
        k.raw_scale.fill_(3.0)
    fresh = clone(k)
    assert fresh.columns == [1] and float(fresh.raw_scale) == pytest.approx(
        math.log(math.expm1(1.0)))
    assert fresh.get_params() == k.get_params()
    with pytest.raises(nadaraya.NadarayaError, match="not a parameter"):
        k.set_params(width=2)


def test_per_head_kernel_refuses_other_shapes():
    k = Gaussian(1.0, learnable=True, heads=2)
    x = torch.randn(5, 3)
    with pytest.raises(nadaraya.NadarayaError, match="one scale per head"):
        nadaraya.smooth(x, x, x, k)
