"""The Matern kernels against their formulas, at every distance, with finite gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import kernels as K


def matern32(r: float) -> float:
    t = math.sqrt(3.0) * r
    return (1.0 + t) * math.exp(-t)


def matern52(r: float) -> float:
    t = math.sqrt(5.0) * r
    return (1.0 + t + t * t / 3.0) * math.exp(-t)


FORMULAS = {"matern32": (K.Matern32, matern32), "matern52": (K.Matern52, matern52)}
DISTANCES = [0.0, 1e-12, 1e-5, 0.3, 0.5773, 1.0, 2.5, 10.0, 100.0, 300.0]


@pytest.mark.parametrize("name", list(FORMULAS))
def test_scores_are_the_log_of_the_formula(name: str) -> None:
    cls, formula = FORMULAS[name]
    h = 0.7
    r = torch.tensor(DISTANCES, dtype=torch.float64)
    got = cls(h).score(torch.zeros(1, 1, dtype=torch.float64), (h * r)[:, None])[0].numpy()
    expect = [math.log(formula(t)) if formula(t) > 0 else -math.inf for t in DISTANCES]
    np.testing.assert_allclose(got, expect, rtol=1e-13, atol=1e-15)
    assert got[0] == 0.0
    assert K.get_kernel(name, h).score(torch.zeros(1, 1, dtype=torch.float64),
                                        (h * r)[:, None]).numpy().tolist()[0] == got.tolist()


@pytest.mark.parametrize("name", list(FORMULAS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_far_points_never_give_nan_or_positive_scores(name: str, dtype: torch.dtype) -> None:
    """Beyond ``sqrt`` of the largest number the squared distance overflows: the score is
    ``-inf`` (no weight), as for the Laplacian, never ``inf - inf``."""
    cls, _ = FORMULAS[name]
    big = torch.finfo(dtype).max
    r = torch.tensor([1e3, 1e15, big**0.5 / 2, big**0.5 * 2, big / 4], dtype=dtype)
    # one key at a time: the points are centred on the keys' median
    s = torch.cat([cls(1.0).score(torch.zeros(1, 1, dtype=dtype), t.reshape(1, 1))[0]
                   for t in r])
    assert not torch.isnan(s).any() and bool((s < 0).all())
    finite = torch.isfinite(r * r)
    t = r[finite].double() * (3.0 if name == "matern32" else 5.0) ** 0.5  # all above 1000
    # log(1 + t) and log(1 + t + t^2 / 3) written so that t^2 cannot overflow
    log_poly = (torch.log(t) + torch.log1p(1 / t) if name == "matern32" else
                2 * torch.log(t) - math.log(3.0) + torch.log1p(3 / t + 3 / (t * t)))
    expect = (log_poly - t).to(dtype)
    torch.testing.assert_close(s[finite], expect, rtol=4 * torch.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("name", list(FORMULAS))
def test_gradients_are_finite_where_points_coincide(name: str,
                                                    rng: np.random.Generator) -> None:
    """The Matern profiles are flat at ``r = 0``: a query on a key gets a finite gradient,
    equal to central differences of the smoothed values."""
    keys = torch.tensor(rng.uniform(0, 2, (30, 1)))
    values = torch.tensor(rng.standard_normal(30))
    q = keys[:5].clone().requires_grad_(True)  # every query sits on a key
    h = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    kernel = FORMULAS[name][0](h)
    out = nadaraya.smooth(q, keys, values, kernel)
    out.sum().backward()
    assert q.grad is not None and h.grad is not None
    assert bool(torch.isfinite(q.grad).all()) and bool(torch.isfinite(h.grad))
    step = 1e-6
    with torch.no_grad():
        up = nadaraya.smooth(q + step, keys, values, FORMULAS[name][0](0.4))
        down = nadaraya.smooth(q - step, keys, values, FORMULAS[name][0](0.4))
    torch.testing.assert_close(q.grad[:, 0], (up - down) / (2 * step), rtol=1e-5, atol=1e-6)
