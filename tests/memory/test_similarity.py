"""Similarity and separation kernels against the engine's own kernels and formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.kernels import ExpDot, Laplacian
from nadaraya.kernels.linear import LinearKernel
from nadaraya.kernels.similarity import ArgMax, Cosine, Exponential, NegativeDistance, Power

SMALL_BLOCKS = {"key_block": 7, "query_block": 5}


def _data(rng: np.random.Generator):
    return rng.normal(size=(17, 4)), rng.normal(size=(29, 4)), rng.normal(size=(29, 3))


@pytest.mark.parametrize("engine", ["dense", "streamed"])
def test_exponential_of_dot_is_expdot(rng, engine):
    q, k, v = _data(rng)
    with nadaraya.config_context(**SMALL_BLOCKS):
        ours = nadaraya.smooth(q, k, v, Exponential(LinearKernel(), 1.7), engine=engine)
    ref = nadaraya.smooth(q, k, v, ExpDot(1.7), engine="dense")
    np.testing.assert_allclose(ours, ref, rtol=1e-12)


@pytest.mark.parametrize("engine", ["dense", "streamed"])
def test_exponential_of_euclidean_is_laplacian(rng, engine):
    q, k, v = _data(rng)
    with nadaraya.config_context(**SMALL_BLOCKS):
        ours = nadaraya.smooth(q, k, v, Exponential(NegativeDistance(2), 2.0), engine=engine)
    ref = nadaraya.smooth(q, k, v, Laplacian(0.5), engine="dense")
    np.testing.assert_allclose(ours, ref, rtol=1e-12)


def test_exponential_of_cosine_and_manhattan_match_softmax_formula(rng):
    q, k, v = _data(rng)
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ \
        (k / np.linalg.norm(k, axis=1, keepdims=True)).T
    man = -np.abs(q[:, None] - k[None]).sum(-1)
    for kern, s in ((Exponential(Cosine(), 3.0), cos), (Exponential(NegativeDistance(1), 3.0),
                                                        man)):
        w = torch.softmax(torch.tensor(3.0 * s), dim=1).numpy()
        np.testing.assert_allclose(nadaraya.smooth(q, k, v, kern), w @ v, rtol=1e-12)


def test_attention_with_a_general_matrix_is_torch_softmax(rng):
    x = rng.normal(size=(12, 5))
    Wq, Wk, Wv = (rng.normal(size=(5, 5)) for _ in range(3))
    M = Wq @ Wk.T / np.sqrt(5)
    ours = nadaraya.smooth(x, x, x @ Wv, Exponential(LinearKernel(M), 1.0))
    t = torch.tensor
    ref = torch.softmax(t(x @ Wq) @ t(x @ Wk).T / np.sqrt(5), dim=1) @ t(x @ Wv)
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-12)


def test_power_matches_formula_and_keeps_sign_for_odd_powers(rng):
    q, k, v = _data(rng)
    for beta in (1, 2, 3):
        out = nadaraya.smooth(q, k, v, Power(LinearKernel(), beta), normalize=False)
        np.testing.assert_allclose(out, (q @ k.T) ** beta @ v, rtol=1e-10, atol=1e-12)
    with pytest.raises(NadarayaError, match="no real value"):
        nadaraya.smooth(q, k, v, Power(LinearKernel(), 2.5), normalize=False)
    pos = np.abs(q), np.abs(k)
    out = nadaraya.smooth(*pos, v, Power(LinearKernel(), 2.5), normalize=False)
    np.testing.assert_allclose(out, (pos[0] @ pos[1].T) ** 2.5 @ v, rtol=1e-10)


@pytest.mark.parametrize("engine", ["dense", "streamed"])
def test_argmax_is_the_most_similar_key(rng, engine):
    q, k, v = _data(rng)
    for sim, s in ((LinearKernel(), q @ k.T),
                   (NegativeDistance(1), -np.abs(q[:, None] - k[None]).sum(-1))):
        with nadaraya.config_context(**SMALL_BLOCKS):
            out = nadaraya.smooth(q, k, v, ArgMax(sim), engine=engine)
        np.testing.assert_allclose(out, v[s.argmax(1)], rtol=0, atol=1e-300)


def test_bad_kernel_parameters():
    with pytest.raises(NadarayaError, match="beta"):
        Exponential(LinearKernel(), 0.0)
    with pytest.raises(NadarayaError, match="beta"):
        Power(LinearKernel(), -2)
    with pytest.raises(NadarayaError, match="signed similarity"):
        Exponential(ExpDot(), 1.0)
    with pytest.raises(NadarayaError, match="p must be"):
        NegativeDistance(3)
