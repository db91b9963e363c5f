"""Image filters on a float32 image tensor on the device equal the float64 results on the CPU.

Every filter of :mod:`nadaraya.image` takes a torch tensor and keeps it on its
device; the grid engine (:func:`nadaraya.engine.grid.grid_smooth`) takes the
values tensor on any device. Oracle: the same call on the CPU in float64 on
the image rounded to float32, and for the bilateral filter also the naive
loop of ``tests/image/_naive.py``.

Tolerance. Each filter is a weighted mean of pixel values in ``[0, 1]`` with
weights ``exp(-t)``, ``0 <= t <= T``: the float32 result is off by about
``eps * (1 + T)`` relative to the weights (the exponent's rounding) plus the
output's own rounding; ``4 * eps * (1 + T)`` of the values' range is about
thirty times the largest error the CPU shows (``0.14 eps (1 + T)``). ``T`` is the
largest exponent a window can hold: the spatial term plus ``1 / (2 sigma^2)``
(a colour difference of at most 1) for the bilateral filter; ``4 / h^2`` for
non-local means (a patch difference of at most 1, hence ``r^2 / h^2 <= 1 / h^2``,
with a factor four for the float32 patch distances' cancellation).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya.engine.grid import grid_smooth
from nadaraya.image import bilateral, kernel_regression, non_local_means
from nadaraya.kernels.quadratic import bilateral_kernel, gaussian_patch, nlm_kernel

from ..image import _naive
from ._helpers import eps, host

EPS32 = eps(torch.float32)


def _image(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float32 image in [0, 1]: a smooth ramp plus noise (edges for the bilateral filter)."""
    h, w = shape[:2]
    ramp = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.3, w))
    if len(shape) == 3:
        ramp = ramp[..., None]
    img = np.clip(ramp + 0.2 * rng.random(shape), 0.0, 1.0)
    return torch.from_numpy(img).float()


def _check(got: torch.Tensor, ref: torch.Tensor, device: torch.device, T: float) -> None:
    assert got.dtype == torch.float32 and got.shape == ref.shape
    err = np.abs(host(got, device) - ref.numpy()).max()
    assert err <= 4 * EPS32 * (1 + T), err / (EPS32 * (1 + T))


@pytest.mark.parametrize("shape", [(24, 30), (24, 30, 3)])
def test_bilateral(rng, device, shape):
    img = _image(rng, *shape)
    sigma_color, sigma_spatial = 0.2, 2.0  # disk window of radius 3
    got = bilateral(img.to(device), sigma_color, sigma_spatial)
    ref = bilateral(img.double(), sigma_color, sigma_spatial)
    T = 9 / (2 * sigma_spatial**2) + 1 / (2 * sigma_color**2)
    _check(got, ref, device, T)
    if len(shape) == 2:
        naive = _naive.bilateral(img.double().numpy(), sigma_spatial, sigma_color, 3)
        np.testing.assert_allclose(ref.numpy(), naive, rtol=0, atol=1e-12)


@pytest.mark.parametrize("search_radius", [3, None])
@pytest.mark.parametrize("shape", [(20, 24), (20, 24, 3)])
def test_non_local_means(rng, device, shape, search_radius):
    img = _image(rng, *shape)
    h = 0.3
    got = non_local_means(img.to(device), h, patch_size=5, search_radius=search_radius)
    ref = non_local_means(img.double(), h, patch_size=5, search_radius=search_radius)
    _check(got, ref, device, 4 / h**2)


@pytest.mark.parametrize("order", [0, 2])
def test_kernel_regression(rng, device, order):
    img = _image(rng, 24, 30)
    got = kernel_regression(img.to(device), 1.5, order)
    ref = kernel_regression(img.double(), 1.5, order)
    _check(got, ref, device, 2 * 5**2 / (2 * 1.5**2))  # square window, radius ceil(3 h) = 5


@pytest.mark.parametrize("kind", ["bilateral", "nlm"])
def test_grid_smooth(rng, device, kind):
    img = _image(rng, 2, 20, 24)  # channels first, as the grid engine takes it
    if kind == "bilateral":
        kernel, T = bilateral_kernel(1.5, 0.25, ndim=2), 9 / (2 * 1.5**2) + 1 / (2 * 0.25**2)
    else:
        kernel, T = nlm_kernel(0.3, gaussian_patch(5), 2, sigma=0.05), 4 / 0.3**2
    got = grid_smooth(img.to(device), kernel, 3)
    ref = grid_smooth(img.double(), kernel, 3)
    assert got.acc.device.type == device.type
    _check(got.mean(), ref.mean(), device, T)
