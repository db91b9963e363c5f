"""Unnormalized smoothing and signed kernels, against naive formulas and NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine._api import build_job
from nadaraya.engine.unnormalized._engine import adapt_engines
from nadaraya.kernels import Epanechnikov, ExpDot, Gaussian, Laplacian
from nadaraya.kernels.linear import LinearKernel
from nadaraya.kernels.similarity import NegativeDistance, Power
from nadaraya.masks import Causal, LeaveOneOut

ENGINES = ["dense", "streamed"]
SMALL_BLOCKS = {"key_block": 7, "query_block": 5}


def _gauss(q: np.ndarray, k: np.ndarray, h: float) -> np.ndarray:
    out = np.empty((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            out[i, j] = np.exp(-np.sum((q[i] - k[j]) ** 2) / (2 * h * h))
    return out


def _data(rng: np.random.Generator, m: int = 23, n: int = 31, d: int = 3, p: int = 2):
    return rng.normal(size=(m, d)), rng.normal(size=(n, d)), rng.normal(size=(n, p))


# -- normalize=False with log-domain kernels ---------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_unnormalized_gaussian_is_plain_weighted_sum(rng, engine):
    q, k, v = _data(rng)
    expected = _gauss(q, k, 0.8) @ v
    with nadaraya.config_context(**SMALL_BLOCKS):
        out = nadaraya.smooth(q, k, v, Gaussian(0.8), engine=engine, normalize=False)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("engine", ENGINES)
def test_unnormalized_expdot_with_mask(rng, engine):
    q, k, v = _data(rng, m=31, n=31)
    K = np.exp(0.7 * q @ k.T) * np.tril(np.ones((31, 31)))
    out = nadaraya.smooth(q, k, v, ExpDot(0.7), Causal(), engine=engine, normalize=False)
    np.testing.assert_allclose(out, K @ v, rtol=1e-12)


def test_unnormalized_lse_is_log_row_sum(rng):
    q, k, v = _data(rng)
    out, lse = nadaraya.smooth(q, k, v, Laplacian(0.5), normalize=False, return_lse=True)
    K = np.exp(-np.sqrt(((q[:, None] - k[None]) ** 2).sum(-1)) / 0.5)
    np.testing.assert_allclose(lse, np.log(K.sum(1)), rtol=1e-12)
    np.testing.assert_allclose(out, K @ v, rtol=1e-11)


@pytest.mark.parametrize("engine", ENGINES)
def test_unnormalized_empty_rows_are_zero(engine):
    k = np.linspace(0, 1, 11)[:, None]
    q = np.array([[0.5], [10.0]])
    out = nadaraya.smooth(q, k, np.ones(11), Epanechnikov(0.2), engine=engine,
                          normalize=False)
    assert out[1] == 0.0
    expected = np.clip(1 - ((0.5 - k[:, 0]) / 0.2) ** 2, 0, None).sum()
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)


def test_unnormalized_overflow_raises():
    x = np.full((3, 4), 30.0)
    with pytest.raises(NadarayaError, match="overflow"):
        nadaraya.smooth(x, x, np.ones(3), ExpDot(1.0), normalize=False)


class _Engine:
    def __init__(self, name: str, **attrs: bool) -> None:
        self.name = name
        self.__dict__.update(attrs)

    def refuse(self, job):
        return None


@pytest.mark.parametrize("kernel", [Gaussian(1.0), LinearKernel()])
def test_engines_must_opt_in_to_unnormalized_and_signed_jobs(rng, kernel):
    q, k, v = _data(rng)
    job, _ = build_job(q, k, v, kernel, None, None)
    job.normalize = False
    attr = "signed" if kernel.name == "linear" else "unnormalized"
    engines = {"other": _Engine("other"), "opted": _Engine("opted", **{attr: True}),
               "dense": _Engine("dense"), "streamed": _Engine("streamed")}
    adapted = adapt_engines(job, engines)
    reason = adapted["other"].refuse(job)
    assert reason is not None
    assert ("weight domain" if attr == "signed" else "normalize=False") in reason
    assert adapted["opted"] is engines["opted"]
    assert adapted["dense"].refuse(job) is None and adapted["streamed"].refuse(job) is None
    job.normalize = True
    if attr == "unnormalized":
        assert adapt_engines(job, engines) is engines


def test_unnormalized_choice_is_explained(rng):
    q, k, v = _data(rng)
    why = nadaraya.explain(q, k, v, "gaussian", normalize=False)
    assert why.reasons[why.engine].startswith("chosen")
    out = nadaraya.smooth(q, k, v, "gaussian", normalize=False, engine=why.engine)
    np.testing.assert_allclose(out, _gauss(q, k, 1.0) @ v, rtol=1e-10)


# -- the signed linear kernel -------------------------------------------------------------

def _metric_cases(rng: np.random.Generator, k: np.ndarray):
    d = k.shape[1]
    A = rng.normal(size=(d, d))
    return [
        ("identity", LinearKernel(), np.eye(d)),
        ("matrix", LinearKernel(A), A),
        ("whitened", LinearKernel("whitened"), np.linalg.pinv(k.T @ k)),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_linear_kernel_unnormalized_is_q_M_k_v(rng, engine):
    q, k, v = _data(rng)
    for name, kernel, M in _metric_cases(rng, k):
        with nadaraya.config_context(**SMALL_BLOCKS):
            out = nadaraya.smooth(q, k, v, kernel, engine=engine, normalize=False)
        np.testing.assert_allclose(out, q @ M @ k.T @ v, rtol=1e-10, atol=1e-12, err_msg=name)


def test_linear_kernel_with_intercept_is_centred_hat_matrix(rng):
    q, k, v = _data(rng)
    c = k.mean(0)
    M = np.linalg.pinv((k - c).T @ (k - c))
    K = 1 / len(k) + (q - c) @ M @ (k - c).T
    out = nadaraya.smooth(q, k, v, LinearKernel("whitened", intercept=True), normalize=False)
    np.testing.assert_allclose(out, K @ v, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(K.sum(1), 1.0, rtol=1e-12)


def test_linear_kernel_with_mask(rng):
    q, k, v = _data(rng, m=31, n=31)
    K = (q @ k.T) * (1 - np.eye(31))
    out = nadaraya.smooth(q, k, v, LinearKernel(), LeaveOneOut(), normalize=False)
    np.testing.assert_allclose(out, K @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_signed_normalized_divides_by_signed_row_sum(rng, engine):
    q, k, v = _data(rng)
    q, k = q + 2.0, k + 2.0  # keep the row sums away from zero
    K = q @ k.T
    out = nadaraya.smooth(q, k, v, LinearKernel(), engine=engine)
    np.testing.assert_allclose(out, (K @ v) / K.sum(1, keepdims=True), rtol=1e-10)


def test_signed_zero_row_sum_follows_empty_policy():
    k = np.array([[1.0], [-1.0], [2.0]])
    q = np.array([[1.0], [0.0]])  # second query: every weight is 0
    v = np.array([[1.0], [2.0], [3.0]])
    v2 = np.array([[1.0], [2.0], [-1.0]])
    kk = np.array([[1.0], [-1.0]])
    with pytest.raises(NadarayaError, match="signed weight sum of zero"):
        nadaraya.smooth(q, k, v, LinearKernel())
    out = nadaraya.smooth(q, k, v, LinearKernel(), empty="nan")
    np.testing.assert_allclose(out[0], (1 * 1 - 1 * 2 + 2 * 3) / 2.0)
    assert np.isnan(out[1]).all()
    # weights +1 and -1 cancel exactly; "nearest" takes the key of largest weight
    out = nadaraya.smooth(np.array([[1.0]]), kk, v2[:2], LinearKernel(), empty="nearest")
    np.testing.assert_allclose(out, [[1.0]])


def test_signed_kernel_refused_by_other_engines(rng):
    q, k, v = _data(rng)
    why = nadaraya.explain(q, k, v, LinearKernel())
    assert why.engine in ENGINES
    for name in ("neighbors", "fused"):
        assert "signed kernel" in why.reasons[name]
        assert "weight domain" in why.reasons[name]
    with pytest.raises(NadarayaError, match="signed kernel"):
        nadaraya.smooth(q, k, v, LinearKernel(), engine="fused")


def test_signed_kernel_rejects_log_domain_uses(rng):
    q, k, v = _data(rng)
    with pytest.raises(NadarayaError, match="return_lse"):
        nadaraya.smooth(q, k, v, LinearKernel(), return_lse=True)
    with pytest.raises(NadarayaError, match="signed"):
        nadaraya.smooth(q, k, v, LinearKernel().on([0]) * Gaussian(1.0).on([1, 2]))
    with pytest.raises(NadarayaError, match="signed"):
        nadaraya.weights(q, k, LinearKernel())


def test_signed_kernel_overflow_raises(rng):
    x = rng.random((5, 3)) + 1.0
    with pytest.raises(NadarayaError, match="non-finite"):
        nadaraya.smooth(x * 1e3, x * 1e3, np.ones(5), Power(LinearKernel(), 200))


def test_negative_distance_kernel_matches_formula(rng):
    q, k, v = _data(rng)
    for p in (1, 2):
        D = np.array([[np.sum(np.abs(a - b) ** p) ** (1 / p) for b in k] for a in q])
        out = nadaraya.smooth(q, k, v, NegativeDistance(p), normalize=False)
        np.testing.assert_allclose(out, -D @ v, rtol=1e-12)


def test_linear_kernel_bad_metric():
    with pytest.raises(NadarayaError, match="metric"):
        LinearKernel("mahalanobis")
    with pytest.raises(NadarayaError, match="square"):
        LinearKernel(np.ones((2, 3)))
    with pytest.raises(NadarayaError, match=r"\(2, 2\)"):
        nadaraya.smooth(np.ones((3, 2)), np.ones((3, 2)), np.ones(3),
                        LinearKernel(np.eye(3)), normalize=False)


def test_linear_kernel_gradient_through_metric(rng):
    q, k, v = (torch.tensor(a) for a in _data(rng))
    M = torch.tensor(rng.normal(size=(3, 3)), requires_grad=True)
    out = nadaraya.smooth(q, k, v, LinearKernel(M), normalize=False)
    out.square().sum().backward()
    M2 = M.detach().clone().requires_grad_(True)
    (q @ M2 @ k.T @ v).square().sum().backward()
    torch.testing.assert_close(M.grad, M2.grad, rtol=1e-10, atol=1e-10)


def test_torch_in_torch_out(rng):
    q, k, v = (torch.tensor(a, dtype=torch.float32) for a in _data(rng))
    out = nadaraya.smooth(q, k, v, LinearKernel(), normalize=False)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    torch.testing.assert_close(out, q @ k.T @ v, rtol=1e-4, atol=1e-4)


@settings(max_examples=25)
@given(m=st.integers(1, 20), n=st.integers(1, 20), d=st.integers(1, 4),
       key_block=st.integers(1, 8), query_block=st.integers(1, 8),
       causal=st.booleans(), seed=st.integers(0, 2**16))
def test_weight_domain_blocks_do_not_change_the_sum(m, n, d, key_block, query_block, causal,
                                                    seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(m, d)), rng.normal(size=(n, d)), rng.normal(size=(n, 2))
    K = q @ k.T
    mask = None
    if causal:
        mask = Causal()
        K = K * (np.arange(n)[None, :] <= np.arange(m)[:, None])
    with nadaraya.config_context(key_block=key_block, query_block=query_block):
        out = nadaraya.smooth(q, k, v, LinearKernel(), mask, engine="streamed",
                              normalize=False)
    np.testing.assert_allclose(out, K @ v, rtol=1e-10, atol=1e-12)
