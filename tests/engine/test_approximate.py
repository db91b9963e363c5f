"""``smooth(..., approximate="random-features")``: the opt-in statistical method, end to end."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError, RandomFeatures
from nadaraya.masks import Causal


@pytest.fixture
def attention(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, k, v = rng.normal(size=(3, 600, 8))
    return 0.3 * q, 0.3 * k, v


def test_seeded_and_converging(attention: tuple[np.ndarray, ...]) -> None:
    q, k, v = attention
    exact = nadaraya.smooth(q, k, v, "softmax")
    a = nadaraya.smooth(q, k, v, "softmax", approximate=RandomFeatures(64, seed=3))
    b = nadaraya.smooth(q, k, v, "softmax", approximate=RandomFeatures(64, seed=3))
    np.testing.assert_array_equal(a, b)
    few = np.mean([np.abs(nadaraya.smooth(q, k, v, "softmax",
                                          approximate=RandomFeatures(16, seed=s)) - exact).mean()
                   for s in range(4)])
    many = np.mean([np.abs(nadaraya.smooth(q, k, v, "softmax",
                                           approximate=RandomFeatures(1024, seed=s)) - exact
                           ).mean() for s in range(4)])
    assert many < few / 3  # the error falls like 1 / sqrt(features): 8x here


def test_gaussian_through_its_key_bias(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 1, (400, 2))
    y = np.sin(3 * x[:, 0])
    exact = nadaraya.smooth(x, x, y, bandwidth=0.5)
    approx = nadaraya.smooth(x, x, y, bandwidth=0.5,
                             approximate=RandomFeatures(2048, seed=0))
    assert np.abs(approx - exact).max() < 0.05


def test_explain_names_it(attention: tuple[np.ndarray, ...]) -> None:
    q, k, v = attention
    e = nadaraya.explain(q, k, v, "softmax", approximate=RandomFeatures(32, seed=1))
    assert e.engine == "random-features"
    assert e.plan["features"] == 32 and "not proven" in str(e)


@pytest.mark.parametrize("kwargs, match", [
    ({"approximate": "random-features", "tolerance": 1e-3}, "tolerance"),
    ({"approximate": "random-features", "engine": "dense"}, "engine"),
    ({"approximate": "features"}, "approximate must be"),
    ({"approximate": 256}, "approximate must be"),
    ({"approximate": "random-features", "mask": Causal()}, "mask"),
])
def test_refusals_name_the_parameter(attention: tuple[np.ndarray, ...], kwargs: dict,
                                     match: str) -> None:
    q, k, v = attention
    with pytest.raises(NadarayaError, match=match):
        nadaraya.smooth(q, k, v, "softmax", **kwargs)


def test_kernel_it_cannot_serve(rng: np.random.Generator) -> None:
    x = rng.uniform(0, 1, 50)
    with pytest.raises(NadarayaError, match="random-features"):
        nadaraya.smooth(x, x, x, "epanechnikov", bandwidth=0.3, approximate="random-features")
