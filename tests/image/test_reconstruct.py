"""Reconstruction from scattered samples against naive weighted least squares."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.image import reconstruct

from . import _naive


@pytest.mark.parametrize("order", [0, 1, 2])
def test_irregular_samples_equal_naive(rng: np.random.Generator, order: int) -> None:
    shape = (8, 9)
    n = 70  # several samples share a pixel: several layers
    pts = np.column_stack([rng.uniform(-0.5, 7.5, n), rng.uniform(-0.5, 8.5, n)])
    vals = rng.random(n)
    out = reconstruct(pts, vals, shape, h=1.2, order=order, radius=3)
    ref = _naive.scattered_polynomial(pts, vals, shape, 1.2, order, 3)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-11)


def test_dropped_pixels_of_a_plane_are_recovered(rng: np.random.Generator) -> None:
    img = np.add.outer(np.arange(20.0), 2 * np.arange(30.0))
    keep = rng.random(img.shape) < 0.3
    out = reconstruct(np.argwhere(keep), img[keep], img.shape, h=1.0, radius=4)
    np.testing.assert_allclose(out, img, rtol=0, atol=1e-6)


def test_upscaling_a_quadratic() -> None:
    r, c = np.indices((31, 31)).astype(float)
    fine = 0.01 * (r - 10) ** 2 + 0.02 * r * c
    pts = np.argwhere((r % 3 == 0) & (c % 3 == 0))
    # radius 6: every window holds three sample rows and columns (a quadratic needs them)
    out = reconstruct(pts, fine[pts[:, 0], pts[:, 1]], fine.shape, h=2.0, radius=6)
    np.testing.assert_allclose(out, fine, rtol=0, atol=1e-6)


def test_colour_values_and_steering(rng: np.random.Generator) -> None:
    img = rng.random((12, 14, 3))
    keep = rng.random(img.shape[:2]) < 0.6
    out = reconstruct(np.argwhere(keep), img[keep], img.shape[:2], h=1.0, radius=3)
    assert out.shape == img.shape
    np.testing.assert_allclose(out[keep], img[keep], atol=0.5)
    steer = reconstruct(np.argwhere(keep), img[keep], img.shape[:2], "steering", h=1.0,
                        radius=3, iterations=1)
    assert steer.shape == img.shape and np.isfinite(steer).all()


def test_empty_policies() -> None:
    pts = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    vals = np.array([1.0, 2.0, 3.0])
    with pytest.raises(NadarayaError, match="no sample within radius"):
        reconstruct(pts, vals, (8, 8), radius=1)
    out = reconstruct(pts, vals, (8, 8), radius=1, empty="nan", order=0)
    assert np.isnan(out[7, 7]) and np.isfinite(out[0, 0])
    near = reconstruct(pts, vals, (8, 8), radius=1, empty="nearest", order=0)
    assert near[7, 0] == 3.0 and near[0, 7] == 2.0


def test_uint8_values_stay_uint8(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (10, 10), dtype=np.uint8)
    keep = rng.random(img.shape) < 0.5
    out = reconstruct(np.argwhere(keep), img[keep], img.shape, h=1.0, radius=3, order=0)
    assert out.dtype == np.uint8
    with pytest.raises(NadarayaError, match="float values"):
        reconstruct(np.argwhere(keep), img[keep], img.shape, empty="nan")


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((np.zeros((3, 3)), np.zeros(3), (4, 4)), {}, "points must have shape"),
        ((np.zeros((3, 2)), np.zeros(2), (4, 4)), {}, "points must have shape"),
        ((np.full((1, 2), 9.0), np.zeros(1), (4, 4)), {}, "on the grid"),
        ((np.full((1, 2), np.nan), np.zeros(1), (4, 4)), {}, "NaN"),
        ((np.zeros((1, 2)), np.zeros(1), (4,)), {}, "shape"),
        ((np.zeros((1, 2)), np.zeros(1), (4, 4)), {"method": "spline"}, "method"),
        ((np.zeros((1, 2)), np.zeros(1), (4, 4)), {"h": 0}, "h must be"),
        ((np.zeros((1, 2)), np.zeros(1), (4, 4)), {"empty": "zero"}, "empty"),
        ((np.zeros((1, 2)), np.zeros(1), (4, 4)), {"beta": 1}, "unknown"),
    ],
)
def test_bad_input(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        reconstruct(*args, **kwargs)
