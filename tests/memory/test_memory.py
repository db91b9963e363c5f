"""AssociativeMemory against the naive universal-Hopfield update and linear algebra."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.memory import SEPARATIONS, SIMILARITIES, AssociativeMemory, memory_kernel


def _naive_similarity(name: str, q: np.ndarray, P: np.ndarray) -> np.ndarray:
    """sim(q_i, p_j) by a double loop."""
    out = np.empty((len(q), len(P)))
    M = np.linalg.pinv(P.T @ P)
    for i, a in enumerate(q):
        for j, b in enumerate(P):
            out[i, j] = {
                "dot": lambda a=a, b=b: a @ b,
                "cosine": lambda a=a, b=b: a @ b / (np.linalg.norm(a) * np.linalg.norm(b)),
                "euclidean": lambda a=a, b=b: -np.sqrt(np.sum((a - b) ** 2)),
                "manhattan": lambda a=a, b=b: -np.sum(np.abs(a - b)),
                "whitened": lambda a=a, b=b: a @ M @ b,
            }[name]()
    return out


def _naive_retrieve(sim: str, sep: str, beta: float, q: np.ndarray, P: np.ndarray,
                    V: np.ndarray, normalize: bool = True) -> np.ndarray:
    s = _naive_similarity(sim, q, P)
    if sep == "softmax":
        w = np.exp(beta * (s - s.max(1, keepdims=True)))
    elif sep == "max":
        w = (s == s.max(1, keepdims=True)).astype(float)
    elif sep == "identity":
        w = s
    else:
        w = s ** int(beta)
    if sep in ("softmax", "max") or normalize:
        w = w / w.sum(1, keepdims=True)
    return w @ V


def _patterns(rng: np.random.Generator, n: int = 12, d: int = 6) -> np.ndarray:
    return rng.random((n, d)) + 0.1


@pytest.mark.parametrize("similarity", SIMILARITIES)
@pytest.mark.parametrize("separation", SEPARATIONS)
def test_one_step_is_the_universal_hopfield_update(rng, similarity, separation):
    P = _patterns(rng)
    q = P[:5] + 0.05 * rng.normal(size=(5, P.shape[1]))
    beta = 3.0 if separation == "power" else 2.5
    mem = AssociativeMemory(P, similarity=similarity, separation=separation, beta=beta)
    expected = _naive_retrieve(similarity, separation, beta, q, P, P)
    np.testing.assert_allclose(mem.retrieve(q), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("separation", ["identity", "power"])
def test_unnormalized_read_out(rng, separation):
    P = _patterns(rng)
    q = rng.random((4, P.shape[1]))
    mem = AssociativeMemory(P, similarity="dot", separation=separation, beta=3,
                            normalize=False)
    expected = _naive_retrieve("dot", separation, 3, q, P, P, normalize=False)
    np.testing.assert_allclose(mem.retrieve(q), expected, rtol=1e-10)


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_max_separation_recalls_stored_patterns_exactly(rng, similarity):
    P = _patterns(rng, n=10, d=16)
    mem = AssociativeMemory(P, similarity=similarity, separation="max", engine="dense")
    if similarity in ("dot", "whitened"):
        # a dot product need not peak at q itself (a longer pattern can win) ...
        expected = _naive_retrieve(similarity, "max", 1.0, P, P, P)
        np.testing.assert_array_equal(mem.retrieve(P), expected)
        if similarity == "whitened":
            return
        # ... but it does when every pattern has the same norm
        P = P / np.linalg.norm(P, axis=1, keepdims=True)
        mem = AssociativeMemory(P, similarity=similarity, separation="max", engine="dense")
    np.testing.assert_array_equal(mem.retrieve(P), P)
    np.testing.assert_allclose(
        AssociativeMemory(P, similarity=similarity, separation="max").retrieve(P), P,
        rtol=0, atol=1e-300)


def test_max_separation_averages_ties(rng):
    P = np.array([[0.0, 1.0], [0.0, 1.0], [5.0, 5.0]])
    V = np.array([[1.0], [3.0], [10.0]])
    mem = AssociativeMemory(P, V, similarity="euclidean", separation="max")
    np.testing.assert_allclose(mem.retrieve(np.array([[0.1, 1.0]])), [[2.0]])


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_max_separation_gradients(rng, similarity):
    """Arg-max weights are piecewise constant: zero gradient for the queries and patterns
    (almost everywhere), the weights themselves for the values."""
    P = torch.as_tensor(_patterns(rng, n=6, d=3)).requires_grad_()
    V = torch.as_tensor(rng.normal(size=(6, 2))).requires_grad_()
    q = torch.as_tensor(_patterns(rng, n=4, d=3)).requires_grad_()
    kernel = memory_kernel(similarity, "max", 1.0)
    out = nadaraya.smooth(q, P, V, kernel)
    g = torch.as_tensor(rng.normal(size=(4, 2)))
    dq, dP, dV = torch.autograd.grad(out, (q, P, V), g)
    assert bool((dq == 0).all()) and bool((dP == 0).all())
    w = torch.as_tensor(_naive_retrieve(similarity, "max", 1.0, q.detach().numpy(),
                                        P.detach().numpy(), np.eye(6)))
    torch.testing.assert_close(out.detach(), w @ V.detach(), rtol=0, atol=1e-15)
    torch.testing.assert_close(dV, w.T @ g, rtol=0, atol=1e-15)
    assert torch.autograd.gradcheck(lambda q, P, V: nadaraya.smooth(q, P, V, kernel),
                                    (q, P, V))
    recalled = AssociativeMemory(P, V, similarity=similarity, separation="max").retrieve(q)
    torch.testing.assert_close(torch.autograd.grad(recalled, V, g)[0], dV)


@pytest.mark.parametrize("similarity", ["dot", "cosine", "euclidean", "manhattan"])
def test_softmax_with_large_beta_is_the_max_memory(rng, similarity):
    P = _patterns(rng, n=20, d=8)
    q = P + 0.05 * rng.normal(size=P.shape)
    hard = AssociativeMemory(P, similarity=similarity, separation="max").retrieve(q)
    soft = AssociativeMemory(P, similarity=similarity, separation="softmax",
                             beta=1e7).retrieve(q)
    np.testing.assert_allclose(soft, hard, rtol=1e-12, atol=1e-12)


def test_linear_regression_memory_recalls_exactly_while_n_at_most_d(rng):
    d = 16
    for n in (4, 16):
        keys, vals = rng.normal(size=(n, d)), rng.normal(size=(n, 5))
        mem = AssociativeMemory(keys, vals, similarity="whitened", separation="identity",
                                normalize=False)
        np.testing.assert_allclose(mem.retrieve(keys), vals, atol=1e-10)
    keys, vals = rng.normal(size=(2 * d, d)), rng.normal(size=(2 * d, 5))
    mem = AssociativeMemory(keys, vals, similarity="whitened", separation="identity",
                            normalize=False)
    # beyond d the read-out is the least-squares fit, which no longer interpolates
    lstsq = keys @ np.linalg.lstsq(keys, vals, rcond=None)[0]
    np.testing.assert_allclose(mem.retrieve(keys), lstsq, atol=1e-10)
    assert np.abs(lstsq - vals).max() > 0.1


def test_steps_iterate_the_update(rng):
    P = _patterns(rng)
    q = rng.random((3, P.shape[1]))
    mem = AssociativeMemory(P, similarity="euclidean", separation="softmax", beta=4.0)
    np.testing.assert_allclose(mem.retrieve(q, steps=3),
                               mem.retrieve(mem.retrieve(mem.retrieve(q))), rtol=1e-12)
    hard = AssociativeMemory(P, similarity="manhattan", separation="max")
    once = hard.retrieve(q)
    np.testing.assert_array_equal(hard.retrieve(q, steps=5, tol=0.0), once)


def test_single_query_and_torch(rng):
    P = _patterns(rng)
    mem = AssociativeMemory(P, similarity="cosine", separation="softmax", beta=10.0)
    assert mem.retrieve(P[0]).shape == (P.shape[1],)
    t = AssociativeMemory(torch.tensor(P), similarity="cosine", beta=10.0)
    out = t.retrieve(torch.tensor(P[:2]))
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), mem.retrieve(P[:2]), rtol=1e-12)


def test_explain_names_the_engine(rng):
    P = _patterns(rng)
    why = AssociativeMemory(P, similarity="dot", separation="identity").explain(P)
    assert why.engine in ("dense", "streamed")
    assert "signed" in why.reasons["fused"]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"beta": 0.0}, "beta"),
    ({"beta": -1.0}, "beta"),
    ({"beta": float("nan")}, "beta"),
    ({"similarity": "hamming"}, "similarity"),
    ({"separation": "relu"}, "separation"),
])
def test_bad_parameters(rng, kwargs, match):
    with pytest.raises(NadarayaError, match=match):
        AssociativeMemory(_patterns(rng), **kwargs)


def test_bad_patterns_and_queries(rng):
    with pytest.raises(NadarayaError, match="same length"):
        AssociativeMemory([[1.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(NadarayaError, match="patterns"):
        AssociativeMemory(np.array([[1.0, np.nan]]))
    P = _patterns(rng)
    mem = AssociativeMemory(P)
    with pytest.raises(NadarayaError, match="feature"):
        mem.retrieve(np.ones((2, P.shape[1] + 1)))
    with pytest.raises(NadarayaError, match="steps"):
        mem.retrieve(P, steps=0)
    hetero = AssociativeMemory(P, np.ones((len(P), 2)))
    with pytest.raises(NadarayaError, match="steps=1"):
        hetero.retrieve(P, steps=2)
    with pytest.raises(NadarayaError, match="one value row per pattern"):
        AssociativeMemory(P, np.ones((len(P) + 1, 2)))
    with pytest.raises(NadarayaError, match="zero vector"):
        AssociativeMemory(np.vstack([P, np.zeros(P.shape[1])]), similarity="cosine").retrieve(P)
