"""Random-feature sums against the float64 dense engine: unbiased, consistent, stable.

The estimate is random, so every check is statistical with fixed seeds:
errors measured against the exact sums, in units of the standard error the
method states. A wrong formula fails them: the norm term ``||x||^2 / 2``
off by a tenth, standard errors off by a factor of two, or projections of
fixed length instead of Gaussian ones.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya import kernels as K

from ._helpers import attention_problem, estimate, exact

SEEDS = range(8)


def _z_scores(q, k, v, kernel, features, bandwidth=None):
    """Errors of total, acc and mean in stated standard errors over SEEDS, and the
    root mean square of the measured and of the stated relative errors of total."""
    lse, acc = exact(q, k, v, kernel, bandwidth)
    total = lse.exp()
    mean = acc / total[:, None]
    z = {"total": [], "acc": [], "mean": []}
    rel, stated = [], []
    for seed in SEEDS:
        e = estimate(q, k, v, kernel, features, seed, bandwidth)
        for name, ref in (("total", total), ("acc", acc), ("mean", mean)):
            z[name].append((e[name] - ref) / e[name + "_err"])
        rel.append((e["total"] - total) / total)
        stated.append(e["total_err"] / total)
    return ({name: torch.stack(zs) for name, zs in z.items()},
            torch.stack(rel).square().mean().sqrt(), torch.stack(stated).square().mean().sqrt())


def _assert_calibrated(z: torch.Tensor) -> None:
    # On average one stated standard error, 95% within three. The features are
    # heavy-tailed (log-normal), so the sample spread of one draw now and then
    # understates the error: a few reach six standard errors, none eight here.
    assert float(z.square().mean().sqrt()) <= 1.5
    assert float((z.abs() <= 3.0).double().mean()) >= 0.95
    assert float(z.abs().max()) <= 8.0


@pytest.mark.parametrize("spread, d", [(0.25, 8), (0.5, 8), (0.5, 16)])
def test_softmax_error_within_stated_standard_errors(spread, d):
    q, k, v = attention_problem(40, 300, d, 3, spread)
    z, _, _ = _z_scores(q, k, v, "softmax", 1024)
    for name in ("total", "acc", "mean"):
        _assert_calibrated(z[name])


def test_error_shrinks_like_one_over_sqrt_features():
    q, k, v = attention_problem(40, 300, 8, 3, 0.5)
    _, rel_small, stated_small = _z_scores(q, k, v, "softmax", 64)
    _, rel_large, stated_large = _z_scores(q, k, v, "softmax", 16 * 64)
    # sixteen times the features: a quarter of the error (measured and stated)
    assert 2.0 <= float(rel_small / rel_large) <= 8.0
    assert 3.0 <= float(stated_small / stated_large) <= 5.3


def test_unbiased_mean_over_many_seeds():
    q, k, v = attention_problem(10, 200, 8, 2, 0.25)
    lse, acc = exact(q, k, v, "softmax")
    draws = [estimate(q, k, v, "softmax", 16, seed) for seed in range(400)]
    totals = torch.stack([e["total"] for e in draws])
    accs = torch.stack([e["acc"] for e in draws])
    for est, ref in ((totals, lse.exp()), (accs, acc)):
        z = (est.mean(0) - ref) / (est.std(0) / len(draws) ** 0.5)
        assert float(z.abs().max()) <= 4.0


@pytest.mark.parametrize("kernel, bandwidth", [
    ("gaussian", 2.0),
    (K.Gaussian([1.5, 2.0, 2.5]), None),
    (K.Gaussian(2.0).on([0, 1]) * K.ExpDot(0.5).on([2]), None),
])
def test_gaussian_and_products(kernel, bandwidth):
    q, k, v = attention_problem(30, 250, 3, 2, 0.5, seed=1)
    z, _, _ = _z_scores(q, k, v, kernel, 1024, bandwidth)
    for name in ("total", "acc", "mean"):
        _assert_calibrated(z[name])


@pytest.mark.parametrize("kernel, bandwidth, spread", [
    ("softmax", None, 0.5), ("gaussian", 2.0, 1.0), (K.ExpDot(scale=0.3), None, 1.0)])
def test_proven_spread_bound_holds(kernel, bandwidth, spread):
    # the measured spread over draws never exceeds the proven bound on the standard
    # deviation (twice it allows for the sampling of eight draws)
    q, k, v = attention_problem(30, 200, 4, 2, spread, seed=7)
    lse, acc = exact(q, k, v, kernel, bandwidth)
    total, scale = lse.exp(), v.abs().max()
    draws = [estimate(q, k, v, kernel, 64, seed, bandwidth) for seed in SEEDS]
    bound = draws[0]["info"]["relative_sd_bound"]
    rel_total = torch.stack([(e["total"] - total) / total for e in draws])
    rel_acc = torch.stack([(e["acc"] - acc) / (total[:, None] * scale) for e in draws])
    assert bool((rel_total.square().mean(0).sqrt() <= 2 * bound).all())
    assert bool((rel_acc.square().mean(0).sqrt() <= 2 * bound[:, None]).all())


def test_gaussian_far_from_origin_is_centred():
    # a common shift changes no distance; the estimate is as good as at the origin
    q, k, v = attention_problem(20, 200, 2, 1, 1.0, seed=2)
    near = estimate(q, k, v, "gaussian", 256, 0, bandwidth=2.0)
    far = estimate(q + 1e4, k + 1e4, v, "gaussian", 256, 0, bandwidth=2.0)
    torch.testing.assert_close(far["total"], near["total"], rtol=1e-6, atol=0)
    torch.testing.assert_close(far["acc"], near["acc"], rtol=1e-6, atol=1e-9)


def test_tiny_scores_do_not_underflow():
    # scores near -1600: exp underflows float64, the exact engines work in logs, and
    # with ||a + b|| small the estimate is nearly exact; its offset carries the scale
    q, k, v = attention_problem(15, 100, 4, 2, 0.05, seed=3)
    u = torch.nn.functional.normalize(torch.ones(1, 4, dtype=torch.float64))
    q, k = q + 40.0 * u, k - 40.0 * u
    kernel = K.ExpDot(scale=1.0)
    lse, _ = exact(q, k, v, kernel)
    assert float(lse.max()) < -1500
    e = estimate(q, k, v, kernel, 256, 0)
    stated = e["sums"].total_err / e["sums"].total
    assert e["info"]["sd_bound_max"] < 0.05
    assert bool(torch.isfinite(e["lse"]).all())
    assert bool(((e["lse"] - lse).abs() <= 6 * stated + 1e-12).all())
    mean = e["sums"].acc / e["sums"].total[:, None]
    ref = nadaraya.smooth(q, k, v, kernel, engine="dense")
    assert float((mean - ref).abs().max()) < 1e-2


def test_huge_scores_stay_finite():
    # scores near +1600 (an absolute sum overflows float64): the scaled sums stay
    # finite and positive, the means stay within the values' range, and the proven
    # bound says the estimate means nothing (its spread is exp(||a + b||^2) ~ e^6400)
    q, k, v = attention_problem(15, 100, 4, 2, 1.0, seed=4)
    u = torch.nn.functional.normalize(torch.ones(1, 4, dtype=torch.float64))
    q, k = q + 40.0 * u, k + 40.0 * u
    e = estimate(q, k, v, K.ExpDot(scale=1.0), 64, 0)
    sums = e["sums"]
    for t in (sums.total, sums.acc, sums.total_err, sums.acc_err, e["info"]["offset"]):
        assert bool(torch.isfinite(t).all())
    assert bool((sums.total > 0).all())
    assert e["info"]["sd_bound_median"] == float("inf")
    mean = sums.acc / sums.total[:, None]
    assert bool((mean >= v.min(0).values - 1e-12).all())
    assert bool((mean <= v.max(0).values + 1e-12).all())


def test_key_and_query_blocks_change_nothing_but_rounding():
    q, k, v = attention_problem(50, 300, 6, 3, 0.5, seed=5)
    whole = estimate(q, k, v, "softmax", 16, 7)
    with nadaraya.config_context(working_memory=0.01):  # blocks of 16 rows
        blocked = estimate(q, k, v, "softmax", 16, 7)
    for name in ("total", "acc", "total_err", "acc_err"):
        torch.testing.assert_close(blocked[name], whole[name], rtol=1e-10, atol=1e-300)


def test_float32_inputs_give_the_float64_estimate():
    q, k, v = attention_problem(20, 150, 8, 2, 0.5, seed=6)
    q32, k32, v32 = q.float(), k.float(), v.float()
    e32 = estimate(q32, k32, v32, "softmax", 128, 3)
    e64 = estimate(q32.double(), k32.double(), v32.double(), "softmax", 128, 3)
    assert e32["sums"].total.dtype == torch.float64
    # the prepared points differ by float32 rounding only
    torch.testing.assert_close(e32["total"], e64["total"], rtol=1e-5, atol=0)
    torch.testing.assert_close(e32["acc"], e64["acc"], rtol=1e-5, atol=1e-5)


@given(
    m=st.integers(1, 6), n=st.integers(1, 12), d=st.integers(1, 4),
    log_scale=st.floats(-3.0, 2.5), duplicates=st.booleans(), heavy=st.booleans(),
    gaussian=st.booleans(), seed=st.integers(0, 2**32 - 1),
)
def test_any_problem_in_range_gives_finite_sums_and_means_within_the_values(
        m, n, d, log_scale, duplicates, heavy, gaussian, seed):
    # whatever the scale of the scores (up to about +-10^5), clustering or tails:
    # positive features give a positive total, finite errors, and a mean that is a
    # convex combination of the values
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(m, d, generator=gen, dtype=torch.float64)
    k = torch.randn(n, d, generator=gen, dtype=torch.float64)
    if heavy:
        q, k = q ** 3, k ** 3
    if duplicates:
        k[n // 2:] = k[0].clone()
    q, k = q * 10.0 ** log_scale, k * 10.0 ** log_scale
    v = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    kernel = K.Gaussian(10.0 ** log_scale) if gaussian else K.ExpDot(scale=1.0)
    e = estimate(q, k, v, kernel, 8, seed)
    sums = e["sums"]
    for t in (sums.total, sums.acc, sums.total_err, sums.acc_err, e["mean_err"],
              e["info"]["offset"]):
        assert bool(torch.isfinite(t).all())
    assert bool((sums.total > 0).all()) and bool((sums.total <= n).all())
    mean = sums.acc / sums.total[:, None]
    slack = 1e-12 * v.abs().max()
    assert bool((mean >= v.min(0).values - slack).all())
    assert bool((mean <= v.max(0).values + slack).all())
