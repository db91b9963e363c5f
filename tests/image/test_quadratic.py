"""The quadratic-form kernel: K = exp(-(t_i - t_j)^T Q (t_i - t_j)), each filter's Q."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.kernels.quadratic import (
    QuadraticKernel,
    bilateral_kernel,
    classic_kernel,
    gaussian_patch,
    nlm_kernel,
    steering_kernel,
)


def _scores(kernel: QuadraticKernel, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return kernel.score(torch.from_numpy(q), torch.from_numpy(k)).numpy()


def _form(q: np.ndarray, k: np.ndarray, mat: np.ndarray) -> np.ndarray:
    d = q[:, None, :] - k[None, :, :]
    return np.einsum("ija,ab,ijb->ij", d, mat, d)


def test_full_matrix_equals_blocks(rng: np.random.Generator) -> None:
    a = rng.standard_normal((2, 2))
    b = rng.standard_normal((3, 3))
    qx, qv = a @ a.T, b @ b.T
    kernel = QuadraticKernel(position=qx, value=qv)
    q, k = rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    full = np.zeros((5, 5))
    full[:2, :2], full[2:, 2:] = qx, qv
    np.testing.assert_allclose(kernel.matrix(5).numpy(), full)
    np.testing.assert_allclose(_scores(kernel, q, k), -_form(q, k, full), rtol=1e-12)


def test_each_filter_is_its_q(rng: np.random.Generator) -> None:
    q, k = rng.standard_normal((3, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(classic_kernel(2.0).matrix(2).numpy(), np.eye(2) / 8)
    bil = bilateral_kernel(2.0, 0.5).matrix(3).numpy()
    np.testing.assert_allclose(bil, np.diag([1 / 8, 1 / 8, 2.0]))
    np.testing.assert_allclose(_scores(bilateral_kernel(2.0, 0.5), q, k),
                               -_form(q, k, bil), rtol=1e-12)
    g = gaussian_patch(3)
    nlm = nlm_kernel(0.5, g, 2).matrix(2 + 18).numpy()
    expected = np.kron(np.diag(g.numpy().ravel()), np.eye(2)) / (2 * float(g.sum()) * 0.25)
    np.testing.assert_allclose(nlm[2:, 2:], expected, rtol=1e-12)
    assert not nlm[:2].any()


def test_noise_offset_profile(rng: np.random.Generator) -> None:
    kernel = QuadraticKernel(None, 1.0, ndim=0, noise=0.5)
    q, k = rng.standard_normal((5, 2)), rng.standard_normal((7, 2))
    r2 = _form(q, k, np.eye(2))
    np.testing.assert_allclose(_scores(kernel, q, k), -np.maximum(r2 - 0.5, 0), rtol=1e-12)


def test_engines_agree_on_the_kernel(rng: np.random.Generator) -> None:
    kernel = QuadraticKernel(position=0.3, value=[1.0, 2.0, 0.5])
    t = rng.standard_normal((60, 5))
    v = rng.standard_normal(60)
    dense = nadaraya.smooth(t, t, v, kernel, engine="dense")
    streamed = nadaraya.smooth(t, t, v, kernel, engine="streamed")
    np.testing.assert_allclose(streamed, dense, rtol=1e-10, atol=1e-12)


def test_dot_form(rng: np.random.Generator) -> None:
    kernel = QuadraticKernel(position=0.3, value=2.0)
    q = torch.from_numpy(rng.standard_normal((4, 3)))
    k = torch.from_numpy(rng.standard_normal((5, 3)))
    bound = kernel.bind(q, k)
    qa, ka = bound.dot_form()
    torch.testing.assert_close(qa @ ka.T, bound.score(), rtol=1e-10, atol=1e-12)
    assert QuadraticKernel(value=1.0, ndim=0, noise=1.0).bind(q, k).dot_form() is None


def test_steering_kernel_weights_keys(rng: np.random.Generator) -> None:
    cov = np.array([[[2.0, 0.5], [0.5, 1.0]], [[1.0, 0.0], [0.0, 4.0]]])
    kernel = steering_kernel(1.5, cov)
    q, k = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))
    s = _scores(kernel, q, k)
    for j in range(2):
        d = q - k[j]
        ref = 0.5 * np.log(np.linalg.det(cov[j])) - np.einsum(
            "ia,ab,ib->i", d, cov[j] / (2 * 1.5**2), d)
        np.testing.assert_allclose(s[:, j], ref, rtol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"position": [[1.0, 2.0], [0.0, 1.0]]}, "symmetric"),
        ({"position": [[1.0, 0.0], [0.0, -1.0]]}, "positive semi-definite"),
        ({"position": [[[1.0]]]}, "square"),
        ({"value": float("nan")}, "finite"),
        ({"patch": np.ones((2, 2))}, "odd"),
        ({"noise": -1.0}, "noise"),
        ({"ndim": -1}, "ndim"),
        ({"position": 1.0, "position_field": np.ones((3, 2, 2))}, "not both"),
        ({"position_field": np.ones((3, 3))}, "position_field"),
    ],
)
def test_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(NadarayaError, match=match):
        QuadraticKernel(**kwargs)


def test_bad_widths() -> None:
    kernel = QuadraticKernel(position=1.0, patch=np.ones((3, 3)))
    with pytest.raises(NadarayaError, match="multiple of 9"):
        kernel.matrix(2 + 5)
    with pytest.raises(NadarayaError, match="channel"):
        QuadraticKernel(value=[1.0, 2.0]).value_matrix(3)
    for bad in (0.0, -1.0, "x"):
        with pytest.raises(NadarayaError, match="positive"):
            classic_kernel(bad)
