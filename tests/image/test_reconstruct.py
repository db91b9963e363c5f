"""Reconstruction from scattered samples against naive weighted least squares."""

from __future__ import annotations

import math

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
    out = reconstruct(pts, vals, shape, h=1.2, order=order, radius=3, clip=False,
                      inflation=math.inf)
    ref = _naive.scattered_polynomial(pts, vals, shape, 1.2, order, 3)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-11)
    clipped = reconstruct(pts, vals, shape, h=1.2, order=order, radius=3, inflation=math.inf)
    ref = _naive.scattered_polynomial(pts, vals, shape, 1.2, order, 3, clip=True)
    np.testing.assert_allclose(clipped, ref, rtol=0, atol=1e-11)


def test_dropped_pixels_of_a_plane_are_recovered(rng: np.random.Generator) -> None:
    img = np.add.outer(np.arange(20.0), 2 * np.arange(30.0))
    keep = rng.random(img.shape) < 0.3
    # unguarded, the polynomial reproduces the plane everywhere, corners included
    out = reconstruct(np.argwhere(keep), img[keep], img.shape, h=1.0, radius=4, clip=False,
                      inflation=math.inf)
    np.testing.assert_allclose(out, img, rtol=0, atol=1e-6)
    # clipped to the samples' range: a plane inside the samples' hull is not clipped
    keep[[0, 0, -1, -1], [0, -1, 0, -1]] = True
    out = reconstruct(np.argwhere(keep), img[keep], img.shape, h=1.0, radius=4,
                      inflation=math.inf)
    np.testing.assert_allclose(out, img, rtol=0, atol=1e-6)


def test_upscaling_a_quadratic() -> None:
    r, c = np.indices((31, 31)).astype(float)
    fine = 0.01 * (r - 10) ** 2 + 0.02 * r * c
    pts = np.argwhere((r % 3 == 0) & (c % 3 == 0))
    # radius 6: every window holds three sample rows and columns (a quadratic needs them)
    out = reconstruct(pts, fine[pts[:, 0], pts[:, 1]], fine.shape, h=2.0, radius=6,
                      clip=False, inflation=math.inf)
    np.testing.assert_allclose(out, fine, rtol=0, atol=1e-6)


def _layout(kind: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Sample positions (row, column): uniform at random, or layouts that make local
    quadratics extrapolate (tight clusters, full lines far apart, a near-line)."""
    height, width = shape
    if kind == "uniform":
        n = height * width // 8
        return np.column_stack([rng.uniform(-0.5, height - 0.5, n),
                                rng.uniform(-0.5, width - 0.5, n)])
    if kind == "clusters":
        centres = np.column_stack([rng.uniform(1, height - 2, 40), rng.uniform(1, width - 2, 40)])
        return (centres[:, None, :] + rng.uniform(-0.7, 0.7, (40, 5, 2))).reshape(-1, 2)
    if kind == "lines":
        r, c = np.indices(shape)
        return np.argwhere((r % 5 == 0) | (c % 11 == 0)).astype(float)
    t = rng.uniform(0, 1, 300)  # a near-line: a diagonal with a little jitter
    return np.column_stack([t * (height - 1), t * (width - 1)]) + rng.normal(0, 0.2, (300, 2))


@pytest.mark.parametrize("method", ["classic", pytest.param("steering", marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", ["uniform", "clusters", "lines", "near-line"])
def test_defaults_never_leave_the_samples_range(rng: np.random.Generator, kind: str,
                                                method: str) -> None:
    data = pytest.importorskip("skimage.data")
    img = data.camera()[200:248, 200:248].astype(np.float64)
    pts = np.clip(_layout(kind, rng, img.shape), -0.5, np.array(img.shape) - 0.5)
    cells = np.clip(np.rint(pts), 0, np.array(img.shape) - 1).astype(int)
    # the image's values at the samples, and adversarial ones: alternating extremes
    for vals in (img[cells[:, 0], cells[:, 1]], 255.0 * (rng.random(len(pts)) < 0.5)):
        for h in (1.0, 2.0):
            out = reconstruct(pts, vals, img.shape, method, h=h, empty="nearest")
            overshoot = max(out.max() - vals.max(), vals.min() - out.min(), 0.0)
            assert overshoot == 0.0, (kind, h, out.min(), out.max())


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
