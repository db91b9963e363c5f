"""Every filter over the dtype's whole range: no overflow near the largest number, no
underflow near the smallest, and float32 as accurate as its rounding allows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from nadaraya.image import (
    bilateral,
    kernel_regression,
    non_local_means,
    reconstruct,
    steering_kernel_regression,
)

# filter(image, scale): the image's parameters in its units are multiples of ``scale``
Filter = Callable[[np.ndarray, float], Any]

FILTERS: dict[str, Filter] = {
    "bilateral": lambda x, s: bilateral(x, 0.25 * s, 2.0),
    "nlm": lambda x, s: non_local_means(x, 0.15 * s, 5, 4, sigma=0.1 * s),
    "kr0": lambda x, s: kernel_regression(x, 1.5, 0),
    "kr2": lambda x, s: kernel_regression(x, 1.5, 2),
    # data_range in the image's units too: the non-local means pilot's recipe wants a
    # noise level within 1e-150 to 1e150 and below the data range
    "skr": lambda x, s: steering_kernel_regression(x, sigma=0.1 * s, data_range=10 * s),
    "skr-paper": lambda x, s: steering_kernel_regression(
        x, 2.0, 2, sigma=0.1 * s, order=2, alpha=0.5, pilot="image", range_sigma=None,
        data_range=10 * s),
}
# least-squares fits of order 2: a constant up to the rounding of their float64 solve
FITS = ("kr2", "skr-paper", "reconstruct")


def _reconstruct(x: np.ndarray, s: float) -> Any:
    keep = np.random.default_rng(3).random(x.shape) < 0.4
    return reconstruct(np.argwhere(keep), x[keep], x.shape, h=1.5, empty="nearest")


FILTERS["reconstruct"] = _reconstruct


def _natural(size: int = 48) -> np.ndarray:
    data = pytest.importorskip("skimage.data")
    rng = np.random.default_rng(7)
    clean = data.camera()[240:240 + size, 200:200 + size].astype(np.float64) / 255.0
    return (clean + 0.08 * rng.standard_normal(clean.shape)).astype(np.float32)


@pytest.mark.parametrize("name", list(FILTERS))
@pytest.mark.parametrize(("dtype", "value"), [(np.float32, 3e38), (np.float64, 1.7e308),
                                              (np.float64, 1e-300), (np.float64, 5e-320)])
def test_a_constant_image_filters_to_itself(name: str, dtype: type, value: float) -> None:
    img = np.full((20, 22), value, dtype=dtype)
    # parameters in the image's units, or 1 where their squares would leave float64
    out = np.asarray(FILTERS[name](img, value if 1e-150 < value < 1e150 else 1.0))
    assert out.dtype == dtype
    assert np.isfinite(out).all()
    if dtype == np.float64 and name in FITS:
        np.testing.assert_allclose(out, img, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(out, img)


@pytest.mark.parametrize("name", list(FILTERS))
@pytest.mark.parametrize(("dtype", "exponent"), [(np.float32, 120), (np.float32, -100),
                                                 (np.float64, 480), (np.float64, -480)])
def test_scaling_by_a_power_of_two_commutes(name: str, dtype: type, exponent: int) -> None:
    # a natural image (values in [-0.3, 1.3]) scaled near the top or the bottom of float32's
    # normal range, its parameters with it: the result is the unscaled one, scaled (in
    # float64 as far as the parameters' squares stay numbers)
    img = _natural().astype(dtype)
    factor = 2.0**exponent
    ref = np.asarray(FILTERS[name](img, 1.0), dtype=np.float64)
    out = np.asarray(FILTERS[name](np.ldexp(img, exponent), factor))
    assert out.dtype == dtype and np.isfinite(out).all()
    np.testing.assert_array_equal(np.ldexp(out.astype(np.float64), -exponent), ref)


# Not "skr-paper": its second iteration steers by the gradients of fits that are
# ill-conditioned at a few pixels, where the float32 rounding of the weights (1e-7) moves
# a gradient by 0.2 and the next fit with it.
@pytest.mark.parametrize("name", [n for n in FILTERS if n != "skr-paper"])
def test_float32_within_2e_6_of_float64(name: str) -> None:
    img = _natural(128)
    out32 = np.asarray(FILTERS[name](img, 1.0))
    out64 = np.asarray(FILTERS[name](img.astype(np.float64), 1.0))
    assert out32.dtype == np.float32 and not np.isnan(out32).any()
    error = np.abs(out32.astype(np.float64) - out64).max() / np.abs(out64).max()
    assert error <= 2e-6, error


@pytest.mark.parametrize("scale", [40.0, 1e10, 1e150])
def test_scales_beyond_the_image_use_a_window_of_its_size(rng: np.random.Generator,
                                                          scale: float) -> None:
    # the default window is capped at the image's larger side: a scale near the float
    # range asked for more offsets than memory holds (or overflowed an int)
    from nadaraya.image import bilateral, kernel_regression, steering_kernel_regression

    img = rng.random((12, 15))
    side = max(img.shape)
    np.testing.assert_array_equal(kernel_regression(img, scale),
                                  kernel_regression(img, scale, radius=side))
    np.testing.assert_array_equal(bilateral(img, 0.3, scale),
                                  bilateral(img, 0.3, scale, radius=side))
    np.testing.assert_array_equal(steering_kernel_regression(img, scale),
                                  steering_kernel_regression(img, scale, radius=side + 1))


def test_an_image_that_requires_grad_is_refused_by_name() -> None:
    # the filters return no gradient: a tensor that asks for one is refused, not dropped
    from nadaraya import NadarayaError
    from nadaraya.image import bilateral, kernel_regression, non_local_means

    img = torch.full((6, 6), 0.3, dtype=torch.float64, requires_grad=True)
    for run in (lambda x: bilateral(x, 0.5, 1.0), lambda x: kernel_regression(x, 1.0),
                lambda x: non_local_means(x, 0.1, patch_size=3, search_radius=2)):
        with pytest.raises(NadarayaError, match=r"image requires grad.*detach"):
            run(img)
        with torch.no_grad():
            assert torch.isfinite(run(img)).all()
        assert torch.equal(run(img.detach()), run(img.detach()))
