"""Kernel objects against their formulas written out independently."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya import kernels as K

from ..engine._oracles import PROFILES, expdot_logk, radial_logk, scaled_distance, sum_logk

rng = np.random.default_rng(0)
Q = torch.tensor(rng.standard_normal((6, 3)))
KEYS = torch.tensor(rng.standard_normal((8, 3)))
BANDWIDTHS = {
    "scalar": 0.7,
    "vector": np.array([0.5, 1.0, 2.0]),
    "metric": np.array([[1.0, 0.5, 0.0], [0.0, 2.0, -1.0]]),
}


def _matrix(logk, q: torch.Tensor = Q, k: torch.Tensor = KEYS) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.array([[logk(list(a), list(b)) for b in k.tolist()] for a in q.tolist()])


def _radial(name: str, form: str) -> K.Kernel:
    b = BANDWIDTHS[form]
    return K.RADIAL[name](metric=b) if form == "metric" else K.RADIAL[name](b)


@pytest.mark.parametrize("form", list(BANDWIDTHS))
@pytest.mark.parametrize("name", list(K.RADIAL))
def test_radial_scores_match_the_formula(name: str, form: str) -> None:
    kernel = _radial(name, form)
    got = kernel.score(Q, KEYS).numpy()
    np.testing.assert_allclose(got, _matrix(radial_logk(name, BANDWIDTHS[form])), rtol=1e-12,
                               atol=1e-12)
    # by name, as smooth receives it
    named = K.get_kernel(name.upper(), BANDWIDTHS[form]).score(Q, KEYS).numpy()
    np.testing.assert_array_equal(named, got)


@pytest.mark.parametrize("name", list(K.RADIAL))
def test_compact_support_and_peak(name: str) -> None:
    kernel = K.RADIAL[name](1.0)
    r = torch.tensor([0.0, 0.5, 0.999, 1.0, 1.001, 3.0], dtype=torch.float64)
    got = kernel.score(torch.zeros(1, 1, dtype=torch.float64), r[:, None])[0].numpy()
    expect = [PROFILES[name](float(t)) for t in r]
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-300)
    assert got[0] == 0.0  # every profile peaks at 0 with log-weight 0
    if kernel.support is not None:
        assert kernel.support == 1.0
        assert np.all(got[r.numpy() > 1.0] == -np.inf)
    else:
        assert np.all(np.isfinite(got))


@pytest.mark.parametrize("scale", [None, 0.3])
def test_expdot_matches_the_formula(scale: float | None) -> None:
    kernel = K.ExpDot(scale) if scale is not None else K.get_kernel("softmax")
    np.testing.assert_allclose(kernel.score(Q, KEYS).numpy(), _matrix(expdot_logk(scale)),
                               rtol=1e-12)
    # The default scale is 1/sqrt of the number of columns the kernel reads.
    on2 = K.ExpDot().on([0, 2]).score(Q, KEYS).numpy()
    np.testing.assert_allclose(on2, _matrix(expdot_logk(None, [0, 2])), rtol=1e-12)


def test_products_and_sums_on_column_groups() -> None:
    bilateral = K.Gaussian(0.5).on([0, 1]) * K.Laplacian(2.0).on([2])
    expect = _matrix(lambda q, k: radial_logk("gaussian", 0.5, [0, 1])(q, k)
                     + radial_logk("laplacian", 2.0, [2])(q, k))
    np.testing.assert_allclose(bilateral.score(Q, KEYS).numpy(), expect, rtol=1e-12)
    total = K.Cauchy(0.4).on([1]) + K.ExpDot(0.2)
    expect = _matrix(sum_logk(radial_logk("cauchy", 0.4, [1]), expdot_logk(0.2)))
    np.testing.assert_allclose(total.score(Q, KEYS).numpy(), expect, rtol=1e-12)
    # nested: a product inside a sum, on a column subset
    nested = (K.Gaussian(1.0).on([0]) * K.Gaussian(2.0).on([1]) + K.Uniform(1.5)).on([0, 1])
    expect = _matrix(sum_logk(
        lambda q, k: radial_logk("gaussian", 1.0, [0])(q, k)
        + radial_logk("gaussian", 2.0, [1])(q, k),
        radial_logk("uniform", 1.5, [0, 1])))
    np.testing.assert_allclose(nested.score(Q, KEYS).numpy(), expect, rtol=1e-12)


def test_composition_flattens_and_leaves_parts_alone() -> None:
    a, b, c = K.Gaussian(1.0).on([0]), K.Gaussian(2.0).on([1]), K.Laplacian(1.0).on([2])
    prod = a * b * c
    assert isinstance(prod, K.ProductKernel) and len(prod.parts) == 3
    total = a + b + c
    assert isinstance(total, K.SumKernel) and len(total.parts) == 3
    # a product restricted to columns is one part of a larger product, not flattened
    outer = (a * b).on([0, 1]) * c
    assert len(outer.parts) == 2
    assert a.columns == [0] and K.Gaussian(1.0).on([0]) is not a
    g = K.Gaussian(1.0)
    assert g.on([1]).columns == [1] and g.columns is None
    with pytest.raises(TypeError):
        _ = g * 2.0


def test_binding_twice_does_not_mix_problems() -> None:
    kernel = K.Gaussian(0.5).on([0]) * K.ExpDot(0.5).on([1, 2])
    small = kernel.bind(Q[:2], KEYS[:3])
    big = kernel.bind(Q, KEYS)
    np.testing.assert_allclose(small.score().numpy(), big.score().numpy()[:2, :3], rtol=1e-12)
    ub = small.upper_bound()
    assert ub.shape == (2,) and torch.all(ub >= small.score().max(1).values - 1e-12)


def test_callable_kernels() -> None:
    def l1(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(q, k, p=1)

    expect = _matrix(lambda q, k: -math.fsum(abs(a - b) for a, b in zip(q, k, strict=True)))
    np.testing.assert_allclose(K.CallableKernel(l1).score(Q, KEYS).numpy(), expect, rtol=1e-12)
    np.testing.assert_allclose(K.get_kernel(l1).score(Q, KEYS).numpy(), expect, rtol=1e-12)
    weights = K.CallableKernel(lambda q, k: torch.exp(l1(q, k)), log=False)
    np.testing.assert_allclose(weights.score(Q, KEYS).numpy(), expect, rtol=1e-12)
    zero = K.CallableKernel(lambda q, k: torch.zeros(q.shape[0], k.shape[0]), log=False)
    assert torch.all(zero.score(Q, KEYS) == -torch.inf)
    # it sees the raw columns it reads
    seen = []
    K.CallableKernel(lambda q, k: seen.append(q.shape[1]) or -torch.cdist(q, k)).on([2]).score(
        Q, KEYS)
    assert seen == [1]


_DOT_KERNELS = {
    "gaussian": K.Gaussian(1.3),
    "gaussian-vector": K.Gaussian(np.array([0.5, 1.0, 2.0])),
    "gaussian-metric": K.Gaussian(metric=BANDWIDTHS["metric"]),
    "softmax": K.ExpDot(),
    "product": K.Gaussian(0.8).on([0]) * K.ExpDot(0.4).on([1, 2]),
}


@pytest.mark.parametrize("name", list(_DOT_KERNELS))
def test_dot_form_equals_the_scores(name: str) -> None:
    bound = _DOT_KERNELS[name].bind(Q, KEYS)
    qa, ka = bound.dot_form()
    np.testing.assert_allclose((qa @ ka.T).numpy(), bound.score().numpy(), rtol=1e-12,
                               atol=1e-12)
    # In float32 the dot form errs by at most what dot_error claims.
    b32 = _DOT_KERNELS[name].bind(Q.float(), KEYS.float())
    qa, ka = b32.dot_form()
    err = float(((qa @ ka.T).double() - bound.score()).abs().max())
    exact32 = float((b32.score().double() - bound.score()).abs().max())
    assert err <= b32.dot_error() + exact32


def test_kernels_without_dot_form() -> None:
    for kernel in (K.Laplacian(1.0), K.Epanechnikov(1.0), K.CallableKernel(lambda q, k: q @ k.T),
                   K.Gaussian(1.0) + K.Gaussian(2.0), K.Gaussian(1.0).on([0]) * K.Cauchy(1.0)):
        assert kernel.bind(Q, KEYS).dot_form() is None


@pytest.mark.parametrize("kernel", [
    K.Gaussian(0.3), K.Tricube(np.array([1.0, 2.0, 0.5])), K.ExpDot(), K.ExpDot(3.0),
    K.Gaussian(0.5).on([0]) * K.ExpDot(0.7).on([1, 2]), K.Gaussian(0.3) + K.Cauchy(0.2),
], ids=repr)
def test_upper_bound_holds(kernel: K.Kernel) -> None:
    bound = kernel.bind(Q * 3, KEYS)
    ub = bound.upper_bound()
    assert ub is not None and ub.shape == (len(Q),)
    assert torch.all(ub >= bound.score().max(1).values)


def test_no_bound_for_callables() -> None:
    kernel = K.CallableKernel(lambda q, k: q @ k.T)
    assert kernel.bind(Q, KEYS).upper_bound() is None
    assert (kernel * K.Gaussian(1.0)).bind(Q, KEYS).upper_bound() is None


@pytest.mark.parametrize("form", list(BANDWIDTHS))
def test_pairs_rank_and_metric_points(form: str) -> None:
    for name in K.RADIAL:
        bound = _radial(name, form).bind(Q, KEYS)
        index = torch.tensor(rng.integers(0, len(KEYS), (len(Q), 5)))
        pairs = bound.pairs(torch.arange(len(Q)), index)
        np.testing.assert_allclose(pairs.numpy(), bound.score().gather(1, index).numpy(),
                                   rtol=1e-12, atol=1e-12)
        qp, kp = bound.metric_points()
        r = torch.cdist(qp, kp).numpy()
        expect = _matrix(lambda a, b: scaled_distance(a, b, BANDWIDTHS[form]))
        np.testing.assert_allclose(r, expect, rtol=1e-12)
        assert torch.equal(bound.rank().argmax(1), torch.tensor(expect.argmin(1)))


def test_trainable_bandwidth_has_the_analytic_gradient() -> None:
    h = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    s = K.Gaussian(h).score(Q, KEYS)
    s.sum().backward()
    d2 = ((Q[:, None, :] - KEYS[None, :, :]) ** 2).sum(-1)
    torch.testing.assert_close(h.grad, (d2 / 0.7**3).sum())
    scale = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    K.ExpDot(scale).score(Q, KEYS).sum().backward()
    torch.testing.assert_close(scale.grad, (Q @ KEYS.T).sum())


def test_get_kernel_names_and_errors() -> None:
    for name in [*K.RADIAL, "softmax", "exp-dot", "ExpDot", "GAUSSIAN"]:
        assert isinstance(K.get_kernel(name), K.Kernel)
    assert isinstance(K.get_kernel("gaussian", np.eye(3)), K.Gaussian)
    assert K.get_kernel("gaussian", np.eye(3)).metric is not None
    g = K.Gaussian(1.0)
    assert K.get_kernel(g) is g
    with pytest.raises(NadarayaError, match="kernel 'rbf' is not known"):
        K.get_kernel("rbf")
    with pytest.raises(NadarayaError, match="bandwidth was given together"):
        K.get_kernel(g, 1.0)
    with pytest.raises(NadarayaError, match="at least two parts"):
        K.ProductKernel([g])
    for bad in (0.0, -1.0, float("nan"), float("inf"), [1.0, 0.0]):
        with pytest.raises(NadarayaError, match="bandwidth"):
            K.Gaussian(bad)
    with pytest.raises(NadarayaError, match="scale must be a positive finite number"):
        K.ExpDot(float("inf"))


def test_repr_names_the_parameters() -> None:
    assert repr(K.Gaussian(0.5)) == "Gaussian(bandwidth=0.5)"
    assert repr(K.ExpDot(0.5).on([1])) == "ExpDot(scale=0.5).on([1])"
    assert "*" in repr(K.Gaussian(1.0).on([0]) * K.Gaussian(2.0).on([1]))
    assert "+" in repr(K.Gaussian(1.0) + K.Laplacian(2.0))


def test_repr_of_a_trainable_bandwidth_does_not_warn() -> None:
    import warnings

    h = torch.tensor(0.5, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert repr(K.Gaussian(h)) == "Gaussian(bandwidth=0.5)"
