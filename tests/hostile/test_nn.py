"""The attention face under hostile input: ``kernel_attention`` and ``KernelAttention``.

The contract, for ``nadaraya.nn.functional.kernel_attention``,
``attention_weights``, ``explain_attention`` and ``nadaraya.nn.KernelAttention``
(forward and backward, training and evaluation):

1. Finite inputs give finite outputs and finite gradients wherever the float64
   computation of the same inputs (the float64 dense engine on them, cast
   exactly) is finite and inside the dtype's range, and they agree with it
   within a tolerance scaled by the dtype's ``eps``: ``eps`` times the
   problem's own sensitivity to one rounding of its inputs, measured on
   perturbed float64 copies (``_inputs.assert_like_float64``). Magnitudes run
   from 1e-30 (or the dtype's subnormals) to the dtype's largest number, in
   every kernel and every float dtype. The module's projections are
   ``torch.nn.functional.linear``, whose sums overflow exactly as those of
   ``nn.MultiheadAttention`` do, so the module is driven with inputs whose
   projections fit the dtype; the kernel's own range is driven through
   ``kernel_attention``.
2. Invalid input raises :class:`nadaraya.NadarayaError` whose message names
   the argument. ``KernelAttention`` is a drop-in for
   ``nn.MultiheadAttention``, which raises ``AssertionError`` or
   ``RuntimeError`` for the same mistakes (a dtype that differs from the
   parameters, a key whose batch differs, a mask of the wrong shape); this
   module raises ``NadarayaError`` for every one of them, which the tests
   below check next to what ``MultiheadAttention`` does.
3. NaN and infinities in query, key and value propagate (the policy in the
   ``KernelAttention`` docstring): every output row whose query, or any key
   or value of its (batch, head) problem, is not finite is NaN; other
   problems keep their finite result.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from nadaraya.kernels import Kernel, PreparedKernel, get_attention_kernel
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention

from ._inputs import as_float64, assert_like_float64, call

KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear", "cosine", "product")
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: (engine, need_weights): every way kernel_attention computes
PATHS = (("auto", False), ("streamed", False), ("dense", False), ("fused", False),
         ("dense", True))
MASKS = ("none", "causal", "bool", "bool per batch and head", "float -inf",
         "float finite", "hidden row")


def _kernel(name: str, features: int):
    if name == "product":  # Tsai's positional product: two kernels on two column sets
        half = max(features // 2, 1)
        return (get_attention_kernel("laplacian").on(slice(0, half))
                * get_attention_kernel("rbf").on(slice(half, features)))
    return name


def _finfo(dtype: torch.dtype) -> torch.finfo:
    return torch.finfo(dtype)


def _subnormal(dtype: torch.dtype) -> float:
    info = _finfo(dtype)
    return float(info.smallest_normal) * float(info.eps)


def _to(x: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """float64 numbers clipped to the dtype's range and rounded into it."""
    top = float(_finfo(dtype).max)
    return torch.as_tensor(np.clip(x, -top, top)).to(dtype)


def magnitudes(dtype: torch.dtype) -> st.SearchStrategy[tuple[str, int]]:
    """A kind of numbers and a decimal exponent: 1e-30 (or subnormal) to the dtype's largest."""
    info = _finfo(dtype)
    low = max(-30, math.ceil(math.log10(_subnormal(dtype))))
    return st.tuples(st.sampled_from(["scaled", "scaled", "largest", "subnormal", "mixed"]),
                     st.integers(low, math.floor(math.log10(float(info.max)))))


@st.composite
def numbers(draw: st.DrawFn, shape: tuple[int, ...], dtype: torch.dtype,
            magnitude: tuple[str, int] | None = None) -> torch.Tensor:
    """A tensor of ``shape`` at one magnitude (drawn when not given)."""
    kind, exp = magnitude or draw(magnitudes(dtype))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "largest":  # within a factor of two of the largest finite number
        top = float(_finfo(dtype).max)
        x = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.0, shape) * top
    elif kind == "subnormal":
        x = rng.integers(-50, 51, shape) * _subnormal(dtype)
    else:
        x = rng.uniform(-1, 1, shape) * 10.0**exp
        if kind == "mixed":  # six decades within one tensor
            x = x * 10.0 ** rng.integers(-6, 1, shape)
    return _to(x, dtype)


@st.composite
def _mask(draw: st.DrawFn, kind: str, B: int, H: int, L: int, S: int,
          dtype: torch.dtype) -> dict:
    """Keyword arguments of kernel_attention for one kind of mask (SDPA's: True attends)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "none":
        return {}
    if kind == "causal":
        return {"is_causal": True}
    if kind == "bool":
        return {"attn_mask": torch.as_tensor(rng.random((L, S)) < 0.7)}
    if kind == "bool per batch and head":
        heads = draw(st.sampled_from([1, H]))
        return {"attn_mask": torch.as_tensor(rng.random((B, heads, L, S)) < 0.6)}
    if kind == "hidden row":
        m = torch.as_tensor(rng.random((L, S)) < 0.7)
        if L:
            m[draw(st.integers(0, L - 1))] = False
        return {"attn_mask": m}
    if kind == "float -inf":
        bias = np.where(rng.random((L, S)) < 0.3, -np.inf, rng.normal(0, 2, (L, S)))
        return {"attn_mask": _to(bias, dtype)}
    # finite large negatives (and positives) up to the dtype's largest number
    info = _finfo(dtype)
    exp = draw(st.integers(0, math.floor(math.log10(float(info.max)))))
    bias = rng.choice([0.0, -1.0, 0.5], (L, S)) * 10.0**exp
    if draw(st.booleans()):
        bias[:, :] = -float(info.max)  # every key at the most negative finite number
    return {"attn_mask": _to(bias, dtype)}


@st.composite
def problems(draw: st.DrawFn, dtype: torch.dtype | None = None) -> dict:
    """One kernel_attention problem: sizes down to zero, any magnitude, any mask."""
    dtype = dtype or draw(st.sampled_from(DTYPES))
    kernel = draw(st.sampled_from(KERNELS))
    B, H = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    L, S = draw(st.sampled_from([0, 1, 2, 3, 5])), draw(st.sampled_from([0, 1, 2, 4, 7]))
    E = draw(st.integers(2 if kernel == "product" else 1, 4))
    P = draw(st.integers(1, 3))
    points = draw(magnitudes(dtype))
    q = draw(numbers((B, H, L, E), dtype, points))
    # keys at the queries' magnitude (the usual case), or at one of their own
    k = draw(numbers((B, H, S, E), dtype, draw(st.one_of(st.just(points), magnitudes(dtype)))))
    v = draw(numbers((B, H, S, P), dtype))
    mask = draw(_mask(draw(st.sampled_from(MASKS)), B, H, L, S, dtype))
    return {"q": q, "k": k, "v": v, "kernel": kernel, "E": E, "mask": mask, "dtype": dtype}


class _Rounded(Kernel):
    """A kernel whose every score (or weight) and its derivative is rounded once, at random.

    The value becomes ``s (1 + eps u) + eps u`` in the log domain (``w (1 +
    eps u)`` otherwise) and its derivative ``(1 + eps u')`` times the true
    one, ``u`` and ``u'`` independent and uniform in [-1, 1]: in float64 this
    shows how far one rounding of each term moves the result and its
    gradients, cancellation in the sums over keys included (a perturbation
    of the inputs alone keeps identities such as ``sum_j w_j (v_j - out) =
    0`` exact). For the dense engine, which scores all pairs at once.
    """

    batched = True

    def __init__(self, inner: Kernel, eps: float, seed: int) -> None:
        super().__init__()
        self.inner, self.eps, self.seed = inner, eps, seed
        self.log_domain = inner.log_domain  # type: ignore[misc]

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        prep = self.inner.prepare(q, k)
        rng = np.random.default_rng(self.seed)
        shape = (*q.shape[:-1], k.shape[-2])
        u, du = (torch.as_tensor(self.eps * rng.uniform(-1, 1, shape), dtype=q.dtype)
                 for _ in range(2))

        def block(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            s = prep.block(a, b)
            fixed = s.detach()
            value = fixed * (1 + u) + (u if prep.log_domain else 0.0)
            return value + (s - fixed) * (1 + du)

        return PreparedKernel(prep.queries, prep.keys, block, log_domain=prep.log_domain,
                              homogeneous=prep.homogeneous)


def _attend(p: dict, dtype: torch.dtype, engine: str, need_weights: bool,
            g: torch.Tensor, gw: torch.Tensor | None, seed: int = 0):
    """Output, weights and gradients in ``dtype``; with a seed, every number rounded at random.

    With ``seed``, the inputs (and a floating mask) are rounded once at
    random (by ``eps`` relative, or by the spacing of subnormals) and the
    kernel is :class:`_Rounded`, ``eps`` the unit roundoff of the problem's
    dtype.
    """
    rng = np.random.default_rng(seed)
    eps = float(_finfo(p["dtype"]).eps)

    def cast(t: torch.Tensor) -> torch.Tensor:
        x = t.to(dtype)
        if seed and x.is_floating_point():  # one rounding: relative, or a subnormal's spacing
            # (a whole spacing of either sign: the differences of subnormals are
            # known to one spacing, whatever the seed)
            u = torch.as_tensor(rng.uniform(-1, 1, (2, *x.shape)), dtype=dtype)
            x = x * (1 + eps * u[0]) + _subnormal(p["dtype"]) * torch.sign(u[1]) * (x != 0)
        return x

    inputs = [cast(t).requires_grad_() for t in (p["q"], p["k"], p["v"])]
    kw = {name: (cast(m) if m.is_floating_point() else m) if isinstance(m, torch.Tensor) else m
          for name, m in p["mask"].items()}
    kernel = _kernel(p["kernel"], p["E"])
    if seed:
        kernel = _Rounded(get_attention_kernel(kernel), eps, seed)
    result = call(lambda: kernel_attention(*inputs, kernel, engine=engine,
                                           need_weights=need_weights, **kw),
                  names=("engine",))
    if not result.ok:  # the one refusal allowed: an engine that cannot run this problem
        assert "cannot run this problem" in str(result.error) and engine != "auto"
        return None
    out, weights = result.value if need_weights else (result.value, None)
    loss = (out * g.to(dtype)).sum()
    if weights is not None:
        loss = loss + (weights * gw.to(dtype)).sum()
    grads = torch.autograd.grad(loss, inputs, allow_unused=True) if loss.requires_grad else (
        None, None, None)
    grads = [torch.zeros_like(t) if d is None else d for t, d in zip(inputs, grads, strict=True)]
    return out.detach(), None if weights is None else weights.detach(), grads


def _scores(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """The size of every visible score ``(B, H, L, S)``, and the rows the dtype cannot resolve.

    A score ``s`` of prepared points ``q'``, ``k'`` (plus a mask's bias ``b``)
    is known to about ``eps (|s| + |q'| |k'| + |b|)``; where that exceeds 1/16
    for a visible key, rounding can move the row's weights anywhere (two keys
    1e7 apart in score, among scores of 1e14), so its output is bounded by
    the values but not determined, nor are the gradients through it (bool
    ``(B, H, L)``). A weight ``w = (q'.k')^d`` that is not an exponential
    moves its row by ``d |q'| |k'| |q'.k'|^(d - 1) / |sum_j w|`` per relative
    change of the points (4 at least: ``d`` for two points): that is its size.
    """
    q, k = p["q"].double(), p["k"].double()
    B, H, L, _ = q.shape
    S = k.shape[-2]
    kernel = get_attention_kernel(_kernel(p["kernel"], p["E"]))
    if q.numel() == 0 or k.numel() == 0:
        return np.zeros((B, H, L, S)), np.zeros((B, H, L), bool)
    with torch.no_grad():
        prep = kernel.prepare(q, k)
        s = prep.block(prep.queries, prep.keys)
        norms = prep.queries.norm(dim=-1)[..., :, None] * prep.keys.norm(dim=-1)[..., None, :]
        visible = torch.ones_like(s, dtype=torch.bool)
        bias = torch.zeros_like(s)
        mask = p["mask"].get("attn_mask")
        if mask is not None and mask.dtype == torch.bool:
            visible = visible & mask
        elif mask is not None:
            visible = visible & (mask > -math.inf)
            bias = torch.where(visible, mask.double(), 0.0).expand_as(s)
        if p["mask"].get("is_causal"):
            visible = visible & torch.ones(L, S, dtype=torch.bool).tril()
        if kernel.log_domain:
            size = s.abs() + norms + bias.abs()
        else:
            degree = getattr(kernel, "degree", 1)
            dot = (prep.queries @ prep.keys.mT).abs()
            share = torch.exp(bias - bias.amax(-1, keepdim=True))
            total = torch.where(visible, s * share, 0.0).sum(-1, keepdim=True).abs()
            size = 4 + degree * norms * dot ** (degree - 1) * share / total
        size = torch.where(visible, size, torch.zeros_like(size)).numpy()
        loose = float(_finfo(p["dtype"]).eps) * size.max(-1, initial=0.0) > 1 / 16
        return size, loose & kernel.log_domain


@given(p=problems(), path=st.sampled_from(PATHS))
def test_finite_inputs_keep_the_float64_result(p: dict, path: tuple[str, bool]) -> None:
    _check_contract(p, *path)


def _check_contract(p: dict, engine: str, need_weights: bool) -> None:
    """Part 1 of the contract for one problem and one way of computing it."""
    dtype = p["dtype"]
    B, H, L, _ = p["q"].shape
    rng = np.random.default_rng(1)  # upstream gradients, exact in every dtype
    g = torch.as_tensor(rng.uniform(-1, 1, (B, H, L, p["v"].shape[-1]))).to(dtype).double()
    gw = torch.as_tensor(rng.uniform(-1, 1, (B, H, L, p["k"].shape[-2]))).to(dtype).double()
    got = _attend(p, dtype, engine, need_weights, g, gw)
    if got is None:
        return
    ref = _attend(p, torch.float64, "dense", need_weights, g, gw)
    moved = [_attend(p, torch.float64, "dense", need_weights, g, gw, seed=s) for s in (1, 2, 3)]
    info = _finfo(dtype)
    limits = {"eps": float(info.eps), "top": float(info.max), "tiny": _subnormal(dtype)}
    where = f"{p['kernel']} {dtype} engine={engine} need_weights={need_weights}"
    size, loose = _scores(p)  # (B, H, L, S), (B, H, L)
    anywhere = loose.any(-1, keepdims=True)  # dk and dv sum over every row of their problem
    assert got[0].dtype == dtype and got[0].shape == ref[0].shape
    # summing values rounds at eps times their magnitude, whatever the weights
    spread = np.broadcast_to(_top_per_problem(p["v"]), loose.shape)
    assert_like_float64(got[0], ref[0], [m[0] for m in moved], what=f"{where}: output",
                        loose=loose, floor=limits["eps"] * spread, **limits)
    if need_weights:
        assert_like_float64(got[1], ref[1], [m[1] for m in moved], what=f"{where}: weights",
                            loose=loose, **limits)
    # a gradient that vanishes, or nearly, in float64 (cosine in one dimension, a
    # polynomial kernel that cancels, a weight of 1 - 1e-9) is rounding noise in any
    # dtype: allow eps times its natural scale, |g| |v| |s| / |x| for a row x of the
    # points whose scores have size |s| (|gw| instead of |g| |v| through the
    # weights), |g| L for the values
    pull = _top(g) * _top(p["v"]) + (_top(gw) if need_weights else 0.0)
    # products with subnormal points lose one subnormal spacing times the values' scale
    tiny = max(float(info.smallest_normal), limits["tiny"] * _top(g) * _top(p["v"]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        floors = {"q": pull * size.max(-1, initial=0.0) / _rows(p["q"]),
                  "k": pull * size.max(-2, initial=0.0) / _rows(p["k"]),
                  "v": np.full(p["v"].shape[:-1], _top(g) * L)}
    for name, x, a, b, c in zip("qkv", (p["q"], p["k"], p["v"]), got[2], ref[2],
                                zip(*(m[2] for m in moved), strict=True), strict=True):
        assert a.dtype == dtype
        scale = np.where(np.isnan(floors[name]), np.inf, floors[name])
        rows = loose if name == "q" else np.broadcast_to(anywhere, (B, H, x.shape[-2]))
        # Gradients must be finite where this natural scale, and that of the scores'
        # gradient |g| |v| (1 + |s|) which the chain rule passes through, fit the dtype
        # with some headroom. Absolute errors below the smallest normal number are not
        # resolved.
        with np.errstate(over="ignore", invalid="ignore"):
            floor = limits["eps"] * scale
            natural = scale + pull * (1 + size.max(initial=0.0))
        # value differences are known to one subnormal spacing, and the keys' gradient
        # weighs them by the queries: |g| |q| L spacings
        spacing = tiny if name != "k" else max(tiny, limits["tiny"] * _top(g) * _top(p["q"]) * L)
        assert_like_float64(a, b, list(c), what=f"{where}: gradient of {name}", floor=floor,
                            loose=rows, headroom=16.0, natural=natural,
                            **{**limits, "tiny": spacing})


def _top(x: torch.Tensor) -> float:
    return float(x.detach().abs().amax().double()) if x.numel() else 0.0


def _top_per_problem(x: torch.Tensor) -> np.ndarray:
    """Largest magnitude in each problem of ``x`` ``(B, H, n, e)``, shaped ``(B, H, 1)``."""
    return np.abs(as_float64(x)).max(axis=(-2, -1), initial=0.0)[..., None]


def _rows(x: torch.Tensor) -> np.ndarray:
    """Largest magnitude of each row ``(..., n)`` of ``x`` ``(..., n, e)``."""
    return np.abs(as_float64(x)).max(-1, initial=0.0)


# -- sizes ---------------------------------------------------------------------------------
SIZES = {  # (B, H, L, S, E, P): empty batch, no query, no key, one of each, no feature
    "batch 0": (0, 2, 3, 4, 2, 2),
    "no query": (1, 2, 0, 4, 2, 2),
    "no key": (1, 2, 3, 0, 2, 2),
    "one query, one key": (1, 1, 1, 1, 2, 2),
    "no feature": (1, 2, 3, 4, 0, 2),
    "no value feature": (1, 2, 3, 4, 2, 0),
}


@pytest.mark.parametrize("case", SIZES)
@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "product"])
@pytest.mark.parametrize("path", PATHS, ids=str)
def test_empty_and_single_sizes(case: str, kernel: str, path: tuple[str, bool]) -> None:
    """Zero-size dimensions give zero-size (or zero) results, as the float64 computation."""
    B, H, L, S, E, P = SIZES[case]
    rng = np.random.default_rng(0)
    q, k, v = (torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)
               for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, P)))
    p = {"q": q, "k": k, "v": v, "kernel": kernel, "E": E, "mask": {}, "dtype": torch.float32}
    _check_contract(p, *path)
    if S == 0 and L and P:  # no key: every query sees nothing (empty="zero")
        out = kernel_attention(q, k, v, kernel, need_weights=path[1])
        assert not bool((out[0] if path[1] else out).any())


# -- masks and shapes that do not fit ------------------------------------------------------
def _qkv(dtype: torch.dtype = torch.float32, B: int = 2, H: int = 2, L: int = 3, S: int = 4,
         E: int = 4, P: int = 3) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(shape, generator=g).to(dtype)
                 for shape in ((B, H, L, E), (B, H, S, E), (B, H, S, P)))


q0, k0, v0 = _qkv()
#: kernel_attention calls that must fail, the argument the message names, and whether
#: scaled_dot_product_attention fails on the same inputs (it refuses fewer: no check of
#: dropout_p, scale, or NaN in a mask)
FUNCTIONAL_ERRORS = {
    "query not a tensor": (lambda: kernel_attention(q0.tolist(), k0, v0), "query", True),
    "1-D query": (lambda: kernel_attention(q0[0, 0, 0], k0, v0), "query", True),
    "int query": (lambda: kernel_attention(q0.long(), k0.long(), v0.long()), "query", True),
    "bool query": (lambda: kernel_attention(q0 > 0, k0 > 0, v0 > 0), "query", True),
    "dtypes differ": (lambda: kernel_attention(q0, k0.double(), v0), "query", True),
    "features differ": (lambda: kernel_attention(q0, k0[..., :3], v0), "key", True),
    "lengths differ": (lambda: kernel_attention(q0, k0, v0[..., :3, :]), "value", True),
    "batches differ": (lambda: kernel_attention(q0, torch.randn(3, 2, 4, 4),
                                                torch.randn(3, 2, 4, 3)), "query", True),
    "mask shape": (lambda: kernel_attention(q0, k0, v0, attn_mask=torch.ones(3, 5) > 0),
                   "attn_mask", True),
    "mask batch": (lambda: kernel_attention(q0, k0, v0, attn_mask=torch.ones(3, 2, 3, 4) > 0),
                   "attn_mask", True),
    "int mask": (lambda: kernel_attention(q0, k0, v0, attn_mask=torch.ones(3, 4).long()),
                 "attn_mask", True),
    "NaN in mask": (lambda: kernel_attention(q0, k0, v0, attn_mask=torch.full((3, 4), math.nan)),
                    "attn_mask", False),
    "+inf in mask": (lambda: kernel_attention(q0, k0, v0, attn_mask=torch.full((3, 4), math.inf)),
                     "attn_mask", False),
    "mask beyond float16": (lambda: kernel_attention(
        *_qkv(torch.float16), attn_mask=torch.full((3, 4), 1e6)), "attn_mask", False),
    "dropout_p 1": (lambda: kernel_attention(q0, k0, v0, dropout_p=1.0), "dropout_p", False),
    "dropout_p < 0": (lambda: kernel_attention(q0, k0, v0, dropout_p=-0.1), "dropout_p", False),
    "scale 0": (lambda: kernel_attention(q0, k0, v0, scale=0.0), "scale", False),
    "scale NaN": (lambda: kernel_attention(q0, k0, v0, scale=math.nan), "scale", False),
    "unknown kernel": (lambda: kernel_attention(q0, k0, v0, "gaussian-ish"), "kernel", None),
    "mask as kernel": (lambda: kernel_attention(q0, k0, v0, torch.ones(3, 4) > 0), "kernel",
                       None),
    "unknown engine": (lambda: kernel_attention(q0, k0, v0, engine="gpu"), "engine", None),
    "unknown empty": (lambda: kernel_attention(q0, k0, v0, empty="skip"), "empty", None),
    "fused with weights": (lambda: kernel_attention(q0, k0, v0, engine="fused",
                                                    need_weights=True), "engine", None),
    "fused laplacian": (lambda: kernel_attention(q0, k0, v0, "laplacian", engine="fused"),
                        "engine", None),
}


def _sdpa_of(case: str):
    """The same inputs through scaled_dot_product_attention (True attends, as here)."""
    F = nn.functional
    return {
        "query not a tensor": lambda: F.scaled_dot_product_attention(q0.tolist(), k0, v0),
        "1-D query": lambda: F.scaled_dot_product_attention(q0[0, 0, 0], k0[0, 0, 0],
                                                            v0[0, 0, 0]),
        "int query": lambda: F.scaled_dot_product_attention(q0.long(), k0.long(), v0.long()),
        "bool query": lambda: F.scaled_dot_product_attention(q0 > 0, k0 > 0, v0 > 0),
        "dtypes differ": lambda: F.scaled_dot_product_attention(q0, k0.double(), v0),
        "features differ": lambda: F.scaled_dot_product_attention(q0, k0[..., :3], v0),
        "lengths differ": lambda: F.scaled_dot_product_attention(q0, k0, v0[..., :3, :]),
        "batches differ": lambda: F.scaled_dot_product_attention(
            q0, torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 3)),
        "mask shape": lambda: F.scaled_dot_product_attention(
            q0, k0, v0, attn_mask=torch.ones(3, 5) > 0),
        "mask batch": lambda: F.scaled_dot_product_attention(
            q0, k0, v0, attn_mask=torch.ones(3, 2, 3, 4) > 0),
        "int mask": lambda: F.scaled_dot_product_attention(
            q0, k0, v0, attn_mask=torch.ones(3, 4).long()),
        "NaN in mask": lambda: F.scaled_dot_product_attention(
            q0, k0, v0, attn_mask=torch.full((3, 4), math.nan)),
        "+inf in mask": lambda: F.scaled_dot_product_attention(
            q0, k0, v0, attn_mask=torch.full((3, 4), math.inf)),
        "mask beyond float16": lambda: F.scaled_dot_product_attention(
            *_qkv(torch.float16), attn_mask=torch.full((3, 4), 1e6).half()),
        "dropout_p 1": lambda: F.scaled_dot_product_attention(q0, k0, v0, dropout_p=1.0),
        "dropout_p < 0": lambda: F.scaled_dot_product_attention(q0, k0, v0, dropout_p=-0.1),
        "scale 0": lambda: F.scaled_dot_product_attention(q0, k0, v0, scale=0.0),
        "scale NaN": lambda: F.scaled_dot_product_attention(q0, k0, v0, scale=math.nan),
    }[case]


@pytest.mark.parametrize("case", FUNCTIONAL_ERRORS)
def test_invalid_calls_are_refused_by_name(case: str) -> None:
    fn, name, sdpa_refuses = FUNCTIONAL_ERRORS[case]
    assert not call(fn, names=(name,)).ok
    if sdpa_refuses is not None:  # what the peer does with the same mistake
        try:
            _sdpa_of(case)()
            refused = False
        except (RuntimeError, TypeError, ValueError):
            refused = True
        assert refused == sdpa_refuses


# -- the module ----------------------------------------------------------------------------
MODULE_KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear", "cosine")


@st.composite
def modules(draw: st.DrawFn, dtype: torch.dtype | None = None) -> dict:
    """A KernelAttention of any kind, its inputs at any magnitude its projections fit, a mask."""
    dtype = dtype or draw(st.sampled_from(DTYPES))
    H = draw(st.sampled_from([1, 2]))
    E = H * draw(st.integers(1, 3))
    kw = {"kernel": draw(st.sampled_from(MODULE_KERNELS)),
          "positional": draw(st.sampled_from([None, "absolute", "product"])),
          "tie_qk": draw(st.booleans()), "bias": draw(st.booleans()),
          "learn_scale": draw(st.booleans()), "batch_first": draw(st.booleans())}
    if not kw["tie_qk"] and kw["positional"] != "absolute" and draw(st.booleans()):
        kw["kdim"], kw["vdim"] = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    module = KernelAttention(E, H, dtype=dtype, max_len=8, **kw).eval()
    B, L, S = draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(0, 4))
    fan_in = max(E, kw.get("kdim", E), kw.get("vdim", E))
    # the projections (and the output projection after them) must not overflow:
    # nn.functional.linear sums fan_in products, as nn.MultiheadAttention's do
    limit = float(_finfo(dtype).max) / (16 * E * fan_in)
    magnitude = draw(magnitudes(dtype))

    def inputs(length: int, features: int) -> torch.Tensor:
        x = draw(numbers((B, length, features), dtype, magnitude)).double()
        top = float(x.abs().max()) if x.numel() else 0.0
        if top > limit:  # a power of two keeps the digits
            x = x * 2.0 ** math.floor(math.log2(limit / top))
        x = x.to(dtype)
        return x if kw["batch_first"] else x.transpose(0, 1)

    x = {"query": inputs(L, E), "key": inputs(S, module.kdim), "value": inputs(S, module.vdim)}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["none", "key_padding_mask", "attn_mask", "float attn_mask",
                                 "is_causal", "attn_bias"]))
    if kind == "key_padding_mask":
        x[kind] = torch.as_tensor(rng.random((B, S)) < 0.4)
    elif kind == "attn_mask":
        x[kind] = torch.as_tensor(rng.random((L, S)) < 0.4)
    elif kind == "float attn_mask":
        x["attn_mask"] = _to(np.where(rng.random((B * H, L, S)) < 0.3, -np.inf,
                                      rng.normal(0, 3, (B * H, L, S))), dtype)
    elif kind == "is_causal":
        x[kind] = True
    elif kind == "attn_bias":
        x[kind] = _to(rng.normal(0, 3, (B, H, L, S)), dtype)
    return {"module": module, "inputs": x, "dtype": dtype, "need_weights": draw(st.booleans())}


def _run_module(m: dict, dtype: torch.dtype, seed: int = 0):
    """Output, weights, and gradients of inputs and parameters, in ``dtype``.

    With ``seed``, every parameter and input is rounded once at random (by the
    unit roundoff of the problem's dtype, and by its smallest subnormal: the
    products of subnormal inputs are rounded to multiples of it) and the
    kernel is :class:`_Rounded`.
    """
    module = copy.deepcopy(m["module"]).to(dtype)
    eps, sub = float(_finfo(m["dtype"]).eps), _subnormal(m["dtype"])
    rng = np.random.default_rng(seed)

    def rounded(t: torch.Tensor) -> torch.Tensor:
        if seed and t.is_floating_point():
            shape = tuple(t.shape)
            relative = torch.as_tensor(1 + eps * rng.uniform(-1, 1, shape), dtype=dtype)
            return t * relative + torch.as_tensor(sub * rng.uniform(-1, 1, shape), dtype=dtype)
        return t

    if seed:
        with torch.no_grad():
            for param in module.parameters():
                param.copy_(rounded(param))
        module.kernel = _Rounded(module.kernel, eps, seed)
        module.engine = "dense"
    kw = {name: rounded(t.to(dtype)) if isinstance(t, torch.Tensor) and t.is_floating_point()
          else t for name, t in m["inputs"].items()}
    inputs = [kw[name].requires_grad_() for name in ("query", "key", "value")]
    out, weights = module(**kw, need_weights=m["need_weights"])
    g = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, tuple(out.shape)))
    wrt = inputs + list(module.parameters())
    grads = torch.autograd.grad((out * g.to(m["dtype"]).to(dtype)).sum(), wrt,
                                allow_unused=True)
    grads = [torch.zeros_like(t) if d is None else d for t, d in zip(wrt, grads, strict=True)]
    return out.detach(), weights, grads


def _resolved(m: dict) -> bool:
    """Whether the module's scores carry less than 1/16 of rounding (see ``_scores``)."""
    module, x = m["module"], m["inputs"]
    eps = float(_finfo(m["dtype"]).eps)
    weight = max((_top(p) for p in module.parameters()), default=0.0)
    fan_in = max(module.embed_dim, module.kdim, module.vdim)
    points = sum(_top(x[name]) * weight * fan_in + weight for name in ("query", "key")) + 1
    if points > math.sqrt(1 / (16 * eps * module.embed_dim)):  # e (|q| + |k|)^2 too large
        return False
    bias = 0.0
    for name in ("attn_mask", "attn_bias"):
        mask = x.get(name)
        if isinstance(mask, torch.Tensor) and mask.is_floating_point() and mask.numel():
            bias += float(torch.where(torch.isinf(mask), 0, mask).abs().max())
    return eps * (module.embed_dim * points**2 + bias) < 1 / 16


@given(m=modules())
def test_module_keeps_the_float64_result(m: dict) -> None:
    """KernelAttention in evaluation, forward and backward (inputs and parameters)."""
    dtype = m["dtype"]
    got = _run_module(m, dtype)
    ref = _run_module(m, torch.float64)
    moved = [_run_module(m, torch.float64, seed) for seed in (1, 2, 3)]
    info = _finfo(dtype)
    limits = {"eps": float(info.eps), "top": float(info.max), "tiny": _subnormal(dtype)}
    # Only finiteness is promised for the linear and polynomial kernels, whose normaliser
    # vanishes where every q.k does (a projection of subnormal inputs that rounds to 0 in
    # the dtype empties a query float64 still gives weight), and the Laplacian, whose
    # gradient jumps where a query meets a key: the rounding of the projections (and of
    # x + positions) makes them meet, or part.
    content = m["module"].kernel
    names = {p.name for p in content.parts} if hasattr(content, "parts") else {content.name}
    # The cosine kernel reads the direction of each projected row: where the inputs are
    # subnormal in the dtype, each product of the projection is rounded to the subnormal
    # spacing, an absolute error as large as a row that cancels (float64 keeps its
    # direction; the dtype's row can be 0 or point elsewhere).
    smallest = float(_finfo(dtype).smallest_normal)
    subnormal_points = any(0 < _top(m["inputs"][n]) < smallest for n in ("query", "key"))
    loose = (not _resolved(m) or bool(names & {"linear", "laplacian", "polynomial"})
             or ("exponential" in names and subnormal_points))
    # Not even finiteness for the gradients of a signed kernel of subnormal points: the
    # normaliser of the rounded projections cancels in the dtype, and the exact gradient of
    # that rounded problem lies beyond the dtype's range (tests/hostile/test_nn_gradients.py)
    unbounded = bool(names & {"linear", "polynomial"}) and subnormal_points
    assert got[0].dtype == dtype
    names = ["query", "key", "value"] + [n for n, _ in m["module"].named_parameters()]
    pairs = [("output", got[0], ref[0], [r[0] for r in moved])]
    if m["need_weights"]:
        pairs.append(("weights", got[1], ref[1], [r[1] for r in moved]))
    pairs += [(f"gradient of {n}", a, b, [r[2][i] for r in moved])
              for i, (n, a, b) in enumerate(zip(names, got[2], ref[2], strict=True))]
    g, out = 1.0, _top(ref[0])  # |g| <= 1
    tensors = [None, None] + [m["inputs"][n] for n in ("query", "key", "value")] + list(
        m["module"].parameters())
    if not m["need_weights"]:
        del tensors[1]
    for (what, a, b, c), x in zip(pairs, tensors, strict=True):
        top = _top(b) if b.numel() else 0.0
        if not math.isfinite(top) or (unbounded and what.startswith("gradient")):
            continue
        rows = b.numel() // b.shape[-1] if b.ndim and b.shape[-1] else 1
        # One rounding of the tensor's largest entry, or of the natural scale of a
        # gradient that vanishes in float64 (a scale-invariant kernel in one
        # dimension), 4 |g| |out| / |x|; the chain rule through the projections
        # needs headroom.
        scale: float | np.ndarray = top
        if x is not None and _top(x) > 0:
            size = x.detach().double().abs()
            if x.shape == b.shape and x.ndim:  # an input: the natural scale of each row
                size = size.amax(-1).reshape(-1).numpy()
                with np.errstate(divide="ignore"):
                    scale = np.maximum(top, np.minimum(4 * g * out / size, float(info.max)))
            else:
                scale = max(top, min(4 * g * out / float(size.max()), float(info.max)))
        assert_like_float64(a, b, c, what=f"{dtype}: {what}", floor=limits["eps"] * scale,
                            loose=np.full(rows, loose), headroom=16.0, natural=top,
                            **{**limits, "tiny": float(info.smallest_normal)})
