"""The autograd engine's sums: no overflow near the dtype's largest value, float32 accuracy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya

# values near the largest number of each dtype (its maximum is 3.4e38 and 1.8e308),
# and a power of two of their size
NEAR_MAX = {torch.float32: 3e38, torch.float64: 1.7e308}
SHIFT = {torch.float32: 2.0**127, torch.float64: 2.0**1023}


def _near_max_problem(rng: np.random.Generator, dtype: torch.dtype, m: int = 9, n: int = 40):
    """1-D Gaussian problem whose values lie in [0.9, 1] times ``NEAR_MAX``."""
    x = torch.as_tensor(rng.random(n), dtype=dtype)
    q = torch.as_tensor(rng.random(m), dtype=dtype)
    v = torch.as_tensor(NEAR_MAX[dtype] * (0.9 + 0.1 * rng.random((n, 2))), dtype=dtype)
    g = torch.as_tensor(rng.uniform(-1, 1, (m, 2)), dtype=dtype)
    return q, x, v, g


def _run(q, k, v, g, engine):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.3, engine=engine)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), g))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_near_the_largest_number_give_their_mean(rng, dtype):
    q, k, v, g = _near_max_problem(rng, dtype)
    shift = SHIFT[dtype]
    got = _run(q, k, v, g, "autograd")
    # Oracle: the float64 dense engine on the values divided by a power of two
    # (exact), its output and its gradients multiplied back. Tolerance: four
    # times the error of the float32 dense engine on those small values; in
    # float64, where that engine is the oracle itself, four rounding errors of
    # v_j - out_i, relative to |v| over the values' spread.
    small = _run(q.double(), k.double(), v.double() / shift, g.double(), "dense")
    ref = [small[0] * shift, small[1] * shift, small[2] * shift, small[3]]
    same = _run(q, k, v / shift, g, "dense")
    dense = [same[0] * shift, same[1] * shift, same[2] * shift, same[3]]
    spread = float(v.abs().max() / (v.max() - v.min()))
    names = ("out", "d queries", "d keys", "d values")
    for name, a, b, c in zip(names, got, ref, dense, strict=True):
        scale = float(b.abs().max())
        assert scale < torch.finfo(dtype).max  # the exact answer is representable
        assert bool(torch.isfinite(a).all()), name
        err = float((a.double() - b).abs().max()) / scale
        if dtype == torch.float64:
            tol = 4 * torch.finfo(dtype).eps * spread
        else:
            tol = 4 * float((c.double() - b).abs().max()) / scale
        assert err <= tol, (name, err, tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaling_the_values_by_a_power_of_two_scales_the_result_exactly(rng, dtype):
    q, k, v, g = _near_max_problem(rng, dtype)
    shift = SHIFT[dtype]
    big = _run(q, k, v, g, "autograd")
    small = _run(q, k, v / shift, g, "autograd")
    for a, b, factor in zip(big, small, (shift, shift, shift, 1.0), strict=True):
        torch.testing.assert_close(a, b * factor, rtol=4 * torch.finfo(dtype).eps, atol=0)


@pytest.mark.slow
def test_float32_matches_float64_on_a_gaussian_regression(rng):
    """x ~ U(0, 6), y = 2 sin x + N(0, 1), h = 0.3, n = m = 2e4: within 2e-6 of float64.

    The oracle is the float64 dense engine on the float32 inputs; the gradient
    of ``out_i`` with respect to its own query is ``Cov_w(x, y) / h^2``, the
    naive formula from three weighted means of the dense engine.
    """
    n, h = 20_000, 0.3
    x = torch.as_tensor(rng.uniform(0, 6, n), dtype=torch.float32)
    y = (2 * torch.sin(x.double()) + torch.as_tensor(rng.standard_normal(n))).float()
    xq = torch.as_tensor(rng.uniform(0, 6, n), dtype=torch.float32)
    q = xq.clone().requires_grad_()
    out = nadaraya.smooth(q, x, y, "gaussian", bandwidth=h, engine="autograd")
    (dq,) = torch.autograd.grad(out.sum(), q)
    x64, y64 = x.double(), y.double()
    means = nadaraya.smooth(xq.double(), x64, torch.stack([y64, x64, x64 * y64], 1), "gaussian",
                            bandwidth=h, engine="dense")
    ref = means[:, 0]
    ref_dq = (means[:, 2] - means[:, 0] * means[:, 1]) / h**2
    err = float((out.detach().double() - ref).abs().max() / ref.abs().max())
    grad_err = float((dq.double() - ref_dq).abs().max() / ref_dq.abs().max())
    assert err < 2e-6, err
    assert grad_err < 2e-6, grad_err
