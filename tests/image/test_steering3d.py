"""3-D steering kernel regression against a naive voxel loop in float64, in blocks, and
with hostile inputs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine.grid import _blocks as _grid_blocks
from nadaraya.engine.grid import blocks
from nadaraya.image import steering_kernel_regression
from nadaraya.image._steering3d import steering_matrices_3d


def _smooth_volume(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    z, r, c = np.meshgrid(*(np.arange(n, dtype=float) for n in shape), indexing="ij")
    return 0.5 + 0.3 * np.tanh(0.8 * (r - 0.5 * c - 1.0 + 0.3 * z)) + 0.02 * rng.standard_normal(
        shape)


def _naive_matrices(g: np.ndarray, window: int, lam1: float, lam2: float,
                    alpha: float) -> np.ndarray:
    """C per voxel: the structure tensor over the mirrored cubic window, its eigenvalues,
    and Takeda et al. (2009)'s 3-D elongation and scaling, written out here."""
    shape = g.shape[1:]
    padded = np.pad(g, [(0, 0)] + [(window, window)] * 3, mode="reflect")
    m = (2 * window + 1) ** 3
    out = np.zeros((*shape, 3, 3))
    for z, r, c in itertools.product(*map(range, shape)):
        cube = padded[:, z:z + 2 * window + 1, r:r + 2 * window + 1, c:c + 2 * window + 1]
        rows = cube.reshape(3, -1).T
        values, vectors = np.linalg.eigh(rows.T @ rows)
        s = np.sqrt(np.clip(values, 0, None))
        gamma = ((s.prod() + lam2) / m) ** alpha
        c_mat = np.zeros((3, 3))
        for i in range(3):
            j, k = [a for a in range(3) if a != i]
            theta = (s[i] + lam1) / (np.sqrt(s[j] * s[k]) + lam1)
            c_mat += gamma * theta * np.outer(vectors[:, i], vectors[:, i])
        out[z, r, c] = c_mat
    return out


def _naive_gradient(vol: np.ndarray, h0: float, radius: int) -> np.ndarray:
    """Gradients of the classic second-order fit (Gaussian weights of s.d. ``h0`` over the
    cube of ``radius``, keys within the volume), by weighted least squares per voxel."""
    shape = vol.shape
    grad = np.zeros((3, *shape))
    for x in itertools.product(*map(range, shape)):
        rows, w, y = [], [], []
        for o in itertools.product(range(-radius, radius + 1), repeat=3):
            j = tuple(a + b for a, b in zip(x, o, strict=True))
            if all(0 <= a < n for a, n in zip(j, shape, strict=True)):
                d = np.array(o, float)
                rows.append([1, *d, d[0]**2, d[0] * d[1], d[0] * d[2], d[1]**2, d[1] * d[2],
                             d[2]**2])
                w.append(np.exp(-d @ d / (2 * h0 * h0)))
                y.append(vol[j])
        a, sw = np.array(rows), np.sqrt(np.array(w))
        coef = np.linalg.lstsq(a * sw[:, None], np.array(y) * sw, rcond=None)[0]
        grad[:, x[0], x[1], x[2]] = coef[1:4]
    return grad


def _naive_skr(vol: np.ndarray, c: np.ndarray, h: float, radius: int) -> np.ndarray:
    """Order 0: ``sum K_j y_j / sum K_j`` with ``K_j = sqrt(det C_j) exp(-d^T C_j d / 2h^2)``
    over the keys of the cube within the volume."""
    shape = vol.shape
    out = np.zeros(shape)
    for x in itertools.product(*map(range, shape)):
        num = den = 0.0
        for o in itertools.product(range(-radius, radius + 1), repeat=3):
            j = tuple(a + b for a, b in zip(x, o, strict=True))
            if all(0 <= a < n for a, n in zip(j, shape, strict=True)):
                d = np.array(o, float)
                k = np.sqrt(np.linalg.det(c[j])) * np.exp(-d @ c[j] @ d / (2 * h * h))
                num, den = num + k * vol[j], den + k
        out[x] = num / den
    return out


def test_matrices_equal_the_naive_loop(rng: np.random.Generator) -> None:
    g = 40.0 * rng.standard_normal((3, 4, 5, 6))
    ours = steering_matrices_3d(torch.from_numpy(g), 1, lambda_elongation=1.0,
                                lambda_scale=0.01, alpha=0.5).numpy()
    ref = _naive_matrices(g, 1, 1.0, 0.01, 0.5)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())


def test_matrices_of_a_plane_wave_are_narrow_across_it() -> None:
    g = torch.zeros(3, 5, 5, 5, dtype=torch.float64)
    g[0] = 20.0  # the volume varies along depth only
    c = steering_matrices_3d(g, 1)[2, 2, 2].numpy()
    values, vectors = np.linalg.eigh(c)
    assert abs(abs(vectors[0, -1]) - 1.0) < 1e-12  # the largest eigenvalue across: depth
    assert values[-1] > 10 * values[0]
    np.testing.assert_allclose(values[0], values[1], rtol=1e-12)


def test_skr_volume_equals_the_naive_loop(rng: np.random.Generator) -> None:
    vol = _smooth_volume(rng, (5, 6, 7))
    h, h0, radius, window = 1.5, 1.0, 2, 1
    out = steering_kernel_regression(vol, h, sigma=0.02, radius=radius, window=window,
                                     initial_h=h0, pilot="image", range_sigma=None,
                                     alpha=0.5, data_range=1.0, channel_axis=None)
    grad = 255.0 * _naive_gradient(vol, h0, 3)
    c = _naive_matrices(grad, window, 1.0, 0.01, 0.5)
    ref = _naive_skr(vol, c, h, radius)
    assert out.shape == vol.shape and out.dtype == vol.dtype
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-9)
    assert np.abs(out - vol).max() > 1e-3  # it smooths


CASES3 = {
    "image": lambda x: steering_kernel_regression(x, 1.5, sigma=0.02, radius=2, window=1,
                                                  pilot="image", channel_axis=None),
    "nlm-order2": lambda x: steering_kernel_regression(x, 1.2, 2, sigma=0.02, order=2,
                                                       radius=1, window=1, channel_axis=None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES3))
@pytest.mark.parametrize("budget", [0.01, 0.1])
def test_skr_volume_blocks_give_the_whole_volume_result(
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, name: str,
        budget: float) -> None:
    run = CASES3[name]
    vol = _smooth_volume(rng, (8, 10, 11))
    whole = np.asarray(run(vol))
    counts: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> list[Any]:
        parts = blocks(*args, **kwargs)
        counts.append(len(parts))
        return parts

    monkeypatch.setattr(_grid_blocks, "blocks", counted)
    with nadaraya.config_context(working_memory=budget):
        tiled = np.asarray(run(vol))
    assert counts and max(counts) > 1
    # the second-order fit behind the gradients sums its moments by matrix products whose
    # rounding follows the block's size (as in 2-D): a few units in the last place
    np.testing.assert_allclose(tiled, whole, rtol=0, atol=64 * np.finfo(float).eps)


@pytest.mark.slow
def test_skr_volume_tiled_small(rng: np.random.Generator,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    vol = _smooth_volume(rng, (6, 7, 8)).astype(np.float32)
    run = CASES3["image"]
    whole = run(vol)
    with nadaraya.config_context(working_memory=0.005):
        assert len(blocks(vol.shape, 5, 400.0)) > 1
        tiled = run(vol)
    assert tiled.dtype == np.float32
    np.testing.assert_allclose(tiled, whole, rtol=0, atol=64 * np.finfo(np.float32).eps)


def test_skr_volume_dtypes_and_channels(rng: np.random.Generator) -> None:
    vol = _smooth_volume(rng, (4, 6, 6))
    u8 = np.clip(vol * 255, 0, 255).astype(np.uint8)
    out = steering_kernel_regression(u8, 1.5, sigma=5.0, radius=2, window=1, pilot="image",
                                     channel_axis=None)
    assert out.dtype == np.uint8 and out.shape == u8.shape
    colour = np.stack([vol, 1 - vol], -1)
    out = steering_kernel_regression(colour, 1.5, sigma=0.02, radius=2, window=1,
                                     pilot="image", channel_axis=-1)
    assert out.shape == colour.shape
    t = steering_kernel_regression(torch.from_numpy(vol), 1.5, sigma=0.02, radius=2,
                                   window=1, pilot="image", channel_axis=None)
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), steering_kernel_regression(
        vol, 1.5, sigma=0.02, radius=2, window=1, pilot="image", channel_axis=None))


def test_skr_volume_hostile_inputs(rng: np.random.Generator) -> None:
    vol = _smooth_volume(rng, (4, 5, 6))
    with pytest.raises(NadarayaError, match="pilot"):
        steering_kernel_regression(vol, 1.0, sigma=0.1, pilot="median", channel_axis=None)
    with pytest.raises(NadarayaError, match="window"):
        steering_kernel_regression(vol, 1.0, sigma=0.1, window=-1, channel_axis=None)
    with pytest.raises(NadarayaError, match="alpha"):
        steering_kernel_regression(vol, 1.0, sigma=0.1, alpha=2.0, channel_axis=None)
    with pytest.raises(NadarayaError, match="order"):
        steering_kernel_regression(vol, 1.0, sigma=0.1, order=3, channel_axis=None)
    bad = vol.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(NadarayaError):
        steering_kernel_regression(bad, 1.0, sigma=0.1, channel_axis=None)
    with pytest.raises(NadarayaError):
        steering_kernel_regression(np.zeros((0, 4, 4)), 1.0, sigma=0.1, channel_axis=None)
    one = steering_kernel_regression(vol[:1], 1.0, sigma=0.1, radius=1, window=1,
                                     pilot="image", channel_axis=None)
    assert one.shape == (1, 5, 6) and np.isfinite(one).all()
