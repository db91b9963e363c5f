"""The binned method through the public API: results, plan, and refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine._api import build_job
from nadaraya.engine.binned import BinnedMethod
from nadaraya.kernels import Gaussian, Kernel
from nadaraya.masks import LeaveOneOut

from ._problems import KERNELS, make_job

METHOD = BinnedMethod()


@settings(max_examples=12, deadline=None)
@given(kernel=st.sampled_from(KERNELS), d=st.sampled_from([1, 2]),
       tolerance=st.sampled_from([1e-2, 1e-3]), seed=st.integers(0, 2**31 - 1))
def test_smooth_within_tolerance_of_dense(kernel, d, tolerance, seed):
    rng = np.random.default_rng(seed)
    n = 1500 if d == 1 else 600
    x = rng.uniform(0.0, 6.0, (n, d))
    y = np.column_stack([2 * np.sin(x[:, 0]) + rng.standard_normal(n), rng.uniform(0, 1e3, n)])
    q = np.concatenate([rng.uniform(-1.0, 7.0, (80, d)), np.full((1, d), 50.0)])
    h = 0.3 if d == 1 else 1.0
    tolerance = tolerance if d == 1 else 3e-2
    got = nadaraya.smooth(q, x, y, kernel, bandwidth=h, tolerance=tolerance, engine="binned",
                          empty="nan")
    want = nadaraya.smooth(q, x, y, kernel, bandwidth=h, engine="dense", empty="nan")
    scale = np.abs(y).max(axis=0)
    both = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), both)
    assert np.all(np.abs(got - want)[both] <= (tolerance * scale * np.ones_like(got))[both])


def test_leave_one_out_within_tolerance():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 6.0, 2000)
    y = np.sin(x) + 0.1 * rng.standard_normal(2000)
    got = nadaraya.smooth(x, x, y, "gaussian", LeaveOneOut(), bandwidth=0.2, tolerance=1e-3,
                          engine="binned")
    want = nadaraya.smooth(x, x, y, "gaussian", LeaveOneOut(), bandwidth=0.2, engine="dense")
    assert np.abs(got - want).max() <= 1e-3 * np.abs(y).max()


def test_explain_reports_the_plan():
    x = np.linspace(0.0, 6.0, 3000)
    expl = nadaraya.explain(x, x, np.sin(x), bandwidth=0.3, tolerance=1e-4, engine="binned")
    assert expl.engine == "binned"
    plan = expl.plan
    for key in ("cell", "grid", "fft", "truncation_radius", "bound", "bulk_bound"):
        assert key in plan
    assert plan["bulk_bound"] <= 1e-4 / 4
    # the cell shrinks like the square root of the tolerance
    finer = nadaraya.explain(x, x, np.sin(x), bandwidth=0.3, tolerance=1e-6, engine="binned")
    assert 5.0 < plan["cell"] / finer.plan["cell"] < 20.0


def _job(kernel="gaussian", d=1, mask=None, bandwidth=0.3):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 6.0, (500, d))
    job, _ = build_job(x, x, np.sin(x[:, 0]), kernel, mask,
                       None if isinstance(kernel, Kernel) else bandwidth)
    return job


@pytest.mark.parametrize(("job", "words"), [
    (lambda: _job("uniform"), "uniform kernel jumps"),
    (lambda: _job(Gaussian(0.3) * Gaussian(0.3).on([1]), d=2), "radial kernels"),
    (lambda: _job(d=3), "1 or 2 dimensions"),
    (lambda: _job(mask=LeaveOneOut()), "mask"),
    (lambda: _job(bandwidth=1e-4), "working_memory"),
])
def test_refusals_name_the_reason(job, words):
    why = METHOD.refuse(job(), 1e-4)
    assert why is not None and words in why


def test_plan_of_a_refused_job_says_why():
    job = _job("uniform")
    assert METHOD.plan(job, 1e-3)["refused"] == METHOD.refuse(job, 1e-3)


def test_refuses_gradients():
    x = torch.linspace(0.0, 6.0, 200, dtype=torch.float64, requires_grad=True)
    job = make_job(x, x.detach(), torch.sin(x.detach()), "gaussian", 0.3)
    assert "gradients" in METHOD.refuse(job, 1e-3)


def test_refuses_a_grid_slower_than_the_exact_sums():
    # two keys far apart on a fine grid: a huge grid for four products
    job = make_job(np.array([0.0, 1.0]), np.array([0.0, 5e4]), np.ones(2), "cauchy", 1.0)
    with nadaraya.config_context(working_memory=2**20):
        why = METHOD.refuse(job, 1e-4)
    assert why is not None and "more than the exact sums" in why


def test_requested_but_refused_raises_by_name():
    x = np.linspace(0.0, 6.0, 100)
    with pytest.raises(NadarayaError, match="engine='binned'"):
        nadaraya.smooth(x, x, x, "uniform", bandwidth=0.3, tolerance=1e-3, engine="binned")


def test_float32_inputs_sum_in_float64():
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.uniform(0.0, 6.0, 1000).astype(np.float32))
    y = torch.sin(x)
    got = nadaraya.smooth(x, x, y, bandwidth=0.3, tolerance=1e-3, engine="binned")
    assert got.dtype == torch.float32
    want = nadaraya.smooth(x.double(), x.double(), y.double(), bandwidth=0.3, engine="dense")
    assert float((got.double() - want).abs().max()) <= 1e-3 * float(y.abs().max()) + 2e-6
