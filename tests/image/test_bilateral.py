"""The bilateral filter: naive double loop (exact), OpenCV (peer), bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.image import bilateral

from . import _naive


@pytest.mark.parametrize("disk", [True, False])
def test_equals_naive_loop_gray(rng: np.random.Generator, disk: bool) -> None:
    img = rng.random((9, 11))
    out = bilateral(img, 0.2, 1.5, radius=3, window="disk" if disk else "square")
    ref = _naive.bilateral(img, 1.5, 0.2, 3, disk=disk)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


def test_equals_naive_loop_colour(rng: np.random.Generator) -> None:
    img = rng.random((8, 10, 3))
    out = bilateral(img, 0.3, 2.0, radius=2)
    np.testing.assert_allclose(out, _naive.bilateral(img, 2.0, 0.3, 2), rtol=0, atol=1e-14)


def test_radius_larger_than_image(rng: np.random.Generator) -> None:
    img = rng.random((4, 5))
    np.testing.assert_allclose(bilateral(img, 0.5, 3.0, radius=6),
                               _naive.bilateral(img, 3.0, 0.5, 6), rtol=0, atol=1e-14)


def test_uint8_in_uint8_out(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (10, 12), dtype=np.uint8)
    out = bilateral(img, 30.0, 2.0)
    assert out.dtype == np.uint8 and out.shape == img.shape
    ref = _naive.bilateral(img, 2.0, 30.0, 3)
    assert np.abs(out.astype(float) - ref).max() <= 0.5 + 1e-4


def test_torch_in_torch_out(rng: np.random.Generator) -> None:
    img = torch.from_numpy(rng.random((7, 9)).astype(np.float32))
    out = bilateral(img, 0.1, 1.0)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    ref = _naive.bilateral(img.double().numpy(), 1.0, 0.1, 2)
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu(rng: np.random.Generator) -> None:
    img = torch.from_numpy(rng.random((40, 50)))
    out = bilateral(img.cuda(), 0.2, 2.0)
    assert out.is_cuda
    np.testing.assert_allclose(out.cpu().numpy(), bilateral(img, 0.2, 2.0).numpy(),
                               rtol=0, atol=1e-12)


def _camera_crop(rng: np.random.Generator, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    data = pytest.importorskip("skimage.data")
    clean = data.camera()[160:288, 160:288].astype(np.float64)
    noisy = clean + sigma * rng.standard_normal(clean.shape)
    return clean, noisy


@pytest.mark.parametrize(("sigma_spatial", "sigma_color"),
                         [(3.0, 50.0), (2.0, 80.0), (5.0, 30.0)])
def test_matches_opencv_uint8(rng: np.random.Generator, sigma_spatial: float,
                              sigma_color: float) -> None:
    cv2 = pytest.importorskip("cv2")
    clean, noisy = _camera_crop(rng, 25.0)
    n8 = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    theirs = cv2.bilateralFilter(n8, 0, sigma_color, sigma_spatial)
    ours = bilateral(n8, sigma_color, sigma_spatial)
    assert np.abs(theirs.astype(int) - ours.astype(int)).max() <= 1
    assert abs(_naive.psnr(clean, ours, 255) - _naive.psnr(clean, theirs, 255)) < 0.05


def test_matches_opencv_float32_and_d(rng: np.random.Generator) -> None:
    cv2 = pytest.importorskip("cv2")
    clean, noisy = _camera_crop(rng, 25.0)
    n32 = noisy.astype(np.float32)
    for d, radius in ((0, None), (7, 3)):
        theirs = cv2.bilateralFilter(n32, d, 40.0, 3.0)
        ours = bilateral(n32, 40.0, 3.0, radius)
        assert np.abs(theirs - ours).max() < 0.05
        assert abs(_naive.psnr(clean, ours, 255) - _naive.psnr(clean, theirs, 255)) < 0.05


def test_opencv_colour_grey_image_agrees(rng: np.random.Generator) -> None:
    # On a colour image whose channels are equal, OpenCV's sum of absolute
    # differences is 3 |d| and our Euclidean distance sqrt(3) |d|.
    cv2 = pytest.importorskip("cv2")
    _, noisy = _camera_crop(rng, 20.0)
    n32 = np.repeat(noisy.astype(np.float32)[:, :, None], 3, axis=2)
    theirs = cv2.bilateralFilter(n32, 0, 60.0, 2.0)
    ours = bilateral(n32, 60.0 / np.sqrt(3), 2.0)
    assert np.abs(theirs - ours).max() < 0.05


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((np.zeros((4, 4, 4, 4, 4)), 1.0, 1.0), "4 spatial axes"),
        ((np.zeros(5), 1.0, 1.0), "2-D"),
        ((np.full((4, 4), np.nan), 1.0, 1.0), "NaN"),
        ((np.zeros((4, 4)), 0.0, 1.0), "sigma_color"),
        ((np.zeros((4, 4)), 1.0, -2.0), "sigma_spatial"),
        ((np.zeros((4, 4)), float("nan"), 1.0), "sigma_color"),
        ((np.zeros((4, 4)), None, 1.0), "constant"),
        ((np.zeros((4, 4, 7)), 1.0, 1.0), "channels"),
        ((np.array([["a"]]), 1.0, 1.0), "numbers"),
    ],
)
def test_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        bilateral(*args)


def test_bad_radius_and_window() -> None:
    with pytest.raises(NadarayaError, match="radius"):
        bilateral(np.zeros((4, 4)), 1.0, 1.0, radius=0)
    with pytest.raises(NadarayaError, match="shape"):
        bilateral(np.zeros((4, 4)), 1.0, 1.0, window="hexagon")
    with pytest.raises(NadarayaError, match="border"):
        bilateral(np.zeros((4, 4)), 1.0, 1.0, border="mirror")
