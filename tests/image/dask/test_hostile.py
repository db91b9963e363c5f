"""Dask images the filters refuse, or fix, and say so: the in-memory filters' errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.image import (
    bilateral,
    denoise,
    estimate_noise,
    kernel_regression,
    non_local_means,
    steering_kernel_regression,
)

da = pytest.importorskip("dask.array")


def _error(run: Any, image: Any) -> str:
    with pytest.raises(NadarayaError) as info:
        run(image)
    return str(info.value)


@pytest.mark.parametrize("dtype", [np.complex128, np.dtype("U3"), object])
def test_a_dtype_refused_in_memory_is_refused_with_the_same_error(dtype: Any) -> None:
    img = np.zeros((12, 10), dtype=dtype)
    run = lambda x: bilateral(x, 0.1, 1.0)  # noqa: E731
    assert _error(run, da.from_array(img, chunks=5)) == _error(run, img)


@pytest.mark.parametrize("shape", [(4, 5, 6, 2), (12,), (6, 7, 9)])
def test_a_shape_refused_in_memory_is_refused_with_the_same_error(shape: tuple[int, ...]
                                                                 ) -> None:
    img = np.zeros(shape, dtype=np.float32)
    run = lambda x: kernel_regression(x, 1.0)  # noqa: E731
    assert _error(run, da.from_array(img, chunks=3)) == _error(run, img)


def test_a_chunked_channel_axis_is_put_in_one_chunk(rng: np.random.Generator) -> None:
    img = rng.random((14, 11, 3)).astype(np.float32)
    lazy = bilateral(da.from_array(img, chunks=(4, 5, 1)), 0.2, 1.5)
    assert lazy.chunks[2] == (3,)
    assert np.array_equal(lazy.compute(), bilateral(img, 0.2, 1.5))


def test_bool_images_filter_as_uint8(rng: np.random.Generator) -> None:
    img = rng.random((12, 13)) < 0.5
    lazy = non_local_means(da.from_array(img, chunks=4), 100.0, 3, 2)
    assert lazy.dtype == np.uint8
    assert np.array_equal(lazy.compute(), non_local_means(img, 100.0, 3, 2))


def test_unknown_chunk_sizes_are_refused_with_the_fix() -> None:
    x = da.from_array(np.ones((10, 6)), chunks=5)
    img = x[x[:, 0] > 0]  # (nan, 6): sizes known only after computing
    message = _error(lambda a: kernel_regression(a, 1.0), img)
    assert "unknown chunk sizes" in message and "compute_chunk_sizes()" in message


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(31, 26), (20, 17, 3)])
def test_the_noise_level_is_the_in_memory_one(rng: np.random.Generator, dtype: Any,
                                               shape: tuple[int, ...]) -> None:
    img = (rng.random(shape) * 200).astype(dtype)
    for chunks in ((3, 5), (1, 26)):
        lazy = da.from_array(img, chunks=(*chunks, 3)[:len(shape)])
        assert estimate_noise(lazy) == estimate_noise(img)
        assert np.array_equal(estimate_noise(lazy, per_channel=True),
                              estimate_noise(img, per_channel=True))


def test_a_noise_level_estimated_on_chunks_drives_the_filters(
        rng: np.random.Generator) -> None:
    img = (rng.random((26, 21)) * 255).astype(np.uint8)
    lazy = da.from_array(img, chunks=(6, 8))
    assert np.array_equal(denoise(lazy, "bilateral").compute(), denoise(img, "bilateral"))
    assert np.array_equal(steering_kernel_regression(lazy, radius=3).compute(),
                          steering_kernel_regression(img, radius=3))
    flat = np.full((12, 12), 7, np.uint8)
    assert denoise(da.from_array(flat, chunks=5), "nlm") is not None


def test_non_finite_pixels_are_named_in_the_noise_estimate() -> None:
    img = np.zeros((12, 12))
    img[5, 6] = np.nan
    assert "NaN or infinite" in _error(estimate_noise, da.from_array(img, chunks=5))


def test_the_global_search_is_refused() -> None:
    message = _error(lambda x: non_local_means(x, 0.1, 3, None),
                     da.zeros((16, 16), chunks=8))
    assert "search_radius" in message


def test_a_pilot_of_another_shape_is_refused() -> None:
    message = _error(lambda x: steering_kernel_regression(x, 1.5, sigma=0.1,
                                                          pilot=np.zeros((8, 8))),
                     da.zeros((16, 16), chunks=8))
    assert "pilot must have the image's size" in message


def test_a_given_pilot_is_read_with_the_halo(rng: np.random.Generator) -> None:
    img = rng.random((20, 17))
    pilot = kernel_regression(img, 1.0)
    whole = steering_kernel_regression(img, 1.5, sigma=0.1, pilot=pilot)
    for given in (pilot, da.from_array(pilot, chunks=(3, 17))):
        lazy = steering_kernel_regression(da.from_array(img, chunks=(7, 6)), 1.5, sigma=0.1,
                                          pilot=given)
        assert np.array_equal(lazy.compute(), whole)


def test_importing_the_image_package_does_not_import_dask() -> None:
    code = ("import sys, nadaraya, nadaraya.image, nadaraya.cli.denoise; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
