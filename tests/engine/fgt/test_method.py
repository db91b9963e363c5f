"""The method's protocol: what it refuses and why, its plan and its cost."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine.fgt import MAX_DIMENSIONS, MIN_TOLERANCE, FastGaussTransform, _native
from nadaraya.masks import LeaveOneOut

from ._exact import job_of, requires_native

FGT = FastGaussTransform()


def _job(d: int = 1, n: int = 200, kernel: object = "gaussian", bandwidth: object = 0.5,
         **kwargs: object) -> object:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 3, (n, d))
    return job_of(x[:20], x, rng.uniform(-1, 1, (n, 1)), bandwidth, kernel, **kwargs)


@pytest.mark.parametrize("kernel, bandwidth", [
    ("laplacian", 0.5), ("epanechnikov", 0.5), ("softmax", None),
    (nadaraya.kernels.Gaussian(0.3) + nadaraya.kernels.Gaussian(1.0), None),
    (nadaraya.kernels.Gaussian(0.3).on([0]) * nadaraya.kernels.Laplacian(1.0).on([1]), None),
])
def test_refuses_other_kernels(kernel: object, bandwidth: object) -> None:
    why = FGT.refuse(_job(d=2, kernel=kernel, bandwidth=bandwidth), 1e-8)
    assert why is not None and "Gaussian kernels only" in why


def test_refuses_masks() -> None:
    x = torch.linspace(0, 1, 50, dtype=torch.float64)
    job, _ = build_job(x, x, x, "gaussian", LeaveOneOut(), 0.1)
    assert "mask" in FGT.refuse(job, 1e-8)


def test_refuses_gradients() -> None:
    x = torch.linspace(0, 1, 50, dtype=torch.float64, requires_grad=True)
    job, _ = build_job(x, x.detach(), x.detach(), "gaussian", None, 0.1)
    assert "grad" in FGT.refuse(job, 1e-8)


def test_refuses_more_than_six_dimensions() -> None:
    why = FGT.refuse(_job(d=MAX_DIMENSIONS + 1), 1e-8)
    assert why is not None and f"{MAX_DIMENSIONS + 1} coordinates" in why


@requires_native
def test_refuses_a_tolerance_below_its_rounding() -> None:
    why = FGT.refuse(_job(), MIN_TOLERANCE / 10)
    assert why is not None and "tolerance" in why and "rounding" in why
    assert FGT.refuse(_job(), MIN_TOLERANCE) is None


@requires_native
def test_refuses_points_beyond_its_grid() -> None:
    x = np.array([[0.0], [1.0], [1e15]])
    job = job_of(x, x, np.ones((3, 1)), 1e-3)
    why = FGT.refuse(job, 1e-8)
    assert why is not None and "bandwidths from the keys' median" in why


def test_refuses_without_native_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_native, "load", lambda: None)
    monkeypatch.setattr(_native, "unavailable",
                        lambda: "compiled code is switched off (NADARAYA_NATIVE=0)")
    assert FGT.refuse(_job(), 1e-8) == "compiled code is switched off (NADARAYA_NATIVE=0)"
    assert FGT.cost(_job(), 1e-8) == math.inf
    assert FGT.plan(_job(), 1e-8)["refused"].startswith("compiled code")
    with pytest.raises(ValueError, match="cannot run"):
        FGT.sums(_job(), 1e-8)


@requires_native
@pytest.mark.parametrize("kernel, bandwidth", [
    ("gaussian", [0.2, 0.5]),
    (nadaraya.kernels.Gaussian(metric=[[2.0, 0.5], [0.0, 1.0]]), None),
    (nadaraya.kernels.Gaussian(0.3).on([0]) * nadaraya.kernels.Gaussian(0.4).on([1]), None),
])
def test_serves_every_gaussian_form(kernel: object, bandwidth: object) -> None:
    assert FGT.refuse(_job(d=2, kernel=kernel, bandwidth=bandwidth), 1e-8) is None


@requires_native
def test_plan_names_order_side_radius_boxes_and_bound() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 6, (20000, 1))
    job = job_of(x, x, np.sin(x), 0.05)
    plan = FGT.plan(job, 1e-10)
    assert plan["method"] == "fgt"
    assert plan["order"] > 0 and plan["expansion"].startswith(("Hermite", "Chebyshev"))
    assert plan["radius"] == pytest.approx(plan["reach_boxes"] * plan["box_side"])
    assert plan["radius"] >= 6
    assert all(b > 6 / 0.05 / plan["box_side"] - 2 for b in plan["boxes"])
    assert "per query" in plan["bound"] and "exp(-" in plan["bound"]
    assert 0 < plan["E"] < 1e-10


@requires_native
def test_plan_of_sparse_keys_is_direct() -> None:
    x = np.arange(0, 3000.0, 7.0)[:, None]
    plan = FGT.plan(job_of(x, x, np.ones_like(x), 0.1), 1e-8)
    assert plan["order"] == 0 and plan["expansion"].startswith("none")


@requires_native
def test_cost_grows_with_the_problem_and_beats_exact_sums_at_scale() -> None:
    small, large = _job(n=300), _job(n=30000)
    assert 0 < FGT.cost(small, 1e-8) < FGT.cost(large, 1e-8)
    exact = large.m * large.n * (large.p + 4)
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 6, (200000, 1))
    big = job_of(x, x, np.sin(x), 0.1)
    assert FGT.cost(big, 1e-8) < 0.01 * big.m * big.n * (big.p + 4)
    assert FGT.cost(large, 1e-8) < math.inf and exact > 0
