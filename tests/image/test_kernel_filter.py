"""kernel_filter: an image smoothed with a kernel object on t = [row, column, channels]."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.image import bilateral, kernel_filter, kernel_regression
from nadaraya.kernels import ExpDot, Gaussian, Laplacian
from nadaraya.kernels.quadratic import QuadraticKernel
from nadaraya.masks import MatrixMask


def _naive(img: np.ndarray, kernel, radius: int) -> np.ndarray:
    """Every pixel's weighted mean over a square window, border mirrored (float64)."""
    x = img.astype(np.float64)
    if x.ndim == 2:
        x = x[..., None]
    h, w, _ = x.shape
    pad = np.pad(x, ((radius, radius), (radius, radius), (0, 0)), mode="reflect")
    out = np.empty_like(x)
    offsets = list(itertools.product(range(-radius, radius + 1), repeat=2))
    for i in range(h):
        for j in range(w):
            t_q = np.concatenate([[i, j], x[i, j]])[None]
            t_k = np.array([np.concatenate([[i + a, j + b], pad[i + a + radius, j + b + radius]])
                            for a, b in offsets])
            s = kernel.score(torch.from_numpy(t_q), torch.from_numpy(t_k)).numpy()[0]
            wgt = np.exp(s - s.max())
            vals = np.array([pad[i + a + radius, j + b + radius] for a, b in offsets])
            out[i, j] = wgt @ vals / wgt.sum()
    return out if img.ndim == 3 else out[..., 0]


@pytest.fixture
def gray() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (24, 31), dtype=np.uint8)


def test_a_product_of_gaussians_is_the_bilateral_filter(gray: np.ndarray) -> None:
    k = Gaussian(3.0).on([0, 1]) * Gaussian(25.0).on([2])
    got = kernel_filter(gray, k, radius=4, window="disk")
    np.testing.assert_array_equal(got, bilateral(gray, 25.0, 3.0, radius=4))


def test_colour_bilateral_as_kernels() -> None:
    img = np.random.default_rng(1).random((16, 20, 3)).astype(np.float32)
    k = Gaussian(2.0).on([0, 1]) * Gaussian(0.2).on([2, 3, 4])
    got = kernel_filter(img, k, radius=3, window="disk")
    want = bilateral(img, 0.2, 2.0, radius=3)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("kernel", [
    Gaussian([1.5, 3.0]).on([0, 1]) * Gaussian(0.3).on([2]),
    Gaussian(None, metric=np.array([[0.5, 0.2], [0.0, 0.4]])).on([0, 1])
    * Gaussian(0.25).on([2]),
    QuadraticKernel(position=[[0.2, 0.05], [0.05, 0.1]], value=4.0),
    Gaussian(2.0).on([0, 1]),
], ids=["per-column", "steered", "quadratic", "position only"])
def test_equals_the_naive_weighted_mean(kernel) -> None:
    img = np.random.default_rng(2).random((9, 11))
    got = kernel_filter(img, kernel, radius=2)
    np.testing.assert_allclose(got, _naive(img, kernel, 2), rtol=0, atol=1e-12)


def test_position_only_is_kernel_regression_inside_the_border() -> None:
    img = np.random.default_rng(3).random((30, 30, 2))
    got = kernel_filter(img, Gaussian(2.0).on([0, 1]), radius=3)
    want = kernel_regression(img, 2.0, radius=3)  # its window is clipped at the border
    np.testing.assert_allclose(got[3:-3, 3:-3], want[3:-3, 3:-3], rtol=0, atol=1e-12)


def test_a_learned_bandwidth_is_used_at_its_current_value(gray: np.ndarray) -> None:
    learned = Gaussian(2.0, learnable=True).on([0, 1]) * Gaussian(20.0).on([2])
    with torch.no_grad():
        for p in learned.parameters():  # softplus(raw) = 2: the bandwidth doubles
            p.fill_(float(np.log(np.expm1(2.0))))
    fixed = Gaussian(4.0).on([0, 1]) * Gaussian(20.0).on([2])
    np.testing.assert_array_equal(kernel_filter(gray, learned, 3), kernel_filter(gray, fixed, 3))


def test_one_kernel_object_in_every_face(gray: np.ndarray) -> None:
    # the same object in the engine, on explicit vectors t (the padded image's pixels as
    # keys, each query seeing its window through a matrix mask), and in the image filter
    k = Gaussian(2.0).on([0, 1]) * Gaussian(30.0).on([2])
    img, r = gray[:10, :12].astype(np.float64), 2
    pad = np.pad(img, r, mode="reflect")
    rows, cols = np.meshgrid(np.arange(-r, 10.0 + r), np.arange(-r, 12.0 + r), indexing="ij")
    keys = np.stack([rows.ravel(), cols.ravel(), pad.ravel()], 1)
    inside = (rows >= 0) & (rows < 10) & (cols >= 0) & (cols < 12)
    queries = keys[inside.ravel()]
    visible = ((np.abs(queries[:, None, 0] - keys[None, :, 0]) <= r)
               & (np.abs(queries[:, None, 1] - keys[None, :, 1]) <= r))
    engine = nadaraya.smooth(queries, keys, pad.ravel(), k, MatrixMask(visible),
                             engine="dense").reshape(img.shape)
    np.testing.assert_allclose(kernel_filter(img, k, radius=r), engine, rtol=0, atol=1e-10)


@pytest.mark.parametrize("kernel, words", [
    (Laplacian(1.0), "not a Gaussian quadratic form"),
    (ExpDot(), "not a Gaussian quadratic form"),
    (Gaussian(None, metric=np.ones((1, 3))), "couples position and channel"),
    (Gaussian(1.0).on([4]), "cannot score t"),
    ("gaussian", "must be a nadaraya.kernels.Kernel"),
])
def test_kernels_the_grid_cannot_compute_are_refused(gray, kernel, words: str) -> None:
    with pytest.raises(NadarayaError, match=words):
        kernel_filter(gray, kernel, radius=2)


@pytest.mark.parametrize("radius", [0, -1, 1.5, True])
def test_radius_is_checked(gray: np.ndarray, radius) -> None:
    with pytest.raises(NadarayaError, match="radius"):
        kernel_filter(gray, Gaussian(1.0).on([0, 1]), radius=radius)


def test_border_is_checked(gray: np.ndarray) -> None:
    with pytest.raises(NadarayaError, match="border"):
        kernel_filter(gray, Gaussian(1.0).on([0, 1]), radius=1, border="mirror")


def test_a_dask_image_gives_the_same_result(gray: np.ndarray) -> None:
    da = pytest.importorskip("dask.array")
    k = Gaussian(2.0).on([0, 1]) * Gaussian(30.0).on([2])
    lazy = kernel_filter(da.from_array(gray, chunks=(10, 13)), k, radius=3)
    np.testing.assert_array_equal(lazy.compute(), kernel_filter(gray, k, radius=3))
