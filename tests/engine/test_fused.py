"""The fused engine (torch fused attention) against the float64 dense engine,
torch's own ``scaled_dot_product_attention`` and autograd's numerical gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M

EPS32 = float(np.finfo(np.float32).eps)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _problem(m: int = 9, n: int = 11, d: int = 3, p: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = rng.random((n, d))
    queries = keys[np.arange(m) % n] + 0.05 * rng.standard_normal((m, d))
    values = rng.standard_normal((n, p))
    return queries, keys, values


def _random_bool(m: int, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.random((m, n)) < 0.4
    out[np.arange(m), rng.integers(0, n, m)] = True
    return out


# Bandwidths wide enough that the Gaussian's dot form is exact in float32 too.
KERNELS = {
    "softmax": ("softmax", None),
    "softmax-scale": (K.ExpDot(scale=0.7), None),
    "gaussian-scalar": ("gaussian", 1.5),
    "gaussian-vector": (K.Gaussian(np.array([1.2, 1.8, 1.5])), None),
    "gaussian-metric": (K.Gaussian(metric=np.array([[0.6, 0.2, 0.0], [0.0, 0.5, -0.3]])), None),
    "gaussian-product": (K.Gaussian(1.4).on([0, 1]) * K.Gaussian(2.0).on([2]), None),
    "gaussian-x-softmax": (K.Gaussian(1.5).on([0]) * K.ExpDot(0.8).on([1, 2]), None),
}
MASKS = {
    "none": lambda m, n: None,
    "causal": lambda m, n: M.Causal(),
    "causal+2": lambda m, n: M.Causal(offset=2),
    "causal-2": lambda m, n: M.Causal(offset=-2),
    "window": lambda m, n: M.Window(2),
    "leave-one-out": lambda m, n: M.LeaveOneOut(),
    "bool-matrix": lambda m, n: M.MatrixMask(_random_bool(m, n)),
    "causal&window": lambda m, n: M.Causal() & M.Window(3),
}


def _err(out: np.ndarray, ref: np.ndarray) -> float:
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    finite = ~np.isnan(ref)
    return float(np.abs(out[finite] - ref[finite]).max()) if finite.any() else 0.0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mask_id", list(MASKS))
@pytest.mark.parametrize("kernel_id", list(KERNELS))
def test_matches_dense_float64(kernel_id: str, mask_id: str, dtype: str) -> None:
    kernel, bw = KERNELS[kernel_id]
    q, k, v = _problem()
    mask = MASKS[mask_id](len(q), len(k))
    ref, ref_lse = nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bw, engine="dense",
                                   empty="nan", return_lse=True)
    qc, kc, vc = (a.astype(dtype) for a in (q, k, v))
    out, lse = nadaraya.smooth(qc, kc, vc, kernel, mask, bandwidth=bw, engine="fused",
                               empty="nan", return_lse=True)
    if dtype == "float64":
        tol = 1e-12
    else:
        dense32 = nadaraya.smooth(qc, kc, vc, kernel, mask, bandwidth=bw, engine="dense",
                                  empty="nan")
        tol = 16 * max(_err(dense32, ref), EPS32)
    assert _err(out, ref) <= tol
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(ref_lse))
    assert _err(np.where(np.isinf(lse), np.nan, lse), np.where(np.isinf(ref_lse), np.nan,
                                                                   ref_lse)) <= 4 * tol


def _fused_or_compiled(why: nadaraya.engine.Explanation) -> bool:
    """The automatic choice is fused, or the compiled engine (preferred where it runs)."""
    return why.engine == "fused" or (why.engine == "compiled"
                                     and not why.reasons["fused"].startswith("cannot run"))


def test_auto_chooses_fused_for_gaussian_float64() -> None:
    q, k, v = _problem()
    why = nadaraya.explain(q, k, v, "gaussian", bandwidth=0.4)
    assert _fused_or_compiled(why), str(why)


@pytest.mark.parametrize("shape", [(7, 7), (5, 9), (9, 5)])
def test_softmax_equals_torch_sdpa(shape: tuple[int, int]) -> None:
    m, n = shape
    g = torch.Generator().manual_seed(1)
    q = torch.randn(m, 8, generator=g)
    k = torch.randn(n, 8, generator=g)
    v = torch.randn(n, 3, generator=g)
    tol = 1e-5
    out = nadaraya.smooth(q, k, v, "softmax", engine="fused")
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=tol, rtol=tol)
    # torch's is_causal aligns the diagonal to the top-left corner, like Causal()
    out = nadaraya.smooth(q, k, v, "softmax", "causal", engine="fused")
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    visible = torch.as_tensor(_random_bool(m, n))
    out = nadaraya.smooth(q, k, v, K.ExpDot(scale=0.3), visible, engine="fused")
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=0.3)
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


def test_lse_equals_logsumexp_of_scores() -> None:
    g = torch.Generator().manual_seed(2)
    q = torch.randn(6, 4, generator=g, dtype=torch.float64)
    k = torch.randn(10, 4, generator=g, dtype=torch.float64)
    v = torch.randn(10, 1, generator=g, dtype=torch.float64)
    _, lse = nadaraya.smooth(q, k, v, K.Gaussian(0.8), M.Causal(offset=3), engine="fused",
                             return_lse=True)
    scores = -0.5 * torch.cdist(q, k).square() / 0.8**2
    visible = torch.arange(10)[None, :] <= torch.arange(6)[:, None] + 3
    ref = torch.logsumexp(scores.masked_fill(~visible, -torch.inf), dim=1)
    torch.testing.assert_close(lse, ref, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("memory", [0.1, 0.005], ids=["row-blocks", "split-keys"])
def test_blocks_and_key_ranges_match_dense(memory: float) -> None:
    # small budgets force blocks of query rows, and key ranges split and merged
    rng = np.random.default_rng(4)
    n = 1500
    x = rng.random((n, 2))
    y = np.sin(6 * x[:, 0])
    q = x if memory >= 0.1 else x[:150]
    for mask in (M.Window(150), M.LeaveOneOut(), M.MatrixMask(rng.random((len(q), n)) < 0.002)):
        ref = nadaraya.smooth(q, x, y, "gaussian", mask, bandwidth=0.1, engine="dense",
                              empty="nan")
        with nadaraya.config_context(working_memory=memory):
            out = nadaraya.smooth(q, x, y, "gaussian", mask, bandwidth=0.1, engine="fused",
                                  empty="nan")
        assert _err(out, ref) <= 1e-12


@pytest.mark.parametrize("offset", [0, 5, -7, 130, -130])
def test_causal_in_row_blocks(offset: int) -> None:
    q, k, v = _problem(m=100, n=90)
    ref = nadaraya.smooth(q, k, v, "softmax", M.Causal(offset), engine="dense", empty="nan")
    with nadaraya.config_context(working_memory=0.001):
        out = nadaraya.smooth(q, k, v, "softmax", M.Causal(offset), engine="fused",
                              empty="nan")
    assert _err(out, ref) <= 1e-12


def test_single_query() -> None:
    q, k, v = _problem()
    for mask in (None, M.Causal(offset=4), M.MatrixMask(_random_bool(1, len(k)))):
        ref = nadaraya.smooth(q[:1], k, v, "gaussian", mask, bandwidth=0.4, engine="dense")
        out = nadaraya.smooth(q[:1], k, v, "gaussian", mask, bandwidth=0.4, engine="fused")
        assert out.shape == (1, 2) and _err(out, ref) <= 1e-12


def test_unnormalized_sum() -> None:
    q, k, v = _problem()
    for mask in (None, M.Causal(offset=-2), M.Window(2)):
        ref = nadaraya.smooth(q, k, v, "gaussian", mask, bandwidth=0.4, engine="dense",
                              normalize=False)
        out = nadaraya.smooth(q, k, v, "gaussian", mask, bandwidth=0.4, engine="fused",
                              normalize=False)
        assert _err(out, ref) <= 1e-12 * max(1.0, np.abs(ref).max())


def test_values_wider_than_the_dot_form() -> None:
    q, k, _ = _problem(d=1)
    v = np.random.default_rng(5).standard_normal((len(k), 7))
    ref = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.2, engine="dense")
    out = nadaraya.smooth(q, k, v, "gaussian", bandwidth=0.2, engine="fused")
    assert _err(out, ref) <= 1e-12


class TestEmptyRows:
    def _inputs(self):
        q, k, v = _problem(m=6, n=8)
        visible = _random_bool(6, 8)
        visible[[1, 4]] = False
        return q, k, v, visible

    def test_nan_and_lse(self) -> None:
        q, k, v, visible = self._inputs()
        out, lse = nadaraya.smooth(q, k, v, "softmax", visible, engine="fused", empty="nan",
                                   return_lse=True)
        assert np.isnan(out[[1, 4]]).all() and not np.isnan(out[[0, 2, 3, 5]]).any()
        assert np.isneginf(lse[[1, 4]]).all() and np.isfinite(lse[[0, 2, 3, 5]]).all()
        ref = nadaraya.smooth(q, k, v, "softmax", visible, engine="dense", empty="nan")
        assert _err(out, ref) <= 1e-12

    def test_causal_negative_offset(self) -> None:
        q, k, v = _problem(m=6, n=8)
        out = nadaraya.smooth(q, k, v, "gaussian", M.Causal(offset=-2), bandwidth=0.5,
                              engine="fused", empty="nan")
        assert np.isnan(out[:2]).all() and not np.isnan(out[2:]).any()

    def test_raise(self) -> None:
        q, k, v, visible = self._inputs()
        with pytest.raises(NadarayaError, match="2 of 6 queries"):
            nadaraya.smooth(q, k, v, "softmax", visible, engine="fused")

    def test_nearest(self) -> None:
        q, k, v, _ = self._inputs()
        for engine in ("dense", "fused"):
            with pytest.raises(NadarayaError, match="hides every key"):
                nadaraya.smooth(q, k, v, "gaussian", M.Causal(offset=-2), bandwidth=0.5,
                                engine=engine, empty="nearest")


class TestRefusals:
    def _reason(self, *args, **kwargs) -> str:
        why = nadaraya.explain(*args, **kwargs)
        assert why.engine != "fused"
        with pytest.raises(NadarayaError, match="engine='fused' cannot run"):
            nadaraya.explain(*args, **kwargs, engine="fused")
        return why.reasons["fused"]

    def test_kernel_without_dot_form(self) -> None:
        q, k, v = _problem()
        assert "not softmax attention" in self._reason(q, k, v, "laplacian", bandwidth=0.5)
        for kernel in (K.Gaussian(0.5) + K.Gaussian(0.2),
                       K.Gaussian(0.5).on([0]) * K.Laplacian(1.0).on([1, 2])):
            assert "not softmax attention" in self._reason(q, k, v, kernel)

    def test_gaussian_too_many_bandwidths(self) -> None:
        x = np.linspace(0, 1e4, 200)
        for dtype in ("float32", "float64"):
            xc = x.astype(dtype)
            why = self._reason(xc, xc, np.sin(xc), "gaussian", bandwidth=1.0)
            assert f"at {dtype}" in why and "dot form would lose" in why

    def test_float32_hint(self) -> None:
        # 20 bandwidths wide: exact enough in float64, not in float32
        x = np.linspace(0, 6, 100)
        x32 = x.astype("float32")
        why = self._reason(x32, x32, np.sin(x32), "gaussian", bandwidth=0.3)
        assert "in float64 it would be exact enough" in why
        assert _fused_or_compiled(nadaraya.explain(x, x, np.sin(x), "gaussian", bandwidth=0.3))

    def test_many_value_columns_on_cpu(self) -> None:
        q, k, _ = _problem(d=1)
        wide = np.random.default_rng(8).standard_normal((len(k), 300))
        assert "300 columns" in self._reason(q, k, wide, "gaussian", bandwidth=0.3)

    def test_no_dot_error_for_softmax_in_float32(self) -> None:
        x = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32) * 100
        assert _fused_or_compiled(nadaraya.explain(x, x, x, "softmax"))


def _grad_inputs(dtype: torch.dtype = torch.float64, device: str = "cpu"):
    g = torch.Generator().manual_seed(6)
    q = torch.rand(5, 2, generator=g, dtype=dtype).to(device).requires_grad_()
    k = torch.rand(7, 2, generator=g, dtype=dtype).to(device).requires_grad_()
    v = torch.randn(7, 3, generator=g, dtype=dtype).to(device).requires_grad_()
    h = torch.tensor(0.6, dtype=dtype, device=device, requires_grad=True)
    return q, k, v, h


GRAD_CASES = {
    "softmax": lambda h: K.ExpDot(scale=h),
    "gaussian": lambda h: K.Gaussian(h),
    "gaussian-product": lambda h: K.Gaussian(h).on([0]) * K.Gaussian(2 * h).on([1]),
}


@pytest.mark.parametrize("mask", [None, M.Causal(offset=2), M.Window(1)],
                         ids=["none", "causal+2", "window"])
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradcheck(case: str, mask: M.Mask | None) -> None:
    make = GRAD_CASES[case]

    def f(q, k, v, h):
        out, lse = nadaraya.smooth(q, k, v, make(h), mask, engine="fused", return_lse=True)
        return torch.cat([out, lse[:, None]], dim=1)  # one output: lse must carry grad too

    assert torch.autograd.gradcheck(f, _grad_inputs())


def test_gradcheck_with_empty_rows() -> None:
    visible = torch.rand(5, 7, generator=torch.Generator().manual_seed(7)) < 0.5
    visible[2] = False
    visible[[0, 1, 3, 4], 0] = True

    def f(q, k, v, h):
        out, lse = nadaraya.smooth(q, k, v, K.Gaussian(h), visible, engine="fused",
                                   empty="nan", return_lse=True)
        return torch.cat([out, lse[:, None]], dim=1)[[0, 1, 3, 4]]

    assert torch.autograd.gradcheck(f, _grad_inputs())


def test_gradient_equals_dense() -> None:
    q, k, v, h = _grad_inputs()
    grads = []
    for engine in ("fused", "dense"):
        out, lse = nadaraya.smooth(q, k, v, K.Gaussian(h), "causal", engine=engine,
                                   return_lse=True)
        grads.append(torch.autograd.grad(out.square().sum() + lse.sum(), (q, k, v, h)))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


# -- CUDA (skipped without a GPU) ----------------------------------------------------
@CUDA
@pytest.mark.parametrize("mask_id", list(MASKS))
def test_cuda_softmax_matches_dense(mask_id: str) -> None:
    q, k, v = _problem()
    mask = MASKS[mask_id](len(q), len(k))
    ref = nadaraya.smooth(q, k, v, "softmax", mask, engine="dense", empty="nan")
    qc, kc, vc = (torch.as_tensor(a, dtype=torch.float32, device="cuda") for a in (q, k, v))
    assert nadaraya.explain(qc, kc, vc, "softmax", mask).engine == "fused"
    out = nadaraya.smooth(qc, kc, vc, "softmax", mask, engine="fused", empty="nan")
    assert out.device.type == "cuda"
    assert _err(out.cpu().numpy(), ref) <= 1e-5


@CUDA
def test_cuda_gaussian_lse_and_grad() -> None:
    q, k, v = _problem()
    ref, ref_lse = nadaraya.smooth(q, k, v, "gaussian", M.Window(2), bandwidth=1.5,
                                   engine="dense", return_lse=True)
    qc, kc, vc = (torch.as_tensor(a, dtype=torch.float32, device="cuda").requires_grad_()
                  for a in (q, k, v))
    out, lse = nadaraya.smooth(qc, kc, vc, "gaussian", M.Window(2), bandwidth=1.5,
                               engine="fused", return_lse=True)
    assert _err(out.detach().cpu().numpy(), ref) <= 1e-5
    assert _err(lse.detach().cpu().numpy(), ref_lse) <= 1e-5
    (out.sum() + lse.sum()).backward()
    q64, k64, v64 = (torch.as_tensor(a).requires_grad_() for a in (q, k, v))
    out64, lse64 = nadaraya.smooth(q64, k64, v64, "gaussian", M.Window(2), bandwidth=1.5,
                                   engine="dense", return_lse=True)
    (out64.sum() + lse64.sum()).backward()
    for a, b in ((qc, q64), (kc, k64), (vc, v64)):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, atol=1e-4, rtol=1e-4)


@CUDA
def test_cuda_float64_refused() -> None:
    x = torch.rand(20, 2, dtype=torch.float64, device="cuda")
    why = nadaraya.explain(x, x, x, "softmax")
    assert why.engine != "fused" and "float64" in why.reasons["fused"]
