"""Derivatives of the Gaussian density against Hermite polynomials, autograd and double loops."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest
import sklearn.base
import torch
from numpy.polynomial import hermite_e
from scipy.stats import norm

import nadaraya
from nadaraya import NadarayaError
from nadaraya.kernels import Gaussian, GaussianDerivative, GaussianLaplacian
from nadaraya.kernels.derivative import hermite_coefficients, laplacian_coefficients

ORDERS = range(9)


def _naive_1d(u: np.ndarray, r: int, g: float) -> np.ndarray:
    """``(-1)^r He_r(u / g) phi(u / g) / g^(r + 1)`` with NumPy's Hermite series."""
    c = np.zeros(r + 1)
    c[r] = 1.0
    z = u / g
    return (-1) ** r * hermite_e.hermeval(z, c) * np.exp(-0.5 * z * z) / (
        math.sqrt(2 * math.pi) * g ** (r + 1))


def _naive(q: np.ndarray, k: np.ndarray, orders: tuple[int, ...], g: np.ndarray) -> np.ndarray:
    """The product kernel ``(m, n)`` by a double loop over pairs and a loop over features."""
    out = np.ones((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            for c, r in enumerate(orders):
                out[i, j] *= _naive_1d(np.array(q[i, c] - k[j, c]), r, float(g[c]))
    return out


def _weights(kernel: GaussianDerivative | GaussianLaplacian, q: np.ndarray,
             k: np.ndarray) -> np.ndarray:
    return kernel.weights(torch.tensor(q), torch.tensor(k)).numpy()


def _autograd_derivative(u: np.ndarray, orders: tuple[int, ...], g: np.ndarray) -> np.ndarray:
    """Mixed partial derivatives of the product normal density by nested autograd."""
    out = []
    for point in u:
        x = torch.tensor(point, requires_grad=True)
        gt = torch.tensor(g)
        f = torch.prod(torch.exp(-0.5 * (x / gt) ** 2) / (math.sqrt(2 * math.pi) * gt))
        for c, r in enumerate(orders):
            for _ in range(r):
                f = torch.autograd.grad(f, x, create_graph=True)[0][c]
        out.append(float(f.detach()))
    return np.array(out)


# -- values -----------------------------------------------------------------------------

@pytest.mark.parametrize("r", ORDERS)
@pytest.mark.parametrize("g", [0.3, 1.0, 2.5])
def test_one_dimension_equals_hermite_series(r: int, g: float) -> None:
    u = np.linspace(-9.0, 9.0, 61) * g / 2
    got = _weights(GaussianDerivative(r, g), u[:, None], np.zeros((1, 1)))[:, 0]
    want = _naive_1d(u, r, g)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max())


@pytest.mark.parametrize("r", ORDERS)
def test_one_dimension_equals_finite_differences(r: int) -> None:
    # order 0 is scipy's normal density; each order the central difference of the one below
    g, step = 0.7, 1e-5
    u = np.linspace(-3.0, 3.0, 13)[:, None]
    zero = np.zeros((1, 1))
    if r == 0:
        got = _weights(GaussianDerivative(0, g), u, zero)[:, 0]
        np.testing.assert_allclose(got, norm.pdf(u[:, 0], scale=g), rtol=1e-14)
        return
    below = GaussianDerivative(r - 1, g)
    diff = (_weights(below, u + step, zero) - _weights(below, u - step, zero))[:, 0] / (2 * step)
    got = _weights(GaussianDerivative(r, g), u, zero)[:, 0]
    np.testing.assert_allclose(got, diff, rtol=1e-6, atol=1e-7 * np.abs(got).max())


@pytest.mark.parametrize("orders", [(1, 2), (0, 3), (2, 0, 1), (4, 1, 2), (8, 0)])
def test_products_equal_autograd_of_the_density(orders: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(orders))
    d = len(orders)
    g = rng.uniform(0.5, 1.5, d)
    q, k = rng.normal(size=(5, d)), rng.normal(size=(4, d))
    got = _weights(GaussianDerivative(orders, g), q, k)
    np.testing.assert_allclose(got, _naive(q, k, orders, g), rtol=1e-12, atol=1e-15)
    u = (q[:, None, :] - k[None, :, :]).reshape(-1, d)
    auto = _autograd_derivative(u, orders, g).reshape(5, 4)
    np.testing.assert_allclose(got, auto, rtol=1e-10, atol=1e-13 * np.abs(auto).max())


def test_one_integer_order_applies_to_every_feature() -> None:
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    np.testing.assert_array_equal(_weights(GaussianDerivative(2, 0.8), q, k),
                                  _weights(GaussianDerivative((2, 2), 0.8), q, k))


def test_high_orders_stay_accurate() -> None:
    u = np.linspace(-6.0, 6.0, 41)
    for r in (9, 16, 30):
        got = _weights(GaussianDerivative(r, 1.0), u[:, None], np.zeros((1, 1)))[:, 0]
        want = _naive_1d(u, r, 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13 * np.abs(want).max())


def test_hermite_coefficients_equal_numpy() -> None:
    for r in ORDERS:
        c = np.zeros(r + 1)
        c[r] = 1.0
        power = hermite_e.herme2poly(c)[r % 2::2][::-1]  # u^2 powers, highest first
        np.testing.assert_array_equal(hermite_coefficients(r), power)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("s", [0, 1, 2, 3])
def test_laplacian_power_equals_the_sum_of_derivatives(d: int, s: int) -> None:
    # Delta^s = sum over a with |a| = s of s! / prod a_i! prod d^(2 a_i) / du_i^(2 a_i)
    rng = np.random.default_rng(10 * d + s)
    q, k, g = rng.normal(size=(6, d)), rng.normal(size=(5, d)), 0.6
    want = np.zeros((6, 5))
    for a in itertools.product(range(s + 1), repeat=d):
        if sum(a) == s:
            coef = math.factorial(s) / math.prod(math.factorial(x) for x in a)
            want += coef * _naive(q, k, tuple(2 * x for x in a), np.full(d, g))
    got = _weights(GaussianLaplacian(s, g), q, k)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13 * np.abs(want).max())


def test_laplacian_cubed_equals_the_power_sums_of_second_derivatives() -> None:
    # the formula of Wand and Jones' eta6 in terms of h_r = He_r(u_i / g) / g^r per feature
    rng = np.random.default_rng(3)
    q, k, g = rng.normal(size=(7, 4)), rng.normal(size=(6, 4)), 0.45
    u = (q[:, None, :] - k[None, :, :]) / g
    u2 = u * u
    h2 = (u2 - 1) / g**2
    h4 = (u2 * u2 - 6 * u2 + 3) / g**4
    h6 = (u2**3 - 15 * u2**2 + 45 * u2 - 15) / g**6
    p1, p2, p3 = h2.sum(-1), (h2 * h2).sum(-1), (h2**3).sum(-1)
    lap3 = (h6.sum(-1) + 3 * (h4.sum(-1) * p1 - (h4 * h2).sum(-1)) + p1**3 - 3 * p1 * p2
            + 2 * p3)
    phi = np.exp(-0.5 * u2.sum(-1)) / ((2 * math.pi) ** 2 * g**4)
    np.testing.assert_allclose(_weights(GaussianLaplacian(3, g), q, k), phi * lap3, rtol=1e-11,
                               atol=1e-12 * np.abs(phi * lap3).max())
    assert laplacian_coefficients(2, 4) == [1.0, -12.0, 24.0]  # t^2 - 2 (d + 2) t + d (d + 2)


# -- engine sums --------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["dense", "streamed", "auto"])
def test_unnormalized_sums_equal_a_double_loop(engine: str) -> None:
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(9, 2)), rng.normal(size=(13, 2)), rng.normal(size=(13, 3))
    g = np.array([0.5, 0.9])
    K = _naive(q, k, (3, 2), g)
    want = np.array([[sum(K[i, j] * v[j, c] for j in range(13)) for c in range(3)]
                     for i in range(9)])
    with nadaraya.config_context(key_block=4, query_block=3):
        got = nadaraya.smooth(q, k, v, GaussianDerivative((3, 2), g), normalize=False,
                              engine=engine)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max())


def test_density_functional_equals_the_naive_pair_sum() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(40) ** 3
    w = rng.integers(1, 4, 40).astype(float)
    g = 0.4
    naive = sum(w[i] * w[j] * _naive_1d(np.array(x[i] - x[j]), 6, g)
                for i in range(40) for j in range(40))
    rows = nadaraya.smooth(x, x, w, GaussianDerivative(6, g), normalize=False)
    assert float(w @ rows) == pytest.approx(float(naive), rel=1e-12)


def test_float32_follows_float64() -> None:
    rng = np.random.default_rng(6)
    x = rng.normal(size=(30, 2))
    kern = GaussianDerivative((2, 1), 0.7)
    lo = nadaraya.smooth(torch.tensor(x, dtype=torch.float32), torch.tensor(x, dtype=torch.float32),
                         torch.ones(30), kern, normalize=False)
    hi = nadaraya.smooth(x, x, np.ones(30), kern, normalize=False)
    assert lo.dtype == torch.float32
    np.testing.assert_allclose(lo.numpy(), hi, rtol=1e-4, atol=1e-5 * np.abs(hi).max())


def test_gradient_in_the_queries_is_the_next_order() -> None:
    rng = np.random.default_rng(7)
    q = torch.tensor(rng.normal(size=(5, 1)), requires_grad=True)
    k, v = torch.tensor(rng.normal(size=(8, 1))), torch.tensor(rng.normal(size=8))
    out = nadaraya.smooth(q, k, v, GaussianDerivative(3, 0.6), normalize=False)
    (grad,) = torch.autograd.grad(out.sum(), q)
    nxt = nadaraya.smooth(q.detach(), k, v, GaussianDerivative(4, 0.6), normalize=False)
    np.testing.assert_allclose(grad[:, 0].numpy(), nxt.numpy(), rtol=1e-11, atol=1e-13)


def test_learnable_bandwidth_starts_at_the_given_one_and_trains() -> None:
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.normal(size=(12, 1)))
    fixed = GaussianDerivative(2, 0.5)
    learn = GaussianDerivative(2, 0.5, learnable=True)
    assert [n for n, _ in learn.named_parameters()] == ["raw_scale"]
    a = nadaraya.smooth(x, x, torch.ones(12), learn, normalize=False)
    np.testing.assert_allclose(a.detach().numpy(),
                               nadaraya.smooth(x, x, torch.ones(12), fixed, normalize=False),
                               rtol=1e-14)
    a.sum().backward()
    assert learn.raw_scale.grad is not None and bool(torch.isfinite(learn.raw_scale.grad))


def test_batched_points_for_attention() -> None:
    rng = np.random.default_rng(9)
    q, k = torch.tensor(rng.normal(size=(2, 3, 4, 2))), torch.tensor(rng.normal(size=(2, 3, 5, 2)))
    kern = GaussianDerivative((1, 2), 0.8)
    got = kern.scores(q, k)
    assert got.shape == (2, 3, 4, 5)
    np.testing.assert_allclose(got[1, 2].numpy(), _weights(kern, q[1, 2].numpy(),
                                                            k[1, 2].numpy()), rtol=1e-13)


def test_parameter_protocol() -> None:
    kern = GaussianDerivative((1, 2), [0.5, 1.0])
    assert kern.get_params() == {"order": (1, 2), "bandwidth": [0.5, 1.0], "learnable": False}
    assert repr(sklearn.base.clone(kern)) == repr(kern)
    assert repr(pickle.loads(pickle.dumps(kern))) == repr(kern)
    assert kern.set_params(order=3).orders(2) == (3, 3)
    assert repr(GaussianLaplacian(3, 0.2)) == "GaussianLaplacian(power=3, bandwidth=0.2)"


# -- what the engine does with a signed kernel ------------------------------------------------

def test_normalized_smooth_divides_by_the_signed_row_sum() -> None:
    rng = np.random.default_rng(10)
    q, k, v = rng.normal(size=(6, 1)), rng.normal(size=(9, 1)), rng.normal(size=9)
    K = _naive(q, k, (2,), np.array([0.8]))
    got = nadaraya.smooth(q, k, v, GaussianDerivative(2, 0.8))
    np.testing.assert_allclose(got, K @ v / K.sum(1), rtol=1e-10)


def test_zero_signed_row_sum_is_an_empty_row() -> None:
    # phi' is odd: keys placed symmetrically about the query sum to zero
    keys = np.array([-1.0, -0.3, 0.3, 1.0])
    with pytest.raises(NadarayaError, match="signed weight sum of zero"):
        nadaraya.smooth(np.zeros(1), keys, np.arange(4.0), GaussianDerivative(1, 0.5))
    out = nadaraya.smooth(np.zeros(1), keys, np.arange(4.0), GaussianDerivative(1, 0.5),
                          empty="nan")
    assert np.isnan(out[0])


def test_refusals_name_the_kernel() -> None:
    x = np.linspace(-1.0, 1.0, 9)
    kern = GaussianDerivative(2, 0.5)
    with pytest.raises(NadarayaError, match="signed"):
        nadaraya.weights(x, x, kern)
    with pytest.raises(NadarayaError, match="return_lse"):
        nadaraya.smooth(x, x, x, kern, return_lse=True)
    with pytest.raises(NadarayaError, match="combines the signed kernel"):
        nadaraya.smooth(np.c_[x, x], np.c_[x, x], x, kern.on([0]) * Gaussian(1.0).on([1]),
                        normalize=False)
    for engine in ("sweep", "neighbors", "pruned", "compiled", "fused", "autograd"):
        with pytest.raises(NadarayaError, match=r"GaussianDerivative\(order=2"):
            nadaraya.smooth(x, x, x, kern, normalize=False, engine=engine)
    why = nadaraya.explain(x, x, x, kern, normalize=False, tolerance=1e-6)
    assert why.engine in ("dense", "streamed")
    assert "GaussianDerivative" in why.reasons["fgt"] and "GaussianDerivative" in why.reasons[
        "binned"]
    np.testing.assert_allclose(
        nadaraya.smooth(x, x, x, kern, normalize=False, tolerance=1e-6),
        nadaraya.smooth(x, x, x, kern, normalize=False), rtol=0, atol=0)


def test_nadaraya_watson_regressor_refuses_a_signed_kernel() -> None:
    from nadaraya.estimators import NadarayaWatsonRegressor

    x = np.linspace(-1.0, 1.0, 9)[:, None]
    with pytest.raises(NadarayaError, match="signed"):
        NadarayaWatsonRegressor(kernel=GaussianDerivative(2, 0.5), bandwidth=None).fit(
            x, x[:, 0]).predict(x)


# -- hostile inputs --------------------------------------------------------------------------

@pytest.mark.parametrize("order", [-1, 1.5, 2.0, True, "2", None, [], [1, -2], (0.5,)])
def test_bad_orders(order: object) -> None:
    with pytest.raises(NadarayaError, match="order"):
        GaussianDerivative(order)  # type: ignore[arg-type]


@pytest.mark.parametrize("power", [-1, 2.5, "3"])
def test_bad_powers(power: object) -> None:
    with pytest.raises(NadarayaError, match="power"):
        GaussianLaplacian(power)  # type: ignore[arg-type]


@pytest.mark.parametrize("bandwidth", [0.0, -1.0, np.nan, np.inf, [1.0, 0.0], np.ones((2, 2))])
def test_bad_bandwidths(bandwidth: object) -> None:
    with pytest.raises(NadarayaError, match="bandwidth"):
        GaussianDerivative(2, bandwidth)


def test_laplacian_takes_one_bandwidth() -> None:
    with pytest.raises(NadarayaError, match="a number"):
        GaussianLaplacian(1, [0.5, 1.0])


def test_shapes_that_do_not_fit() -> None:
    x = np.zeros((4, 2))
    with pytest.raises(NadarayaError, match="one order per feature"):
        nadaraya.smooth(x, x, np.ones(4), GaussianDerivative((2, 2, 2)), normalize=False)
    with pytest.raises(NadarayaError, match="one value per feature"):
        nadaraya.smooth(x, x, np.ones(4), GaussianDerivative(2, [1.0, 2.0, 3.0]),
                        normalize=False)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_points(bad: float) -> None:
    x = np.linspace(0.0, 1.0, 5)
    y = x.copy()
    y[2] = bad
    with pytest.raises(NadarayaError, match="queries contains NaN"):
        nadaraya.smooth(y, x, np.ones(5), GaussianDerivative(2), normalize=False)
    with pytest.raises(NadarayaError, match="keys contains NaN"):
        nadaraya.smooth(x, y, np.ones(5), GaussianDerivative(2), normalize=False)


def test_empty_one_row_and_overflow() -> None:
    with pytest.raises(NadarayaError, match="empty"):
        nadaraya.smooth(np.zeros((0, 1)), np.zeros((3, 1)), np.ones(3), GaussianDerivative(2),
                        normalize=False)
    one = nadaraya.smooth(np.zeros(1), np.zeros(1), np.ones(1), GaussianDerivative(2, 0.5),
                          normalize=False)
    np.testing.assert_allclose(one, _naive_1d(np.zeros(1), 2, 0.5), rtol=1e-15)
    with pytest.raises(NadarayaError, match="non-finite weights"):
        x = np.linspace(-100.0, 100.0, 5)
        nadaraya.smooth(x, x, np.ones(5), GaussianDerivative(400, 0.01), normalize=False)
