"""Non-local means: naive double loop (exact), scikit-image (peer), global search."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.image import non_local_means
from nadaraya.image.nlm import patch_weights

from . import _naive


def _gauss(size: int) -> np.ndarray:
    a = (size - 1) / 4
    u = np.arange(size) - size // 2
    return np.exp(-(u[:, None] ** 2 + u[None, :] ** 2) / (2 * a * a))


@pytest.mark.parametrize(("kind", "sigma"), [("gaussian", 0.0), ("gaussian", 0.1), ("box", 0.05)])
def test_equals_naive_loop_gray(rng: np.random.Generator, kind: str, sigma: float) -> None:
    img = rng.random((9, 11))
    g = _gauss(5) if kind == "gaussian" else np.ones((5, 5))
    out = non_local_means(img, 0.3, 5, 3, sigma=sigma, patch_kind=kind)
    np.testing.assert_allclose(out, _naive.nlm(img, 0.3, g, 3, sigma), rtol=0, atol=1e-14)


def test_equals_naive_loop_colour(rng: np.random.Generator) -> None:
    img = rng.random((8, 9, 3))
    out = non_local_means(img, 0.25, 3, 2)
    np.testing.assert_allclose(out, _naive.nlm(img, 0.25, _gauss(3), 2), rtol=0, atol=1e-14)


def test_search_window_larger_than_image(rng: np.random.Generator) -> None:
    img = rng.random((6, 7))
    out = non_local_means(img, 0.3, 3, 9)
    np.testing.assert_allclose(out, _naive.nlm(img, 0.3, _gauss(3), 9), rtol=0, atol=1e-14)


@pytest.mark.parametrize("border", ["symmetric", "edge", "wrap"])
def test_border_modes(rng: np.random.Generator, border: str) -> None:
    img = rng.random((7, 8))
    out = non_local_means(img, 0.3, 5, 2, border=border)
    ref = _naive.nlm(img, 0.3, _gauss(5), 2, mode=border)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


def test_float32_close_to_float64(rng: np.random.Generator) -> None:
    img = rng.random((20, 24))
    out32 = non_local_means(img.astype(np.float32), 0.2, 5, 4, sigma=0.05)
    out64 = non_local_means(img, 0.2, 5, 4, sigma=0.05)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, out64, atol=2e-5)


def test_global_equals_naive(rng: np.random.Generator) -> None:
    img = rng.random((6, 7))
    out = non_local_means(img, 0.3, 3, None)
    # a search window covering the whole image is the global search
    ref = _naive.nlm(img, 0.3, _gauss(3), 7)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)


def test_global_equals_grid_with_full_window(rng: np.random.Generator) -> None:
    img = rng.random((10, 9, 2))
    glob = non_local_means(img, 0.4, 5, None, sigma=0.1)
    grid = non_local_means(img, 0.4, 5, 10, sigma=0.1)
    np.testing.assert_allclose(glob, grid, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("h_factor", "sigma_factor", "patch", "distance"),
                         [(0.6, 1.0, 7, 5), (0.5, 1.0, 5, 7), (1.0, 0.0, 5, 4)])
def test_psnr_matches_scikit_image_slow_mode(rng: np.random.Generator, h_factor: float,
                                             sigma_factor: float, patch: int,
                                             distance: int) -> None:
    # scikit-image's slow mode is this kernel up to shortcuts of its own (an
    # approximate exp, a cut-off on partial patch distances, a test on the
    # centre pixel); at matched parameters the PSNRs agree.
    restoration = pytest.importorskip("skimage.restoration")
    data = pytest.importorskip("skimage.data")
    clean = data.camera()[100:196, 200:296] / 255.0
    sigma = 25 / 255
    noisy = clean + sigma * rng.standard_normal(clean.shape)
    kwargs = {"h": h_factor * sigma, "sigma": sigma_factor * sigma}
    theirs = restoration.denoise_nl_means(noisy, patch_size=patch, patch_distance=distance,
                                          fast_mode=False, **kwargs)
    ours = non_local_means(noisy, patch_size=patch, search_radius=distance, **kwargs)
    assert abs(_naive.psnr(clean, ours, 1.0) - _naive.psnr(clean, theirs, 1.0)) < 0.05


def test_uint8_and_torch(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (12, 13), dtype=np.uint8)
    out = non_local_means(img, 30.0, 3, 2)
    assert out.dtype == np.uint8
    ref = _naive.nlm(img, 30.0, _gauss(3), 2)
    assert np.abs(out - ref).max() <= 0.5 + 1e-4
    t = torch.from_numpy(img.astype(np.float64))
    np.testing.assert_allclose(non_local_means(t, 30.0, 3, 2).numpy(), ref, atol=1e-12)


def test_patch_weights() -> None:
    np.testing.assert_allclose(patch_weights(5).numpy(), _gauss(5))
    assert float(patch_weights(3, "box").sum()) == 9.0
    assert math.isclose(float(patch_weights(1)[0, 0]), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"h": 0.0}, "h must be"),
        ({"h": 1.0, "patch_size": 4}, "odd"),
        ({"h": 1.0, "patch_size": 9}, "larger than the image"),
        ({"h": 1.0, "patch_size": 3, "search_radius": -1}, "search_radius"),
        ({"h": 1.0, "patch_size": 3, "search_radius": 2.5}, "search_radius"),
        ({"h": 1.0, "patch_size": 3, "sigma": -1.0}, "sigma"),
        ({"h": 1.0, "patch_size": 3, "patch_kind": "disk"}, "patch_kind"),
    ],
)
def test_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        non_local_means(np.zeros((6, 6)), **kwargs)


def test_nan_pixels_are_refused() -> None:
    img = np.zeros((6, 6))
    img[2, 3] = np.nan
    with pytest.raises(NadarayaError, match=r"NaN.*\(2, 3\)"):
        non_local_means(img, 1.0, 3, 2)
