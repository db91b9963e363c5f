"""The grid engine against the dense engine on explicit vectors t, and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine._state import SmoothState
from nadaraya.engine.grid import grid_smooth, monomials, window_offsets
from nadaraya.kernels.quadratic import (
    QuadraticKernel,
    bilateral_kernel,
    classic_kernel,
    gaussian_patch,
    nlm_kernel,
    steering_kernel,
)
from nadaraya.masks import Predicate


def _positions(h: int, w: int) -> np.ndarray:
    return np.indices((h, w)).reshape(2, -1).T.astype(np.float64)


def _window_mask(h: int, w: int, offsets: torch.Tensor) -> Predicate:
    """Query pixel i sees key pixel j when j - i is one of the offsets (inside the image)."""
    allowed = {tuple(o) for o in offsets.tolist()}

    def visible(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        dr = j // w - i // w
        dc = j % w - i % w
        out = torch.zeros(torch.broadcast_shapes(i.shape, j.shape), dtype=torch.bool)
        for a, b in allowed:
            out |= (dr == a) & (dc == b)
        return out

    return Predicate(visible)


def _dense(t: np.ndarray, values: np.ndarray, kernel: QuadraticKernel, mask: Predicate
           ) -> np.ndarray:
    return nadaraya.smooth(t, t, values, kernel, mask, engine="dense")


def test_bilateral_kernel_equals_dense_engine(rng: np.random.Generator) -> None:
    h, w = 7, 8
    img = rng.random((2, h, w))
    offsets = window_offsets(2, 2, "disk")
    kernel = bilateral_kernel(1.3, 0.4)
    grid = grid_smooth(torch.from_numpy(img), kernel, offsets).mean().numpy()
    t = np.hstack([_positions(h, w), img.reshape(2, -1).T])
    ref = _dense(t, img.reshape(2, -1).T, kernel, _window_mask(h, w, offsets))
    np.testing.assert_allclose(grid, ref, rtol=0, atol=1e-13)


def test_nlm_kernel_equals_dense_engine_on_patches(rng: np.random.Generator) -> None:
    h, w, r = 8, 9, 1
    img = rng.random((1, h, w))
    g = gaussian_patch(3)
    kernel = nlm_kernel(0.3, g, 1, sigma=0.05)
    offsets = window_offsets(3)
    grid = grid_smooth(torch.from_numpy(img), kernel, offsets).mean().numpy()
    padded = np.pad(img[0], r, mode="reflect")
    patches = np.stack([padded[i:i + 3, j:j + 3].ravel() for i in range(h) for j in range(w)])
    t = np.hstack([_positions(h, w), patches])
    ref = _dense(t, img.reshape(-1, 1), kernel, _window_mask(h, w, offsets))
    np.testing.assert_allclose(grid, ref, rtol=0, atol=1e-13)


def test_steering_field_equals_dense_engine(rng: np.random.Generator) -> None:
    h, w = 6, 7
    img = rng.random((1, h, w))
    a = rng.standard_normal((h, w, 2, 2))
    cov = torch.from_numpy(a @ a.transpose(0, 1, 3, 2) + 0.5 * np.eye(2))
    offsets = window_offsets(2)
    grid = grid_smooth(torch.from_numpy(img), steering_kernel(1.1, cov), offsets)
    flat = steering_kernel(1.1, cov.reshape(-1, 2, 2))
    ref = _dense(_positions(h, w), img.reshape(-1, 1), flat, _window_mask(h, w, offsets))
    np.testing.assert_allclose(grid.mean().numpy(), ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("keys_outside", [False, True])
def test_steering_field_with_a_value_block_equals_dense_engine(rng: np.random.Generator,
                                                               keys_outside: bool) -> None:
    # the grouped path: offsets of one row at once, a per-key field and log-weight,
    # and a value block comparing a guide that is not the values
    h, w = 6, 7
    img = rng.random((1, h, w))
    guide = rng.random((2, h, w))
    a = rng.standard_normal((h, w, 2, 2))
    cov = torch.from_numpy(a @ a.transpose(0, 1, 3, 2) + 0.5 * np.eye(2))
    steer = steering_kernel(1.1, cov.reshape(-1, 2, 2))
    kernel = QuadraticKernel(None, 2.5, position_field=steer.position_field.reshape(h, w, 2, 2),
                             key_log_weight=steer.key_log_weight.reshape(h, w), ndim=2)
    offsets = window_offsets(2, 2, "disk")
    state = grid_smooth(torch.from_numpy(img), kernel, offsets, guide=torch.from_numpy(guide),
                        keys_outside=keys_outside)
    flat = QuadraticKernel(None, 2.5, position_field=steer.position_field,
                           key_log_weight=steer.key_log_weight, ndim=2)
    t = np.hstack([_positions(h, w), guide.reshape(2, -1).T])
    if keys_outside:
        # keys beyond the border are mirrored pixels: compare in the middle only
        inner = np.zeros((h, w), bool)
        inner[2:-2, 2:-2] = True
        mask = _window_mask(h, w, offsets)
        ref = _dense(t, img.reshape(-1, 1), flat, mask)
        np.testing.assert_allclose(state.mean().numpy()[inner.ravel()], ref[inner.ravel()],
                                   rtol=0, atol=1e-13)
        return
    ref, lse = nadaraya.smooth(t, t, img.reshape(-1, 1), flat, _window_mask(h, w, offsets),
                               engine="dense", return_lse=True)
    np.testing.assert_allclose(state.mean().numpy(), ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(state.lse.numpy(), lse, rtol=0, atol=1e-12)


def test_key_log_weights_far_apart(rng: np.random.Generator) -> None:
    # per-key log-weights spread over 600 nats: each query's bound is its window's
    # maximum, so no tile falls back to the running maximum and none underflows
    h, w = 9, 10
    img = rng.random((1, h, w))
    logw = torch.from_numpy(rng.uniform(-300.0, 300.0, (h, w)))
    kernel = QuadraticKernel(0.3, ndim=2, key_log_weight=logw)
    offsets = window_offsets(2)
    state = grid_smooth(torch.from_numpy(img), kernel, offsets, degree=1)
    flat = QuadraticKernel(0.3, ndim=2, key_log_weight=logw.reshape(-1))
    ref, lse = nadaraya.smooth(_positions(h, w), _positions(h, w), img.reshape(-1, 1), flat,
                               _window_mask(h, w, offsets), engine="dense", return_lse=True)
    np.testing.assert_allclose(state.mean().numpy()[:, :1], ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(state.lse.numpy(), lse, rtol=1e-12, atol=0)


def test_tiles_do_not_change_the_result(rng: np.random.Generator) -> None:
    img = torch.from_numpy(rng.random((3, 40, 30)))
    kernel = nlm_kernel(0.3, gaussian_patch(5), 3)
    whole = grid_smooth(img, kernel, 4)
    with nadaraya.config_context(working_memory=0.05):
        tiled = grid_smooth(img, kernel, 4)
    torch.testing.assert_close(tiled.mean(), whole.mean(), rtol=0, atol=1e-14)


def test_exact_pass_when_the_bound_is_loose(rng: np.random.Generator) -> None:
    # A ring of offsets (no centre) and a narrow kernel: every weight is below
    # exp(-800), so the fixed offset 0 underflows and the running maximum is used.
    h, w = 6, 7
    img = rng.random((1, h, w))
    offsets = torch.tensor([[0, 3], [3, 0], [0, -3], [-3, 0], [3, 3]])
    kernel = QuadraticKernel(position=[[100.0, 0.0], [0.0, 90.0]], value=0.5)
    state = grid_smooth(torch.from_numpy(img), kernel, offsets)
    assert float(state.offset.max()) < -800
    t = np.hstack([_positions(h, w), img.reshape(1, -1).T])
    ref, lse = nadaraya.smooth(t, t, img.reshape(-1, 1), kernel, _window_mask(h, w, offsets),
                               engine="dense", empty="nan", return_lse=True)
    np.testing.assert_allclose(state.mean().numpy(), ref, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(state.lse.numpy(), lse, rtol=1e-12)


def test_exact_pass_on_the_grouped_path(rng: np.random.Generator) -> None:
    # a per-key field with no centre offset and tiny weights: the window's
    # log-weight bound leaves too little weight and the running maximum takes over
    h, w = 6, 7
    img = rng.random((1, h, w))
    a = rng.standard_normal((h, w, 2, 2))
    cov = torch.from_numpy(400.0 * (a @ a.transpose(0, 1, 3, 2) + np.eye(2)))
    offsets = torch.tensor([[0, 2], [2, 0], [0, -2], [-2, 0], [2, 2], [1, -2]])
    state = grid_smooth(torch.from_numpy(img), steering_kernel(1.0, cov), offsets)
    flat = steering_kernel(1.0, cov.reshape(-1, 2, 2))
    ref, lse = nadaraya.smooth(_positions(h, w), _positions(h, w), img.reshape(-1, 1), flat,
                               _window_mask(h, w, offsets), engine="dense", empty="nan",
                               return_lse=True)
    assert float(state.offset.max()) < -600
    np.testing.assert_allclose(state.mean().numpy(), ref, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(state.lse.numpy(), lse, rtol=1e-12)


def test_lse_matches_dense(rng: np.random.Generator) -> None:
    h, w = 5, 6
    img = rng.random((1, h, w))
    offsets = window_offsets(2)
    kernel = bilateral_kernel(1.0, 0.3)
    state = grid_smooth(torch.from_numpy(img), kernel, offsets)
    t = np.hstack([_positions(h, w), img.reshape(1, -1).T])
    _, lse = nadaraya.smooth(t, t, img.reshape(-1, 1), kernel, _window_mask(h, w, offsets),
                             engine="dense", return_lse=True)
    np.testing.assert_allclose(state.lse.numpy(), lse, rtol=0, atol=1e-13)


def test_asymmetric_window_and_one_dimensional_series(rng: np.random.Generator) -> None:
    # a causal window on a regular 1-D series: offsets -3..0
    y = rng.random(30)
    offsets = torch.arange(-3, 1)[:, None]
    kernel = QuadraticKernel(position=0.2, value=4.0, ndim=1)
    out = grid_smooth(torch.from_numpy(y)[None], kernel, offsets).mean().numpy()[:, 0]
    ref = np.empty_like(y)
    for i in range(len(y)):
        j = np.arange(max(0, i - 3), i + 1)
        wts = np.exp(-0.2 * (j - i) ** 2 - 4.0 * (y[j] - y[i]) ** 2)
        ref[i] = np.sum(wts * y[j]) / np.sum(wts)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


def test_three_dimensional_grid(rng: np.random.Generator) -> None:
    vol = rng.random((1, 4, 5, 6))
    kernel = QuadraticKernel(position=0.5, value=2.0, ndim=3)
    out = grid_smooth(torch.from_numpy(vol), kernel, 1).mean().numpy()[:, 0].reshape(4, 5, 6)
    ref = np.empty((4, 5, 6))
    v = vol[0]
    for idx in np.ndindex(4, 5, 6):
        num = den = 0.0
        for o in np.ndindex(3, 3, 3):
            j = tuple(a + b - 1 for a, b in zip(idx, o, strict=True))
            if all(0 <= j[k] < v.shape[k] for k in range(3)):
                d2 = sum((b - 1) ** 2 for b in o)
                wt = np.exp(-0.5 * d2 - 2.0 * (v[j] - v[idx]) ** 2)
                num += wt * v[j]
                den += wt
        ref[idx] = num / den
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


def test_keys_outside_read_through_the_border(rng: np.random.Generator) -> None:
    img = rng.random((5, 6))
    kernel = classic_kernel(1.5)
    for border, mode in (("reflect", "reflect"), ("symmetric", "symmetric"), ("edge", "edge"),
                         ("wrap", "wrap")):
        out = grid_smooth(torch.from_numpy(img)[None], kernel, 2, border=border,
                          keys_outside=True).mean().numpy()[:, 0].reshape(5, 6)
        p = np.pad(img, 2, mode=mode)
        u = np.arange(-2, 3)
        k = np.exp(-(u[:, None] ** 2 + u[None, :] ** 2) / (2 * 1.5**2))
        ref = np.array([[np.sum(k * p[i:i + 5, j:j + 5]) / k.sum() for j in range(6)]
                        for i in range(5)])
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)


@pytest.mark.parametrize(("degree", "channels", "disk"), [(1, 1, False), (2, 2, True)])
def test_moments_of_the_displacement(rng: np.random.Generator, degree: int, channels: int,
                                     disk: bool) -> None:
    h, w = 5, 6
    img = rng.random((channels, h, w))
    kernel = classic_kernel(1.2)
    offsets = window_offsets(2, 2, "disk" if disk else "square")
    state = grid_smooth(torch.from_numpy(img), kernel, offsets, degree=degree)
    mono = monomials(2, degree)
    mono2 = [a for a in monomials(2, 2 * degree) if any(a)]
    assert state.acc.shape[1] == channels * len(mono) + len(mono2)
    mean = state.mean().numpy().reshape(h, w, -1)
    allowed = {tuple(o) for o in offsets.tolist()}
    for i, j in ((2, 1), (0, 5), (4, 3)):
        num = np.zeros(channels * len(mono) + len(mono2))
        den = 0.0
        for a in range(-2, 3):
            for b in range(-2, 3):
                y, x = i + a, j + b
                if (a, b) in allowed and 0 <= y < h and 0 <= x < w:
                    wt = np.exp(-(a * a + b * b) / (2 * 1.2**2))
                    feats = [img[c, y, x] * a**e0 * b**e1 for e0, e1 in mono
                             for c in range(channels)]
                    feats += [a**e0 * b**e1 for e0, e1 in mono2]
                    num += wt * np.array(feats, dtype=float)
                    den += wt
        np.testing.assert_allclose(mean[i, j], num / den, rtol=0, atol=1e-13)


@pytest.mark.parametrize("patch", [False, True])
def test_moments_with_a_value_block(rng: np.random.Generator, patch: bool) -> None:
    # the weights of the dense engine (rows of the smoother matrix) give the moments
    h, w = 6, 7
    img = rng.random((1, h, w))
    offsets = window_offsets(2)
    if patch:
        kernel = nlm_kernel(0.4, gaussian_patch(3), 1, sigma=0.05)
        padded = np.pad(img[0], 1, mode="reflect")
        feats = np.stack([padded[i:i + 3, j:j + 3].ravel() for i in range(h) for j in range(w)])
    else:
        kernel = bilateral_kernel(1.3, 0.3)
        feats = img.reshape(1, -1).T
    degree = 1 if patch else 2
    state = grid_smooth(torch.from_numpy(img), kernel, offsets, degree=degree)
    pos = _positions(h, w)
    t = np.hstack([pos, feats])
    wts = nadaraya.weights(t, t, kernel, _window_mask(h, w, offsets))
    disp = pos[None, :, :] - pos[:, None, :]  # key - query, (m, n, 2)
    mono = monomials(2, degree)
    mono2 = [a for a in monomials(2, 2 * degree) if any(a)]
    cols = [disp[..., 0] ** a * disp[..., 1] ** b * img.reshape(-1)[None, :] for a, b in mono]
    cols += [disp[..., 0] ** a * disp[..., 1] ** b for a, b in mono2]
    ref = np.stack([(wts * c).sum(1) for c in cols], 1)
    np.testing.assert_allclose(state.mean().numpy(), ref, rtol=0, atol=1e-12)


def test_states_of_disjoint_keys_merge(rng: np.random.Generator) -> None:
    img = torch.from_numpy(rng.random((1, 9, 10)))
    kernel = bilateral_kernel(2.0, 0.3)
    offsets = window_offsets(3)
    left, right = offsets[offsets[:, 1] < 0], offsets[offsets[:, 1] >= 0]
    merged = grid_smooth(img, kernel, left).merge(grid_smooth(img, kernel, right))
    whole = grid_smooth(img, kernel, offsets)
    assert isinstance(merged, SmoothState)
    torch.testing.assert_close(merged.mean(), whole.mean(), rtol=0, atol=1e-14)
    torch.testing.assert_close(merged.lse, whole.lse, rtol=0, atol=1e-13)


def test_float32_within_same_dtype_error(rng: np.random.Generator) -> None:
    img = rng.random((1, 24, 20))
    kernel = nlm_kernel(0.2, gaussian_patch(5), 1)
    out64 = grid_smooth(torch.from_numpy(img), kernel, 4).mean()
    out32 = grid_smooth(torch.from_numpy(img).float(), kernel, 4).mean()
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), out64, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("kernel", "radius", "degree"), [
    (nlm_kernel(0.15, gaussian_patch(5), 1, sigma=0.05), 10, 0),
    (bilateral_kernel(5.0, 0.3), 10, 0),
    (classic_kernel(3.0), 9, 2),
])
def test_float32_sums_are_float64_sums(rng: np.random.Generator, kernel: QuadraticKernel,
                                       radius: int, degree: int) -> None:
    # hundreds of offsets: summed in float32 one after the other, the rounding grows with
    # their number; summed in float64, a float32 result is the float64 one rounded
    img = torch.from_numpy(rng.random((1, 40, 44))).float()
    out32 = grid_smooth(img, kernel, radius, degree=degree).mean()
    out64 = grid_smooth(img.double(), kernel, radius, degree=degree).mean()
    error = (out32.double() - out64).abs().amax(0) / out64.abs().amax(0)
    assert float(error.max()) <= 4 * torch.finfo(torch.float32).eps, error


@pytest.mark.parametrize(("dtype", "value"), [(torch.float32, 3e38), (torch.float64, 1.7e308),
                                              (torch.float64, 1e-300),
                                              (torch.float64, 5e-320)])
def test_values_at_the_ends_of_the_range(dtype: torch.dtype, value: float) -> None:
    # no sum overflows near the largest number, no product underflows near the smallest:
    # a constant is smoothed to itself, and the log-sum of the weights does not depend on
    # the values
    img = torch.full((2, 9, 10), value, dtype=dtype)
    for kernel in (nlm_kernel(1.0, gaussian_patch(3), 2), bilateral_kernel(1.5, 1.0),
                   classic_kernel(1.2)):
        state = grid_smooth(img, kernel, 3)
        torch.testing.assert_close(state.mean(), img.reshape(2, -1).T, rtol=0, atol=0)
        ones = grid_smooth(torch.ones_like(img), kernel, 3)
        torch.testing.assert_close(state.lse, ones.lse, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "edge", "wrap"])
def test_padding_equals_numpy(rng: np.random.Generator, mode: str) -> None:
    from nadaraya.engine.grid import pad

    for n in (1, 2, 5):
        x = rng.random((2, n, n + 2))
        for pads in ((0, 3), (2, 1), (7, 9)):
            out = pad(torch.from_numpy(x), pads, mode).numpy()
            ref = np.pad(x, ((0, 0), (pads[0], pads[0]), (pads[1], pads[1])), mode=mode)
            np.testing.assert_array_equal(out, ref)


def test_window_offsets() -> None:
    assert window_offsets(1).shape == (9, 2)
    assert window_offsets(2, 2, "disk").shape == (13, 2)
    assert window_offsets([1, 0], 2).tolist() == [[-1, 0], [0, 0], [1, 0]]
    with pytest.raises(NadarayaError, match="radius"):
        window_offsets(-1)
    with pytest.raises(NadarayaError, match="shape"):
        window_offsets(1, 2, "round")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda img: grid_smooth(img, classic_kernel(1.0, ndim=3), 1), "position dimension"),
        (lambda img: grid_smooth(img, classic_kernel(1.0), torch.zeros(0, 2)), "offsets"),
        (lambda img: grid_smooth(img, classic_kernel(1.0), torch.zeros(3, 3)), "offsets"),
        (lambda img: grid_smooth(img, classic_kernel(1.0), torch.tensor([[0.5, 0.0]])),
         "integers"),
        (lambda img: grid_smooth(img, classic_kernel(1.0), 1, border="mirror"), "border"),
        (lambda img: grid_smooth(img, classic_kernel(1.0), 1, degree=-1), "degree"),
        (lambda img: grid_smooth(img, nlm_kernel(1.0, gaussian_patch(9), 1), 1),
         "larger than the image"),
        (lambda img: grid_smooth(img, bilateral_kernel(1.0, 1.0), 1,
                                 guide=torch.zeros(1, 3, 3)), "guide"),
        (lambda img: grid_smooth(img[0, 0], classic_kernel(1.0, ndim=1), 1), "values"),
    ],
)
def test_bad_input(call, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        call(torch.zeros(1, 5, 6, dtype=torch.float64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu(rng: np.random.Generator) -> None:
    img = torch.from_numpy(rng.random((2, 30, 40)))
    kernel = nlm_kernel(0.3, gaussian_patch(5), 2, sigma=0.05)
    cpu = grid_smooth(img, kernel, 3)
    gpu = grid_smooth(img.cuda(), kernel, 3)
    assert gpu.acc.is_cuda
    torch.testing.assert_close(gpu.mean().cpu(), cpu.mean(), rtol=0, atol=1e-12)
