"""The three weight matrices of seed 003, against linear algebra and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.memory import plot_weight_matrices, weight_matrices


def test_weight_matrices_are_the_three_smoothers(rng):
    X = rng.normal(size=(25, 3)) + 4.0
    Wq, Wk = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    mats = weight_matrices(X, bandwidth=0.7, W_q=Wq, W_k=Wk)
    Xc = X - X.mean(0)
    np.testing.assert_allclose(mats["linear regression"],
                               Xc @ np.linalg.inv(Xc.T @ Xc) @ Xc.T, atol=1e-12)
    D2 = ((Xc[:, None] - Xc[None]) ** 2).sum(-1)
    K = np.exp(-D2 / (2 * 0.7**2))
    np.testing.assert_allclose(mats["Nadaraya-Watson"], K / K.sum(1, keepdims=True),
                               rtol=1e-12)
    A = torch.softmax(torch.tensor(Xc @ Wq @ (Xc @ Wk).T / np.sqrt(2)), dim=1).numpy()
    np.testing.assert_allclose(mats["attention"], A, rtol=1e-12)


def test_plot_weight_matrices_draws_three_heatmaps(rng):
    fig = plot_weight_matrices(rng.normal(size=(20, 3)))
    assert len([ax for ax in fig.axes if ax.images]) == 3


def test_bad_projections(rng):
    with pytest.raises(NadarayaError, match="W_q and W_k"):
        weight_matrices(rng.normal(size=(10, 3)), W_q=np.ones((3, 2)), W_k=np.ones((2, 2)))
