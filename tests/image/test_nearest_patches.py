"""The grid engine's patch search against a naive loop over reference positions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError, config_context
from nadaraya.engine.grid import nearest_patches


def _naive(img: np.ndarray, p: int, window: int, k: int,
           refs: list[tuple[int, int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One reference at a time in float64: every candidate's distance, sorted by
    (distance, not the reference itself, position), the first k kept, padded with -1
    and inf."""
    x = img[None] if img.ndim == 2 else img
    _, height, width = x.shape
    rows, cols = height - p + 1, width - p + 1
    if refs is None:
        refs = [(r, c) for r in range(rows) for c in range(cols)]
    idx = np.full((len(refs), k), -1)
    dist = np.full((len(refs), k), math.inf)
    for i, (r, c) in enumerate(refs):
        ref = x[:, r:r + p, c:c + p].astype(np.float64)
        found = []
        for rr in range(max(0, r - window), min(rows - 1, r + window) + 1):
            for cc in range(max(0, c - window), min(cols - 1, c + window) + 1):
                d = float(((x[:, rr:rr + p, cc:cc + p] - ref) ** 2).sum())
                found.append((d, (rr, cc) != (r, c), rr * cols + cc))
        found.sort()
        for j, (d, _, pos) in enumerate(found[:k]):
            idx[i, j], dist[i, j] = pos, d
    return idx, dist


def _check(img: np.ndarray, p: int, window: int, k: int, **kwargs) -> None:
    got_idx, got_dist = nearest_patches(torch.from_numpy(img), p, window, k, **kwargs)
    refs = kwargs.get("references")
    want_idx, want_dist = _naive(img, p, window, k,
                                 None if refs is None else [tuple(r) for r in refs])
    np.testing.assert_array_equal(got_idx.numpy(), want_idx)
    np.testing.assert_allclose(got_dist.numpy(), want_dist, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("shape", "p", "window", "k"), [
    ((9, 11), 3, 2, 5), ((3, 8, 7), 2, 3, 10), ((2, 6, 6), 1, 1, 4), ((7, 5), 5, 2, 3),
    ((10, 10), 4, 0, 1)])
def test_equals_naive_loop_in_float64(shape, p, window, k):
    img = np.random.default_rng(sum(shape)).standard_normal(shape)
    _check(img, p, window, k)


def test_ties_go_to_the_reference_then_the_smaller_position():
    # integer values: distances are exact integers in float64, with many equal ones
    img = np.random.default_rng(1).integers(0, 2, (10, 12)).astype(np.float64)
    _check(img, 2, 3, 12)
    flat = np.zeros((6, 7))
    idx, dist = nearest_patches(torch.from_numpy(flat), 3, 1, 4, references=[[2, 2]])
    cols = 7 - 3 + 1
    assert idx.tolist() == [[2 * cols + 2, 1 * cols + 1, 1 * cols + 2, 1 * cols + 3]]
    assert dist.tolist() == [[0.0] * 4]
    # every reference is its own nearest, however many patches equal it
    idx = nearest_patches(torch.from_numpy(flat), 2, 2, 1)[0]
    np.testing.assert_array_equal(idx[:, 0].numpy(), np.arange(idx.shape[0]))


def test_k_one_and_k_larger_than_the_window():
    img = np.random.default_rng(2).standard_normal((3, 9, 9))
    idx, dist = nearest_patches(torch.from_numpy(img), 3, 2, 1)
    # distinct patches: each reference is its own nearest
    np.testing.assert_array_equal(idx[:, 0].numpy(), np.arange(idx.shape[0]))
    assert (dist == 0).all()
    _check(img, 3, 1, 15)  # at most 9 candidates: the rest are -1 and inf
    idx, dist = nearest_patches(torch.from_numpy(img), 3, 1, 15)
    assert (idx[:, 9:] == -1).all() and torch.isinf(dist[:, 9:]).all()
    _check(img, 3, 50, 60)  # a window beyond the image: every patch is a candidate
    corner = nearest_patches(torch.from_numpy(img), 3, 1, 9, references=[[0, 0]])[0]
    assert (corner[0, 4:] == -1).all() and (corner[0, :4] >= 0).all()


def test_references_pick_rows_of_the_full_search():
    img = np.random.default_rng(3).standard_normal((8, 9))
    full_idx, full_dist = nearest_patches(torch.from_numpy(img), 3, 2, 6)
    refs = torch.tensor([[0, 6], [5, 0], [2, 3], [5, 6], [2, 3]])
    idx, dist = nearest_patches(torch.from_numpy(img), 3, 2, 6, references=refs)
    pos = refs[:, 0] * 7 + refs[:, 1]
    assert torch.equal(idx, full_idx[pos]) and torch.equal(dist, full_dist[pos])
    _check(img, 3, 2, 6, references=refs.tolist())
    empty = nearest_patches(torch.from_numpy(img), 3, 2, 6, references=np.zeros((0, 2), int))
    assert empty[0].shape == (0, 6) and empty[1].shape == (0, 6)


def test_tiled_equals_untiled():
    img = torch.from_numpy(np.random.default_rng(4).standard_normal((3, 30, 33)))
    whole = nearest_patches(img, 5, 4, 12)
    with config_context(working_memory=0.01):  # a few references per chunk
        tiled = nearest_patches(img, 5, 4, 12)
    assert torch.equal(whole[0], tiled[0]) and torch.equal(whole[1], tiled[1])
    f32 = img.to(torch.float32)
    with config_context(working_memory=0.01):
        tiled32 = nearest_patches(f32, 5, 4, 12)
    assert tiled32[1].dtype == torch.float32
    assert torch.equal(nearest_patches(f32, 5, 4, 12)[0], tiled32[0])


def test_interior_grid_and_scattered_references_with_channels():
    img = np.random.default_rng(6).standard_normal((3, 40, 45))
    # a grid of references away from the borders: their box and its halo lie inside
    rr, cc = np.meshgrid(np.arange(12, 25, 3), np.arange(10, 31, 4), indexing="ij")
    _check(img, 4, 5, 20, references=np.stack([rr.ravel(), cc.ravel()], 1).tolist())
    # a few references far apart: each candidate's patch is gathered instead
    _check(img, 4, 3, 8, references=[[0, 0], [36, 41], [20, 3], [5, 30]])


def test_the_two_ways_of_forming_distances_agree_exactly():
    # float32: a different order of summation would change the last bits
    img = torch.from_numpy(np.random.default_rng(7).standard_normal((2, 40, 41)))
    img = img.to(torch.float32)
    whole = nearest_patches(img, 3, 3, 49)  # a grid of references: offset by offset
    refs = torch.tensor([[0, 0], [37, 38], [20, 5], [3, 33], [30, 17]])
    apart = nearest_patches(img, 3, 3, 49, references=refs)  # candidates gathered
    pos = refs[:, 0] * 39 + refs[:, 1]
    assert torch.equal(apart[0], whole[0][pos]) and torch.equal(apart[1], whole[1][pos])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_narrow_floats_keep_the_order_of_ties(dtype):
    # small integers: the distances are exact, with many equal ones
    img = np.random.default_rng(8).integers(0, 3, (2, 9, 11)).astype(np.float64)
    idx, dist = nearest_patches(torch.from_numpy(img).to(dtype), 2, 3, 30)
    want_idx, want_dist = _naive(img, 2, 3, 30)
    assert dist.dtype == dtype
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_array_equal(dist.to(torch.float64).numpy(), want_dist)


def test_integers_and_arrays_are_compared_in_float64():
    img = np.random.default_rng(5).integers(0, 256, (12, 10), dtype=np.uint8)
    idx, dist = nearest_patches(img, 3, 2, 5)
    assert dist.dtype == torch.float64
    want_idx, want_dist = _naive(img.astype(np.float64), 3, 2, 5)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_array_equal(dist.numpy(), want_dist)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_image_is_refused(bad):
    img = np.zeros((6, 6))
    img[2, 3] = bad
    with pytest.raises(NadarayaError, match="NaN or infinite"):
        nearest_patches(img, 2, 1, 3)


@pytest.mark.parametrize(("image", "kwargs", "match"), [
    (np.zeros((6, 6)), {"patch": 0}, "patch"), (np.zeros((6, 6)), {"patch": 7}, "patch"),
    (np.zeros((6, 6)), {"patch": 2.0}, "patch"), (np.zeros((6, 6)), {"window": -1}, "window"),
    (np.zeros((6, 6)), {"k": 0}, "k must"), (np.zeros((6, 6)), {"k": True}, "k must"),
    (np.zeros(6), {}, "shape"), (np.zeros((0, 6)), {}, "shape"),
    (np.zeros((1, 2, 6, 6)), {}, "shape"), (np.zeros((6, 6), complex), {}, "real"),
    (np.zeros((6, 6), bool), {}, "real"),
    (np.zeros((6, 6)), {"references": [[0, 5]]}, "references"),
    (np.zeros((6, 6)), {"references": [[-1, 0]]}, "references"),
    (np.zeros((6, 6)), {"references": [0, 0]}, "references"),
    (np.zeros((6, 6)), {"references": [[0.0, 0.0]]}, "references")])
def test_bad_input_is_refused(image, kwargs, match):
    params = {"patch": 2, "window": 1, "k": 3, **kwargs}
    with pytest.raises(NadarayaError, match=match):
        nearest_patches(image, **params)
