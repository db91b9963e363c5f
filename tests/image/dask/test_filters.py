"""Image filters on dask arrays equal the in-memory filters bit for bit, whatever the chunks.

Each chunk is read with the filter's halo through ``map_overlap``: the oracle
is the same filter on the whole NumPy image, compared with ``np.array_equal``
for chunkings that cut anywhere (one row per chunk, uneven chunks, chunks
smaller than the halo, a single chunk), for uint8, uint16, float32 and
float64 images, grey and colour.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya.image import (
    bilateral,
    denoise,
    kernel_regression,
    non_local_means,
    steering_kernel_regression,
)

from ._images import noisy_image

da = pytest.importorskip("dask.array")

Filter = Callable[[Any, float], Any]

# name -> filter(image, full scale); parameters in the image's units through the scale
FILTERS: dict[str, Filter] = {
    "bilateral": lambda x, s: bilateral(x, 0.2 * s, 1.5),
    "bilateral-square-edge": lambda x, s: bilateral(x, 0.3 * s, 1.0, 2, window="square",
                                                    border="edge"),
    "bilateral-wrap": lambda x, s: bilateral(x, 0.2 * s, 1.0, 2, border="wrap"),
    "nlm": lambda x, s: non_local_means(x, 0.2 * s, 3, 2, sigma=0.05 * s),
    "nlm-box-symmetric": lambda x, s: non_local_means(x, 0.3 * s, 5, 1, patch_kind="box",
                                                      border="symmetric"),
    "nlm-wrap": lambda x, s: non_local_means(x, 0.2 * s, 5, 2, border="wrap"),
    "kr0": lambda x, s: kernel_regression(x, 1.2, 0),
    "kr1": lambda x, s: kernel_regression(x, 1.0, 1),
    "skr": lambda x, s: steering_kernel_regression(x, sigma=0.1 * s, radius=3),
    "skr-paper": lambda x, s: steering_kernel_regression(
        x, 1.0, 2, sigma=0.1 * s, order=2, pilot="image", range_sigma=None, radius=3),
    "denoise-nlm": lambda x, s: denoise(x, "nlm", 0.1 * s, search_radius=2, patch_size=3),
    "denoise-bilateral": lambda x, s: denoise(x, "bilateral", 0.1 * s),
    "denoise-kr": lambda x, s: denoise(x, "kr", 0.1 * s),
    "denoise-skr": lambda x, s: denoise(x, "skr", 0.1 * s, radius=3),
}
DTYPES = [np.uint8, np.uint16, np.float32, np.float64]


def _image(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A piecewise-constant image with noise, in the dtype's range (integers) or [0, 1]."""
    rows, cols = np.indices(shape[:2])
    base = 0.3 + 0.4 * ((rows // 5 + cols // 7) % 2)
    return noisy_image(rng, base, shape, dtype, sd=0.1, tint=(0.6, 1.0))


def _scale(dtype: Any) -> float:
    return float(np.iinfo(dtype).max) if np.dtype(dtype).kind == "u" else 1.0


def _chunked(img: np.ndarray, rows: tuple[int, ...], cols: tuple[int, ...]) -> Any:
    return da.from_array(img, chunks=(rows, cols, *img.shape[2:]))


def _check(name: str, img: np.ndarray, rows: tuple[int, ...], cols: tuple[int, ...]) -> None:
    run = FILTERS[name]
    whole = run(img, _scale(img.dtype))
    lazy = run(_chunked(img, rows, cols), _scale(img.dtype))
    assert isinstance(lazy, da.Array)
    got = lazy.compute()
    assert got.dtype == whole.dtype and got.shape == whole.shape
    assert np.array_equal(got, whole), (name, img.dtype, rows, cols,
                                        int((got != whole).sum()))


@pytest.mark.parametrize("name", list(FILTERS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_filter_equals_the_in_memory_one(rng: np.random.Generator, name: str,
                                               dtype: Any) -> None:
    img = _image(rng, (23, 19, 3) if dtype in (np.uint8, np.float32) else (23, 19), dtype)
    # one row per chunk, uneven chunks, and the whole image in one chunk
    _check(name, img, (1,) * 23, (19,))
    _check(name, img, (5, 1, 9, 8), (3, 10, 6))
    _check(name, img, (23,), (19,))


@st.composite
def _cuts(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    points = draw(st.sets(st.integers(1, n - 1), max_size=min(6, n - 1)))
    bounds = [0, *sorted(points), n]
    return tuple(b - a for a, b in itertools.pairwise(bounds))


@settings(max_examples=25)
@given(data=st.data(), name=st.sampled_from(sorted(FILTERS)), dtype=st.sampled_from(DTYPES),
       colour=st.booleans(), height=st.integers(8, 20), width=st.integers(8, 20),
       seed=st.integers(0, 2**16))
def test_any_chunking_gives_the_in_memory_result(data: st.DataObject, name: str, dtype: Any,
                                                 colour: bool, height: int, width: int,
                                                 seed: int) -> None:
    img = _image(np.random.default_rng(seed), (height, width, 3) if colour else
                 (height, width), dtype)
    _check(name, img, data.draw(_cuts(height)), data.draw(_cuts(width)))


def test_order_two_fits_match_to_the_last_units(rng: np.random.Generator) -> None:
    # kernel regression of order 2 sums its moments with matrix products whose rounding
    # follows the engine's tile (see the module's docstring): float32 results are
    # exact, float64 ones within a few units in the last place
    for dtype in (np.float32, np.float64):
        img = _image(rng, (23, 19), dtype)
        whole = kernel_regression(img, 1.2, 2)
        got = kernel_regression(_chunked(img, (4, 7, 1, 11), (9, 10)), 1.2, 2).compute()
        if dtype == np.float32:
            assert np.array_equal(got, whole)
        else:
            np.testing.assert_allclose(got, whole, rtol=0, atol=8 * np.finfo(dtype).eps)


def test_the_budget_of_the_caller_holds_in_every_chunk(rng: np.random.Generator) -> None:
    img = _image(rng, (40, 36), np.float32)
    whole = steering_kernel_regression(img, sigma=0.1)
    with nadaraya.config_context(working_memory=0.02):
        lazy = steering_kernel_regression(_chunked(img, (13, 27), (36,)), sigma=0.1)
    assert np.array_equal(lazy.compute(), whole)


def test_nothing_is_computed_before_compute() -> None:
    import dask

    def boom() -> np.ndarray:
        raise AssertionError("computed")

    lazy = da.from_delayed(dask.delayed(boom)(), shape=(30, 30), dtype=np.uint8)
    out = bilateral(lazy, 20.0, 2.0)
    out = non_local_means(out, 10.0, 3, 2)
    out = kernel_regression(out, 1.0)
    out = steering_kernel_regression(out, 1.5, sigma=5.0)
    assert isinstance(out, da.Array) and out.dtype == np.uint8
    with pytest.raises(AssertionError, match="computed"):
        out.compute()
