"""Classic and steering kernel regression against naive weighted least squares."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.engine.grid import window_offsets
from nadaraya.image import kernel_regression, steering_kernel_regression
from nadaraya.image._poly import local_fit
from nadaraya.image.steering import steering_field, steering_matrices
from nadaraya.kernels.quadratic import QuadraticKernel, classic_kernel, steering_kernel

from . import _naive


@pytest.mark.parametrize("order", [0, 1, 2])
def test_classic_equals_naive_least_squares(rng: np.random.Generator, order: int) -> None:
    img = rng.random((9, 10))
    h = 1.3

    def weight(i: int, j: int, y: int, x: int) -> float:
        return math.exp(-((i - y) ** 2 + (j - x) ** 2) / (2 * h * h))

    ref, _ = _naive.local_polynomial(img, weight, 3, order)
    np.testing.assert_allclose(kernel_regression(img, h, order, radius=3), ref,
                               rtol=0, atol=1e-13)


def test_order_two_reproduces_quadratics() -> None:
    r, c = np.indices((14, 15)).astype(float)
    quad = 3 + 0.5 * r - 0.2 * c + 0.03 * r * r - 0.04 * r * c + 0.01 * c * c
    np.testing.assert_allclose(kernel_regression(quad, 1.5, 2), quad, rtol=0, atol=1e-10)
    assert np.abs(kernel_regression(quad, 1.5, 0) - quad).max() > 1e-3


def test_colour_channels_are_independent(rng: np.random.Generator) -> None:
    img = rng.random((8, 9, 3))
    out = kernel_regression(img, 1.0, 2)
    for ch in range(3):
        np.testing.assert_allclose(out[:, :, ch], kernel_regression(img[:, :, ch], 1.0, 2),
                                   rtol=0, atol=1e-13)


def test_steering_fit_equals_naive_least_squares(rng: np.random.Generator) -> None:
    h, w, r, bw = 8, 9, 2, 1.1
    img = rng.random((h, w))
    a = rng.standard_normal((h, w, 2, 2))
    cov = a @ a.transpose(0, 1, 3, 2) + 0.3 * np.eye(2)

    def weight(i: int, j: int, y: int, x: int) -> float:
        d = np.array([y - i, x - j], float)
        c = cov[y, x]
        return math.sqrt(np.linalg.det(c)) * math.exp(-d @ c @ d / (2 * bw * bw))

    ref, grad = _naive.local_polynomial(img, weight, r, 2)
    fit = local_fit(torch.from_numpy(img)[None], steering_kernel(bw, torch.from_numpy(cov)),
                    window_offsets(r), 2)
    np.testing.assert_allclose(fit.value[0].numpy(), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fit.gradient[:, 0].numpy(), grad, rtol=0, atol=1e-10)


def test_steering_matrices_equal_per_pixel_svd(rng: np.random.Generator) -> None:
    h, w = 7, 8
    grad = rng.standard_normal((2, h, w)) * 20
    cov = steering_matrices(torch.from_numpy(grad), 1, lambda_elongation=1.0,
                            lambda_scale=0.01, alpha=0.4).numpy()
    padded = np.pad(grad, ((0, 0), (1, 1), (1, 1)), mode="reflect")
    for i in range(h):
        for j in range(w):
            g = np.stack([padded[0, i:i + 3, j:j + 3].ravel(),
                          padded[1, i:i + 3, j:j + 3].ravel()], 1)
            _, s, vt = np.linalg.svd(g, full_matrices=False)
            elong = (s[0] + 1.0) / (s[1] + 1.0)
            gamma = ((s[0] * s[1] + 0.01) / 9) ** 0.4
            ref = gamma * (elong * np.outer(vt[0], vt[0]) + np.outer(vt[1], vt[1]) / elong)
            np.testing.assert_allclose(cov[i, j], ref, rtol=1e-10, atol=1e-12)


def test_steering_follows_an_edge(rng: np.random.Generator) -> None:
    # a diagonal step edge: steering kernels smooth along it, not across it
    r, c = np.indices((40, 40))
    clean = np.where(r > c, 200.0, 50.0)
    noisy = clean + 20 * rng.standard_normal(clean.shape)
    skr = steering_kernel_regression(noisy, h=2.0, iterations=2)
    classic = kernel_regression(noisy, 1.5, 2)
    assert _naive.psnr(clean, skr, 255) > _naive.psnr(clean, classic, 255) + 1.0
    assert _naive.psnr(clean, skr, 255) > _naive.psnr(clean, noisy, 255) + 6.0


def test_steering_uint8_and_colour(rng: np.random.Generator) -> None:
    img = rng.integers(0, 256, (16, 18, 3), dtype=np.uint8)
    out = steering_kernel_regression(img, 1.5, 1)
    assert out.dtype == np.uint8 and out.shape == img.shape
    out0 = steering_kernel_regression(img[:, :, 0].astype(float), 1.5, 1, order=0)
    assert out0.shape == (16, 18)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x: kernel_regression(x, 0.0), "h must be"),
        (lambda x: kernel_regression(x, 1.0, order=3), "order"),
        (lambda x: kernel_regression(x, 1.0, radius=0), "radius"),
        (lambda x: kernel_regression(x[..., None, None], 1.0), "2-D"),
        (lambda x: steering_kernel_regression(x, -1.0), "h must be"),
        (lambda x: steering_kernel_regression(x, 1.0, 0), "iterations"),
        (lambda x: steering_kernel_regression(x, 1.0, alpha=2.0), "alpha"),
        (lambda x: steering_kernel_regression(x, 1.0, window=-1), "window"),
        (lambda x: steering_kernel_regression(x, 1.0, lambda_scale=-1), "lambda_scale"),
    ],
)
def test_bad_input(call, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        call(np.zeros((6, 6)))


def test_steering_from_a_pilot(rng: np.random.Generator) -> None:
    r, c = np.indices((30, 30))
    clean = np.where(r > c, 200.0, 50.0)
    noisy = clean + 20 * rng.standard_normal(clean.shape)
    paper = {"order": 2, "alpha": 0.5, "range_sigma": None, "h": 2.0}
    # pilot="image": the first gradients from the noisy image itself
    np.testing.assert_array_equal(
        steering_kernel_regression(noisy, iterations=1, pilot=noisy, initial_h=0.5, **paper),
        steering_kernel_regression(noisy, iterations=1, pilot="image", **paper))
    # one iteration from a pilot: the steering fit with C from the pilot's gradients
    smooth = kernel_regression(noisy, 1.5)
    grad = local_fit(torch.from_numpy(smooth)[None], classic_kernel(1.2), window_offsets(4),
                     2).gradient
    field, log_weight = steering_field(grad, 2.0, 2)
    kernel = QuadraticKernel(position_field=field, key_log_weight=log_weight, ndim=2)
    ref = local_fit(torch.from_numpy(noisy)[None], kernel, window_offsets(6), 2).value[0]
    out = steering_kernel_regression(noisy, 2.0, 1, pilot=smooth, initial_h=1.2, radius=6,
                                     order=2, alpha=0.5, range_sigma=None, data_range=255)
    np.testing.assert_allclose(out, ref.numpy(), rtol=0, atol=1e-12)
    # the field is the steering kernel's: C / (2 h^2) and log sqrt(det C)
    reference = steering_kernel(2.0, steering_matrices(grad, 2))
    torch.testing.assert_close(field, reference.position_field, rtol=1e-13, atol=0)
    torch.testing.assert_close(log_weight, reference.key_log_weight, rtol=0, atol=1e-12)
    with pytest.raises(NadarayaError, match="pilot"):
        steering_kernel_regression(noisy, 2.0, 1, pilot=clean[:10])
    with pytest.raises(NadarayaError, match="pilot"):
        steering_kernel_regression(noisy, 2.0, 1, pilot="bm3d")
    with pytest.raises(NadarayaError, match="range_sigma"):
        steering_kernel_regression(noisy, 2.0, 1, range_sigma=-1.0)


def test_iterations_smooth_the_previous_estimate(rng: np.random.Generator) -> None:
    # iterative steering kernel regression: C from the previous order-2 fit's
    # gradients, and the previous estimate as the data
    noisy = rng.random((14, 15)) * 255
    data = torch.from_numpy(noisy)[None]
    offsets = window_offsets(4)
    grad = local_fit(data, classic_kernel(0.5), window_offsets(2), 2).gradient
    first = local_fit(data, steering_kernel(1.3, steering_matrices(grad, 1, alpha=0.5)),
                      offsets, 2)
    second = local_fit(first.value, steering_kernel(
        1.3, steering_matrices(first.gradient, 1, alpha=0.5)), offsets, 0)
    out = steering_kernel_regression(noisy, 1.3, 2, pilot="image", order=0, window=1,
                                     alpha=0.5, radius=4, data_range=255)
    np.testing.assert_allclose(out, second.value[0].numpy(), rtol=0, atol=1e-9)


def test_photometric_factor_equals_naive_loop(rng: np.random.Generator) -> None:
    h, w, r, bw, s = 9, 8, 2, 1.4, 0.3
    noisy = rng.random((h, w))
    pilot = rng.random((h, w))
    grad = local_fit(torch.from_numpy(pilot)[None], classic_kernel(1.0), window_offsets(3),
                     2).gradient
    cov = steering_matrices(grad * 255, 2, alpha=0.3).numpy()

    def weight(i: int, j: int, y: int, x: int) -> float:
        d = np.array([y - i, x - j], float)
        c = cov[y, x]
        return (math.sqrt(np.linalg.det(c)) * math.exp(-d @ c @ d / (2 * bw * bw))
                * math.exp(-(pilot[i, j] - pilot[y, x]) ** 2 / (2 * s * s)))

    ref, _ = _naive.local_polynomial(noisy, weight, r, 0)
    out = steering_kernel_regression(noisy, bw, pilot=pilot, range_sigma=s, radius=r,
                                     data_range=1.0)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)


def test_default_pilot_is_non_local_means(rng: np.random.Generator) -> None:
    from nadaraya.image import estimate_noise, non_local_means
    from nadaraya.image.denoise import recipe

    r, c = np.indices((32, 32))
    noisy = np.where(r > c, 200.0, 50.0) + 20 * rng.standard_normal((32, 32))
    pilot = non_local_means(noisy, **recipe("nlm", 20.0))
    np.testing.assert_array_equal(steering_kernel_regression(noisy, sigma=20.0),
                                  steering_kernel_regression(noisy, sigma=20.0, pilot=pilot))
    # without sigma, the noise is estimated
    np.testing.assert_array_equal(
        steering_kernel_regression(noisy),
        steering_kernel_regression(noisy, sigma=estimate_noise(noisy)))
