"""Integer images are converted block by block on the tiled filter paths, results unchanged.

The oracle: the same filter on the image converted to float32 first (what the
filter computes in), rounded and clipped to the integer dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya import config_context
from nadaraya.image import (
    bilateral,
    kernel_filter,
    kernel_regression,
    non_local_means,
    steering_kernel_regression,
)
from nadaraya.image._image import Image, as_image
from nadaraya.kernels import Gaussian

FILTERS = {
    "nlm": lambda x: non_local_means(x, 20.0, 3, 3, sigma=10.0),
    "nlm-wrap": lambda x: non_local_means(x, 20.0, 3, 2, border="wrap"),
    "bilateral": lambda x: bilateral(x, 30.0, 2.0),
    "kernel_filter": lambda x: kernel_filter(
        x, Gaussian(2.0).on([0, 1]) * Gaussian(30.0).on([2]), radius=3, border="edge"),
    "kernel_regression": lambda x: kernel_regression(x, h=1.5, order=2),
    "skr": lambda x: steering_kernel_regression(x, sigma=10.0, iterations=1,
                                                data_range=255.0),
}
SLOW = ("kernel_regression", "skr")  # local fits of order 2 in small blocks: seconds each


def _image(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    xx = np.arange(shape[1])[None, :] + np.zeros((shape[0], 1))
    clean = top * (0.3 + 0.4 * (xx > shape[1] // 2))
    if len(shape) == 3:
        clean = clean[..., None] * np.linspace(0.6, 1.0, shape[2])
    noisy = clean + 0.05 * top * rng.standard_normal(shape)
    return np.clip(np.rint(noisy), 0, top).astype(dtype)


def _as_float_then_back(run, img: np.ndarray) -> np.ndarray:
    top = np.iinfo(img.dtype).max
    return np.clip(np.rint(run(img.astype(np.float32))), 0, top).astype(img.dtype)


@pytest.fixture
def no_whole_conversion(monkeypatch):
    """Fail if a filter converts the whole integer image at once."""
    def refuse(self: Image) -> torch.Tensor:
        if self.pixels.dtype != self.compute:
            raise AssertionError("the whole integer image was converted to float")
        return self.pixels

    monkeypatch.setattr(Image, "data", property(refuse))


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(FILTERS)])
@pytest.mark.parametrize(("shape", "dtype"), [((40, 36), np.uint8), ((34, 30, 3), np.uint16)])
def test_integer_images_read_in_blocks_equal_the_float_path(name, shape, dtype,
                                                            no_whole_conversion):
    run = FILTERS[name]
    img = _image(shape, dtype)
    if dtype == np.uint16:
        img = img // 256  # the filters' parameters are on the 0-255 scale
    with config_context(working_memory=0.02):  # many blocks
        got = run(img)
        want = _as_float_then_back(run, img)
    assert got.dtype == img.dtype and got.shape == img.shape
    np.testing.assert_array_equal(got, want)
    whole = run(img)  # one block, the default budget
    np.testing.assert_array_equal(whole, got)


def test_torch_integer_tensors_and_colour_layouts():
    img = _image((30, 32, 3), np.uint8, seed=1)
    t = torch.from_numpy(img)
    got = bilateral(t, 30.0, 2.0)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.uint8
    np.testing.assert_array_equal(got.numpy(), bilateral(img, 30.0, 2.0))
    rgba = _image((20, 22, 4), np.uint8, seed=2)
    with config_context(working_memory=0.01):
        np.testing.assert_array_equal(non_local_means(rgba, 20.0, 3, 2),
                                      _as_float_then_back(
                                          lambda x: non_local_means(x, 20.0, 3, 2), rgba))


def test_as_image_keeps_integer_pixels_as_a_view():
    img = _image((12, 10, 3), np.uint8)
    im = as_image(img)
    assert im.pixels.dtype == torch.uint8 and im.compute == torch.float32
    assert im.pixels.data_ptr() == torch.from_numpy(img).data_ptr()  # no copy
    assert im.shape == (12, 10) and im.channels == 3 and im.itemsize == 4
    assert im.read_bytes == 12  # a block read is converted: 3 float32 per pixel
    whole = im.data  # converted on first use, and kept
    assert whole.dtype == torch.float32 and whole.is_contiguous()
    np.testing.assert_array_equal(whole.numpy(), img.transpose(2, 0, 1).astype(np.float32))
    assert im.data is whole
    f64 = as_image(img.astype(np.float64))
    assert f64.pixels.dtype == torch.float64 and f64.compute == torch.float64
    assert f64.read_bytes == 0  # blocks are views
    assert as_image(img, dtype=torch.float64).data.dtype == torch.float64


def test_back_rounds_integer_results_in_place_and_leaves_floats():
    im = as_image(np.zeros((3, 4), np.uint8))
    out = torch.tensor([[[-3.0, 0.4, 0.6, 254.5], [255.7, 300.0, 1.5, 2.5],
                         [7.2, 7.8, 8.0, 9.0]]])
    got = im.back(out)
    np.testing.assert_array_equal(got, np.clip(np.round(out[0].numpy()), 0, 255)
                                  .astype(np.uint8))
    f = as_image(np.zeros((3, 4), np.float32))
    res = torch.full((1, 3, 4), 0.4)
    np.testing.assert_array_equal(f.back(res), np.full((3, 4), 0.4, np.float32))
    assert float(res[0, 0, 0]) == pytest.approx(0.4)
