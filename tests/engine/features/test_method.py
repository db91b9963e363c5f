"""The random-feature method: seeds, refusals, shapes, arguments, gradients, devices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine._api import build_job
from nadaraya.engine.features import RandomFeatures, as_state, random_feature_sums
from nadaraya.engine.features._draw import orthogonal_gaussian

from ._helpers import attention_problem, estimate, exact

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _job(kernel="softmax", mask=None, bandwidth=None, m=12, n=40, d=5, p=2):
    q, k, v = attention_problem(m, n, d, p, 0.5)
    return build_job(q, k, v, kernel, mask, bandwidth)[0]


# -- seeds -------------------------------------------------------------------------
def test_one_seed_gives_one_result():
    job = _job()
    a, info_a = random_feature_sums(job, 32, 5)
    b, info_b = random_feature_sums(job, 32, 5)
    c, _ = random_feature_sums(job, 32, 6)
    for name in ("total", "acc", "total_err", "acc_err"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert torch.equal(info_a["offset"], info_b["offset"])
    assert not torch.equal(a.total, c.total)


def test_no_seed_draws_one_and_reports_it():
    job = _job()
    a, info = random_feature_sums(job, 32, None)
    assert isinstance(info["seed"], int)
    again, _ = random_feature_sums(job, 32, info["seed"])
    assert torch.equal(a.acc, again.acc)
    method = RandomFeatures(features=32)
    assert method.plan(job)["seed"] == method.sums(job)[1]["seed"] == method.seed


def test_orthogonal_blocks_of_standard_gaussians():
    w = orthogonal_gaussian(10, 4, seed=0)
    assert w.shape == (10, 4)
    for block in (w[0:4], w[4:8], w[8:10]):
        gram = block @ block.T
        off = gram - torch.diag(torch.diag(gram))
        assert float(off.abs().max()) < 1e-12
    # every row is N(0, I): the mean of w w^T over many draws is the identity
    rows = orthogonal_gaussian(4000, 4, seed=1)
    cov = rows.T @ rows / rows.shape[0]
    assert float((cov - torch.eye(4, dtype=torch.float64)).abs().max()) < 0.1
    assert orthogonal_gaussian(3, 0, seed=0).shape == (3, 0)


# -- refusals and arguments ----------------------------------------------------------
@pytest.mark.parametrize("kernel, mask, bandwidth, words", [
    ("laplacian", None, 1.0, "exp-dot kernel"),
    (K.Gaussian(1.0) + K.Gaussian(2.0), None, None, "exp-dot kernel"),
    (lambda q, k: -(q @ k.T).abs(), None, None, "exp-dot kernel"),
    ("softmax", M.Causal(), None, "mask"),
])
def test_refuses_what_it_cannot_estimate(kernel, mask, bandwidth, words):
    job = _job(kernel, mask, bandwidth)
    why = RandomFeatures(seed=0).refuse(job)
    assert why is not None and words in why
    with pytest.raises(NadarayaError, match=words):
        random_feature_sums(job, 16, 0)


def test_never_serves_a_tolerance():
    job = _job()
    method = RandomFeatures(seed=0)
    assert method.refuse(job) is None
    assert "never chosen for a tolerance" in method.refuse(job, 1e-3)
    with pytest.raises(NadarayaError, match="tolerance"):
        method.sums(job, 1e-3)


def test_refuses_points_beyond_its_range():
    q, k, v = attention_problem(3, 4, 2, 1, 1.0)
    job = build_job(q * 1e150, k, v, K.ExpDot(scale=1.0), None, None)[0]
    assert "1e290" in RandomFeatures(seed=0).refuse(job)


def test_numpy_integers_are_integers():
    a, info = random_feature_sums(_job(), np.int64(16), np.uint32(3))
    b, _ = random_feature_sums(_job(), 16, 3)
    assert info["features"] == 16 and info["seed"] == 3
    assert torch.equal(a.acc, b.acc)


def test_features_beyond_the_working_memory_are_refused():
    job = _job()
    with nadaraya.config_context(working_memory=1):
        assert "working-memory budget" in RandomFeatures(features=10_000, seed=0).refuse(job)
        with pytest.raises(NadarayaError, match="features=10000 need"):
            random_feature_sums(job, 10_000, 0)
        assert RandomFeatures(features=256, seed=0).refuse(job) is None


@pytest.mark.parametrize("features", [1, 0, 2.5, True, "256"])
def test_features_must_be_an_integer_of_two_or_more(features):
    with pytest.raises(NadarayaError, match="features must be an integer >= 2"):
        random_feature_sums(_job(), features, 0)
    with pytest.raises(NadarayaError, match="features"):
        RandomFeatures(features=features)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.0, "1", False])
def test_seed_must_be_a_non_negative_integer(seed):
    with pytest.raises(NadarayaError, match="seed must be None or an integer"):
        random_feature_sums(_job(), 16, seed)


def test_plan_names_its_parameters_and_the_nature_of_its_error():
    job = _job(d=5)
    plan = RandomFeatures(features=12, seed=3).plan(job)
    assert plan["method"] == "random-features"
    assert (plan["features"], plan["seed"], plan["orthogonal_block"], plan["blocks"]) == (
        12, 3, 5, 3)
    assert "not proven" in plan["error"]
    # linear in the number of points
    method = RandomFeatures(features=12)
    assert method.cost(_job(m=24, n=80, d=5)) == 2 * method.cost(job)


# -- shapes ----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0, 1, 5])
def test_value_columns(p):
    q, k, v = attention_problem(7, 30, 3, p, 0.5)
    values = None if p == 0 else v
    job = build_job(q, k, values, "softmax", None, None)[0]
    sums, info = random_feature_sums(job, 16, 0)
    assert sums.total.shape == sums.total_err.shape == info["offset"].shape == (7,)
    assert sums.acc.shape == sums.acc_err.shape == (7, p)
    assert all(t.dtype == torch.float64 for t in (sums.total, sums.acc, sums.acc_err))


def test_one_key_gives_its_value():
    # with one key every weight is that key's: the mean is its value to rounding
    q, k, v = attention_problem(6, 1, 4, 3, 0.5)
    e = estimate(q, k, v, "softmax", 16, 0)
    mean = e["sums"].acc / e["sums"].total[:, None]
    torch.testing.assert_close(mean, v.expand(6, 3), rtol=1e-14, atol=1e-15)
    assert bool((e["sums"].total_err > 0).all())  # one key, still a random estimate


def test_one_query():
    q, k, v = attention_problem(1, 50, 4, 2, 0.5)
    _, acc = exact(q, k, v, "softmax")
    e = estimate(q, k, v, "softmax", 512, 0)
    assert bool(((e["acc"] - acc).abs() <= 6 * e["acc_err"]).all())


def test_as_state_gives_the_engines_mean():
    q, k, v = attention_problem(20, 80, 4, 2, 0.3)
    job = build_job(q, k, v, "softmax", None, None)[0]
    sums, info = random_feature_sums(job, 512, 0)
    state = as_state(sums, info["offset"], job.dtype)
    torch.testing.assert_close(state.lse, info["offset"] + torch.log(sums.total))
    ref = nadaraya.smooth(q, k, v, "softmax", engine="dense")
    assert float((state.mean() - ref).abs().max()) < 0.05


# -- gradients and devices ---------------------------------------------------------------
def test_gradients_are_those_of_the_estimate():
    q, k, v = attention_problem(3, 6, 2, 2, 0.5)

    def total_and_acc(qq, kk, vv):
        job = build_job(qq, kk, vv, K.Gaussian(1.5) * K.ExpDot(0.7).on([1]), None, None)[0]
        sums, info = random_feature_sums(job, 8, 0)
        scale = torch.exp(info["offset"])
        return sums.total * scale, sums.acc * scale[:, None]

    inputs = tuple(t.clone().requires_grad_(True) for t in (q, k, v))
    assert torch.autograd.gradcheck(total_and_acc, inputs)


@CUDA
def test_cuda_matches_cpu():
    q, k, v = attention_problem(30, 200, 8, 3, 0.5)
    cpu = estimate(q, k, v, "softmax", 128, 4)
    gpu = estimate(q.cuda(), k.cuda(), v.cuda(), "softmax", 128, 4)
    assert gpu["sums"].total.device.type == "cuda"
    for name in ("total", "acc", "total_err", "acc_err"):
        torch.testing.assert_close(gpu[name].cpu(), cpu[name], rtol=1e-10, atol=1e-12)
