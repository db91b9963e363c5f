"""scikit-image's conventions: argument order, channel_axis, batches and 3-D volumes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.image import bilateral, kernel_regression, non_local_means
from nadaraya.image.nlm import patch_weights

from . import _naive


def _gauss3(size: int) -> np.ndarray:
    """Gaussian cubic patch weights, s.d. (size - 1) / 4, written out here."""
    x = np.arange(size) - size // 2
    g = np.exp(-x**2 / (2 * ((size - 1) / 4) ** 2))
    return g[:, None, None] * g[None, :, None] * g[None, None, :]


def test_bilateral_takes_scikit_image_order_and_keywords(rng: np.random.Generator) -> None:
    img = rng.random((9, 10))
    positional = bilateral(img, 0.2, 1.5, 3)
    np.testing.assert_array_equal(positional, bilateral(img, sigma_spatial=1.5,
                                                        sigma_color=0.2, radius=3))
    np.testing.assert_array_equal(positional, bilateral(img, 0.2, sigma_space=1.5, radius=3))
    np.testing.assert_allclose(positional, _naive.bilateral(img, 1.5, 0.2, 3), atol=1e-14)
    with pytest.raises(NadarayaError, match="same parameter"):
        bilateral(img, 0.2, 2.0, sigma_space=1.5)


def test_bilateral_default_sigma_color_is_the_image_sd(rng: np.random.Generator) -> None:
    img = rng.random((9, 10))
    np.testing.assert_array_equal(bilateral(img), bilateral(img, float(img.std()), 1.0))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_channel_axis_moves_the_channels(rng: np.random.Generator, axis: int) -> None:
    img = rng.random((7, 8, 3))
    moved = np.moveaxis(img, -1, axis)
    out = bilateral(moved, 0.3, 1.0, 2, channel_axis=axis)
    assert out.shape == moved.shape
    np.testing.assert_array_equal(np.moveaxis(out, axis, -1), bilateral(img, 0.3, 1.0, 2))
    t = non_local_means(torch.from_numpy(moved), 0.2, 3, 2, channel_axis=axis)
    np.testing.assert_array_equal(np.moveaxis(t.numpy(), axis, -1),
                                  non_local_means(img, 0.2, 3, 2))


def test_batches_are_filtered_one_by_one(rng: np.random.Generator) -> None:
    batch = rng.random((4, 9, 10, 3))
    out = kernel_regression(batch, 1.0, batch_axis=0)
    for k in range(4):
        np.testing.assert_array_equal(out[k], kernel_regression(batch[k], 1.0))
    gray = rng.random((9, 3, 10))  # batch on axis 1, no channels
    out = bilateral(gray, 0.3, 1.0, 2, batch_axis=1, channel_axis=None)
    for k in range(3):
        np.testing.assert_array_equal(out[:, k], bilateral(gray[:, k], 0.3, 1.0, 2))


def test_a_batch_of_volumes(rng: np.random.Generator) -> None:
    vols = rng.random((2, 4, 5, 6))
    out = bilateral(vols, 0.3, 1.0, 1, batch_axis=0, channel_axis=None)
    for k in range(2):
        np.testing.assert_array_equal(out[k], bilateral(vols[k], 0.3, 1.0, 1,
                                                        channel_axis=None))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"channel_axis": 3}, "channel_axis must be an integer axis"),
    ({"channel_axis": 0, "batch_axis": 0}, "same axis"),
    ({"batch_axis": 1.5}, "batch_axis must be an integer"),
    ({"channel_axis": None, "batch_axis": None}, None),
])
def test_bad_axes(rng: np.random.Generator, kwargs: dict, match: str | None) -> None:
    img = rng.random((5, 6, 3))
    if match is None:  # a gray volume of depth 5: accepted
        assert bilateral(img, 0.3, 1.0, 1, **kwargs).shape == img.shape
        return
    with pytest.raises(NadarayaError, match=match):
        bilateral(img, 0.3, 1.0, 1, **kwargs)


def test_volumes_refused_by_the_planar_filters(rng: np.random.Generator) -> None:
    with pytest.raises(NadarayaError, match="2-D images only"):
        kernel_regression(rng.random((4, 5, 6)), 1.0, channel_axis=None)


# -- 3-D volumes against naive loops, float64 -------------------------------------------
@pytest.mark.parametrize(("shape", "disk"), [((4, 5, 6), True), ((5, 4, 4), False),
                                             ((3, 4, 5, 2), True)])
def test_bilateral_volume_equals_naive_loop(rng: np.random.Generator, shape: tuple,
                                            disk: bool) -> None:
    vol = rng.random(shape)
    out = bilateral(vol, 0.3, 1.2, 2, window="disk" if disk else "square",
                    channel_axis=None if len(shape) == 3 else -1)
    ref = _naive.bilateral_volume(vol, 1.2, 0.3, 2, disk=disk)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


@pytest.mark.parametrize(("shape", "patch", "radius", "sigma"),
                         [((5, 6, 5), 3, 1, 0.0), ((4, 5, 6), 3, 2, 0.05),
                          ((4, 4, 5, 3), 3, 1, 0.0)])
def test_nlm_volume_equals_naive_loop(rng: np.random.Generator, shape: tuple, patch: int,
                                      radius: int, sigma: float) -> None:
    vol = rng.random(shape)
    out = non_local_means(vol, 0.3, patch, radius, sigma=sigma,
                          channel_axis=None if len(shape) == 3 else -1)
    ref = _naive.nlm_volume(vol, 0.3, _gauss3(patch), radius, sigma=sigma)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)


def test_volume_patch_weights_agree_with_the_planar_ones() -> None:
    g2 = patch_weights(5).numpy()
    g3 = _gauss3(5)
    np.testing.assert_allclose(g3[2] / g3[2].sum(), g2 / g2.sum(), rtol=1e-14)


def test_volume_dtypes_and_torch(rng: np.random.Generator) -> None:
    vol = rng.integers(0, 256, (4, 6, 6), dtype=np.uint8)
    out = bilateral(vol, 30.0, 1.0, 1, channel_axis=None)
    assert out.dtype == np.uint8
    ref = _naive.bilateral_volume(vol, 1.0, 30.0, 1)
    assert np.abs(out.astype(float) - ref).max() <= 0.5 + 1e-4
    t = bilateral(torch.from_numpy(vol.astype(np.float32)), 30.0, 1.0, 1, channel_axis=None)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
    np.testing.assert_allclose(t.numpy(), ref, atol=1e-3)


def test_volume_hostile_inputs(rng: np.random.Generator) -> None:
    vol = rng.random((4, 5, 6))
    vol[1, 2, 3] = np.nan
    with pytest.raises(NadarayaError, match="NaN"):
        bilateral(vol, 0.3, 1.0, channel_axis=None)
    with pytest.raises(NadarayaError, match="patch_size 5 is larger"):
        non_local_means(rng.random((3, 8, 8)), 0.3, 5, 1, channel_axis=None)
    with pytest.raises(NadarayaError, match="integer search_radius"):
        non_local_means(rng.random((4, 8, 8)), 0.3, 3, None, channel_axis=None)
    with pytest.raises(NadarayaError, match=r"empty|volume"):
        bilateral(np.zeros((0, 4, 4)), 0.3, 1.0, channel_axis=None)
    with pytest.raises(NadarayaError, match="channels"):
        bilateral(rng.random((3, 4, 5, 6)), 0.3, 1.0)


def test_denoise_volumes_and_batches(rng: np.random.Generator) -> None:
    from nadaraya.image import denoise, estimate_noise
    from nadaraya.image.denoise import VOLUME_NLM, recipe

    z, r, c = np.indices((6, 20, 20))
    clean = np.where((r - 10) ** 2 + (c - 10) ** 2 + (z - 3) ** 2 < 40, 0.8, 0.2)
    noisy = clean + 0.05 * rng.standard_normal(clean.shape)
    out = denoise(noisy, "nlm", 0.05, channel_axis=None)
    params = recipe("nlm", 0.05, float(noisy.max() - noisy.min())) | VOLUME_NLM
    np.testing.assert_array_equal(out, non_local_means(noisy, **params, channel_axis=None))
    assert np.abs(out - clean).mean() < 0.5 * np.abs(noisy - clean).mean()
    median = float(np.median([estimate_noise(s) for s in noisy]))
    np.testing.assert_array_equal(denoise(noisy, "bilateral", channel_axis=None),
                                  denoise(noisy, "bilateral", median, channel_axis=None))
    batch = denoise(noisy, "kr", 0.05, batch_axis=0)
    np.testing.assert_array_equal(batch[2], denoise(noisy[2], "kr", 0.05))
    with pytest.raises(NadarayaError, match="2-D images only"):
        denoise(noisy, "skr", 0.05, channel_axis=None)


@pytest.mark.parametrize("method", ["nlm", "bilateral", "kr", "skr"])
def test_progress_counts_each_pixel_once(rng: np.random.Generator, method: str) -> None:
    from nadaraya import config_context
    from nadaraya.image import denoise
    from nadaraya.image._progress import reporting

    img = rng.random((40, 36))
    seen: list[int] = []
    with config_context(working_memory=0.05), reporting(seen.append):  # several blocks
        denoise(img, method, 0.1)
    assert sum(seen) == img.size and len(seen) > 1
    seen.clear()
    with reporting(seen.append):
        non_local_means(rng.random((4, 10, 10)), 0.2, 3, 1, channel_axis=None)
    assert seen == [400]
