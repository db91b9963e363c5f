"""``kernel_attention`` and ``KernelAttention`` on the device, in float32, float16 and bfloat16.

Oracle: the attention weights written out here from each kernel's formula
(``nadaraya.kernels._attention``'s table, scale ``s`` given explicitly),
evaluated in float64 on the CPU on the device's inputs rounded to its dtype;
gradients by autograd through that formula. ``nn.MultiheadAttention`` is the
oracle of the module swapped into ``nn.TransformerEncoderLayer``.

Tolerance. The inputs have unit variance and ``s = 1/sqrt(E)``, so scores
are of order one: the device rounds the points, the scores and each weight
to about one ``eps`` of its dtype relative, and a sum over the ``L`` keys
(in the dtype, in the worst case for a kernel that sums there) adds rounding
that grows as ``sqrt(L)`` (Higham and Mary's probabilistic bound). The output
and each gradient must be within ``4 * eps * sqrt(L)`` of the float64 result,
relative to the largest reference value (23 eps at L = 32; float16: 2.3e-2,
bfloat16: 0.18, float32: 2.7e-6). The largest error seen on the CPU is about
a fifth of that.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from nadaraya.kernels import ATTENTION_NAMES
from nadaraya.nn import KernelAttention
from nadaraya.nn.functional import kernel_attention

from ._helpers import eps, host

B, H, L, E, EV = 2, 4, 32, 16, 8
SCALE = 1 / math.sqrt(E)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
MASKS = ["none", "causal", "attn_mask", "gqa", "mask_mod"]


def sliding_by_head(b, h, q_idx, kv_idx):
    """A FlexAttention ``mask_mod``: head ``h`` sees ``h + 2`` keys back, and the next one."""
    return (kv_idx <= q_idx + 1) & (q_idx - kv_idx <= h + 2)


def _weights(kernel: str, q: torch.Tensor, k: torch.Tensor, scale: float = SCALE,
             ) -> torch.Tensor:
    """``K(q, k)`` by the kernel's formula, ``(..., L, S)``, log-weights for the exp kernels."""
    dot = q @ k.mT
    if kernel == "polynomial":
        return (scale * dot) ** 2
    if kernel == "linear":
        return scale * dot
    if kernel == "softmax":
        return scale * dot
    if kernel == "cosine":
        return scale * dot / (q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :])
    d2 = (q.square().sum(-1)[..., :, None] + k.square().sum(-1)[..., None, :] - 2 * dot)
    d2 = d2.clamp_min(0)
    if kernel == "rbf":
        return -scale * d2 / 2
    return -math.sqrt(scale) * (d2 + 1e-300).sqrt()  # laplacian (no zero distance here)


def naive(kernel: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
          visible: torch.Tensor, scale: float = SCALE) -> torch.Tensor:
    """``sum_j K v_j / sum_j K`` over the visible keys, from the formula."""
    s = _weights(kernel, q, k, scale)
    if kernel in ("polynomial", "linear"):
        w = torch.where(visible, s, torch.zeros_like(s))
        w = w / w.sum(-1, keepdim=True)
    else:
        w = torch.softmax(s.masked_fill(~visible, -math.inf), -1)
    return w @ v


def _inputs(rng: np.random.Generator, kernel: str, kv_heads: int):
    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.standard_normal(shape))

    q, k, v = t(B, H, L, E), t(B, kv_heads, L, E), t(B, kv_heads, L, EV)
    if kernel == "linear":  # a signed kernel: keep the normaliser q.k away from zero
        q, k = q.abs() + 0.5, k.abs() + 0.5
    return q, k, v, t(B, H, L, EV)


def _visible(mask: str, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
    """The boolean visibility ``(B, H, L, L)`` and kernel_attention's arguments giving it."""
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    full = torch.ones(B, H, L, L, dtype=torch.bool)
    if mask == "causal":
        return full & (j <= i), {"is_causal": True}
    if mask == "attn_mask":
        keep = torch.as_tensor(rng.random((B, 1, L, L)) < 0.7)
        keep[..., 0] = True
        return full & keep, {"attn_mask": keep}
    if mask == "mask_mod":
        b, h = torch.arange(B)[:, None, None, None], torch.arange(H)[None, :, None, None]
        return full & sliding_by_head(b, h, i, j), {"mask": sliding_by_head}
    if mask == "gqa":
        return full, {"enable_gqa": True}
    return full, {}


def _tol(dtype: torch.dtype) -> float:
    return 4 * eps(dtype) * math.sqrt(L)


def _close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, device: torch.device,
           what: str) -> None:
    assert got.dtype == dtype, what
    g = host(got, device)
    r = ref.detach().numpy()
    assert np.isfinite(g).all(), what
    err = np.abs(g - r).max() / np.abs(r).max()
    assert err <= _tol(dtype), (what, err / eps(dtype))


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ATTENTION_NAMES)
def test_forward_and_backward_equal_float64(rng, device, kernel, dtype, mask):
    kv_heads = 2 if mask == "gqa" else H
    q, k, v, g = (x.to(dtype).double() for x in _inputs(rng, kernel, kv_heads))
    visible, kw = _visible(mask, rng)
    ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
    groups = H // kv_heads
    ref = naive(kernel, ref_in[0], ref_in[1].repeat_interleave(groups, 1),
                ref_in[2].repeat_interleave(groups, 1), visible)
    ref_grads = torch.autograd.grad(ref, ref_in, g)
    ins = [x.to(device, dtype).requires_grad_() for x in (q, k, v)]
    kw = {n: (a.to(device) if isinstance(a, torch.Tensor) else a) for n, a in kw.items()}
    out = kernel_attention(*ins, kernel, scale=SCALE, **kw)
    assert out.shape == (B, H, L, EV)
    _close(out, ref, dtype, device, "output")
    grads = torch.autograd.grad(out, ins, g.to(device, dtype))
    for name, a, b in zip("qkv", grads, ref_grads, strict=True):
        _close(a, b, dtype, device, f"d{name}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["softmax", "rbf", "laplacian", "cosine"])
def test_additive_attn_mask(rng, device, kernel, dtype):
    """A float ``attn_mask`` is added to the log-weights (``-inf`` hides a key), as in SDPA."""
    q, k, v, _ = (x.to(dtype).double() for x in _inputs(rng, kernel, H))
    bias = torch.as_tensor(rng.standard_normal((1, H, L, L))).to(dtype).double()
    bias = bias.masked_fill(torch.as_tensor(rng.random((1, H, L, L)) < 0.3), -math.inf)
    bias[..., 0] = 0.0
    s = _weights(kernel, q, k) + bias
    ref = torch.softmax(s, -1) @ v
    out = kernel_attention(*(x.to(device, dtype) for x in (q, k, v)), kernel, scale=SCALE,
                           attn_mask=bias.to(device, dtype))
    _close(out, ref, dtype, device, "output")


# -- KernelAttention inside torch's own transformer layer -------------------------------------
def _swap(layer: nn.TransformerEncoderLayer) -> nn.TransformerEncoderLayer:
    import copy

    swapped = copy.deepcopy(layer)
    swapped.self_attn = KernelAttention.from_multihead(layer.self_attn)
    return swapped


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_swapped_into_encoder_layer_equals_multihead_attention(rng, device, mode):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(E, 4, dim_feedforward=32, dropout=0.0,
                                       batch_first=True).to(device)
    swapped = _swap(layer)
    assert isinstance(swapped.self_attn, KernelAttention)
    assert next(swapped.parameters()).device.type == device.type
    x = torch.as_tensor(rng.standard_normal((3, 10, E)), dtype=torch.float32).to(device)
    pad = torch.zeros(3, 10, dtype=torch.bool, device=device)
    pad[1, 7:] = True
    pad[2, 9:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(10, device=device)
    for m in (layer, swapped):
        m.train(mode == "train")
    for kw in ({"src_key_padding_mask": pad}, {"src_mask": causal, "is_causal": True}):
        want = layer(x, **kw)
        got = swapped(x, **kw)
        assert got.device.type == device.type and bool(torch.isfinite(got).all())
        # float32 through a layer norm and two projections: the same bound as test_dropin's
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
        got.square().sum().backward()
        grads = [p.grad.clone() for p in swapped.parameters()]
        want.square().sum().backward()
        for a, b in zip(grads, (p.grad for p in layer.parameters()), strict=True):
            assert a.device.type == device.type and bool(torch.isfinite(a).all())
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
        for m in (layer, swapped):
            m.zero_grad()


# -- torch.compile ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["softmax", "rbf"])
def test_compiles_without_graph_breaks(rng, device, kernel):
    """``fullgraph=True`` raises at a graph break. Oracle: the naive float64 formula.

    The scale is one no other test uses, so the kernel for it is built inside the
    compiled function (building a kernel module there once broke the graph).
    """
    scale = {"cpu": 0.3, "cuda": 0.35}[device.type]
    torch._dynamo.reset()
    q, k, v, g = (x.float().double() for x in _inputs(rng, kernel, H))
    q, k, v, g = (x[:1, :2, :8] for x in (q, k, v, g))
    visible = torch.ones(1, 2, 8, 8, dtype=torch.bool).tril()
    ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
    ref = naive(kernel, *ref_in, visible, scale)
    ref_grads = torch.autograd.grad(ref, ref_in, g)

    def f(q, k, v):
        return kernel_attention(q, k, v, kernel, scale=scale, is_causal=True)

    # the code generator where it matters (Triton on CUDA); on the CPU, where inductor's C++
    # build takes ten seconds a kernel, the traced graph and its backward (aot_eager)
    backend = "inductor" if device.type == "cuda" else "aot_eager"
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    ins = [x.to(device, torch.float32).requires_grad_() for x in (q, k, v)]
    try:
        out = compiled(*ins)
        grads = torch.autograd.grad(out, ins, g.to(device, torch.float32))
    finally:
        torch._dynamo.reset()
    _close(out, ref, torch.float32, device, "output")
    for a, b in zip(grads, ref_grads, strict=True):
        _close(a, b, torch.float32, device, "gradient")
