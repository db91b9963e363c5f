"""The batched engine's distance path (Laplacian attention by matrix products) against oracles.

Oracles: the float64 dense engine (``engine="dense"``), the naive formula
``softmax(-||q - k|| / h) v`` from differences written here, and
``torch.autograd.gradcheck`` on the engine's own autograd function.
"""

from __future__ import annotations

import math

import pytest
import torch

from nadaraya.engine.batched._distance import smooth_distance
from nadaraya.masks import Window
from nadaraya.nn.functional import explain_attention, kernel_attention

from ._helpers import grads as _grads
from ._helpers import naive_laplacian as _naive
from ._helpers import normal as _t
from ._helpers import tied_points


def test_laplacian_chooses_the_distance_engine(rng):
    q, k, v = _t(rng, 2, 3, 6, 8), _t(rng, 2, 3, 7, 8), _t(rng, 2, 3, 7, 5)
    reasons = explain_attention(q, k, v, "laplacian")
    assert reasons["distance"] == "chosen"
    assert "not -||q - k||" in explain_attention(q, k, v, "rbf", is_causal=True)["distance"] \
        or explain_attention(q, k, v, "rbf")["fused"] == "chosen"
    assert "not -||q - k||" in explain_attention(q, k, v, "polynomial")["distance"]


@pytest.mark.parametrize("which", ["none", "causal", "bias", "window"])
def test_matches_the_naive_formula_and_the_dense_engine(rng, which):
    q, k, v = _t(rng, 2, 3, 9, 6), _t(rng, 2, 3, 11, 6), _t(rng, 2, 3, 11, 4)
    g = _t(rng, 2, 3, 9, 4)
    kwargs: dict = {}
    bias = None
    if which == "causal":
        kwargs["is_causal"] = True
        bias = torch.zeros(9, 11, dtype=torch.float64).masked_fill(
            torch.ones(9, 11, dtype=torch.bool).triu(1), -math.inf)
    elif which == "bias":
        bias = _t(rng, 9, 11)
        kwargs["attn_mask"] = bias
    elif which == "window":
        kwargs["mask"] = Window(2)
        i, j = torch.arange(9)[:, None], torch.arange(11)[None, :]
        bias = torch.zeros(9, 11, dtype=torch.float64).masked_fill((i - j).abs() > 2, -math.inf)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*inputs, "laplacian", scale=0.5, engine="distance", **kwargs)
    dense = kernel_attention(*inputs, "laplacian", scale=0.5, engine="dense", **kwargs)
    naive = _naive(*inputs, 0.5**-0.5, bias)
    torch.testing.assert_close(out, naive, atol=1e-13, rtol=1e-12)
    torch.testing.assert_close(out, dense, atol=1e-13, rtol=1e-12)
    for a, b in zip(_grads(out, inputs, g), _grads(naive, inputs, g), strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("bias", [False, True])
def test_gradcheck(rng, bias):
    q, k, v = _t(rng, 2, 4, 3), _t(rng, 2, 5, 3), _t(rng, 2, 5, 2)
    b = _t(rng, 4, 5) if bias else None
    inputs = [t.requires_grad_() for t in (q, k, v)] + ([b.requires_grad_()] if bias else [])

    def f(*args):
        return smooth_distance(args[0], args[1], args[2],
                               bias=args[3] if len(args) > 3 else None)[0]

    assert torch.autograd.gradcheck(f, tuple(inputs))


def test_close_and_equal_points_keep_their_digits(rng):
    # keys equal to queries (tied projections) and keys a hair from them: the product
    # form alone would lose about half the digits of these distances in float32
    q, k = tied_points(rng, (1, 2), 16, 8, 40.0)
    v = _t(rng, 1, 2, 48, 3, dtype=torch.float32)
    g = _t(rng, 1, 2, 16, 3, dtype=torch.float32)
    single = [t.clone().requires_grad_() for t in (q, k, v)]
    double = [t.double().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*single, "laplacian", engine="distance")
    ref = kernel_attention(*double, "laplacian", engine="dense")
    same = kernel_attention(*[t.detach() for t in single], "laplacian", engine="dense")
    dense_error = float((same.double() - ref.detach()).abs().max())
    err = float((out.double() - ref).detach().abs().max())
    assert err <= 8 * max(dense_error, 8 * torch.finfo(torch.float32).eps), (err, dense_error)
    plain = [t.detach().clone().requires_grad_() for t in single]
    dense = kernel_attention(*plain, "laplacian", engine="dense")
    got = _grads(out, single, g)
    want = _grads(ref, double, g.double())
    for a, b, c in zip(got, want, _grads(dense, plain, g), strict=True):
        floor = 8 * torch.finfo(torch.float32).eps * float(b.abs().max())
        dense_error = float((c.double() - b).abs().max())
        err = float((a.double() - b).abs().max())
        assert err <= 8 * max(dense_error, floor), (err, dense_error, floor)


def test_every_point_equal_has_finite_gradients(rng):
    q = torch.zeros(1, 1, 3, 4, requires_grad=True)
    k = torch.zeros(1, 1, 5, 4, requires_grad=True)
    v = _t(rng, 1, 1, 5, 2, dtype=torch.float32).requires_grad_()
    out = kernel_attention(q, k, v, "laplacian", engine="distance")
    torch.testing.assert_close(out, v.mean(-2, keepdim=True).expand(1, 1, 3, 2).detach())
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    assert bool(torch.isfinite(gq).all() and torch.isfinite(gk).all())
    torch.testing.assert_close(gv, torch.full_like(gv, 3 / 5))


@pytest.mark.parametrize("magnitude", [1e-30, 1e15])
def test_tiny_and_huge_points(rng, magnitude):
    # the squares of 1e-30 underflow float32 and those of 1e15 would overflow its products
    # with the dimension: points are measured in units of a power of two per problem
    q, k, v = (_t(rng, 1, 2, 5, 4) for _ in range(3))
    ref = _naive(q, k, v, 1.0)
    qs, ks = (magnitude * q).float(), (magnitude * k).float()
    out = kernel_attention(qs, ks, v.float(), "laplacian", scale=magnitude**-2,
                           engine="distance")
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_bfloat16_forward_and_backward(rng):
    q, k, v = (_t(rng, 2, 2, 12, 8, dtype=torch.float32).to(torch.bfloat16) for _ in range(3))
    half = [t.clone().requires_grad_() for t in (q, k, v)]
    single = [t.float().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*half, "laplacian")
    ref = kernel_attention(*single, "laplacian", engine="dense")
    assert out.dtype == torch.bfloat16
    eps = torch.finfo(torch.bfloat16).eps
    assert float((out.float() - ref).abs().max()) <= 8 * eps * float(v.float().abs().max())
    for a, b in zip(_grads(out, half, torch.ones_like(out)),
                    _grads(ref, single, torch.ones_like(ref)), strict=True):
        assert a.dtype == torch.bfloat16
        assert float((a.float() - b).abs().max()) <= 8 * eps * float(b.abs().max())


def test_hostile_inputs(rng):
    q, k, v = _t(rng, 1, 2, 4, 3), _t(rng, 1, 2, 6, 3), _t(rng, 1, 2, 6, 2)
    q[0, 1, 2, 0] = math.nan
    out = kernel_attention(q, k, v, "laplacian", engine="distance")
    # the row of the NaN query is NaN, every other row finite
    assert bool(out[0, 1, 2].isnan().all())
    out[0, 1, 2] = 0.0
    assert bool(torch.isfinite(out).all())
    # no key at all: zero rows (SDPA's convention), or NaN on request
    empty = kernel_attention(q[..., :0, :].clone(), k[..., :0, :], v[..., :0, :],
                             "laplacian", engine="distance")
    assert empty.shape == (1, 2, 0, 2)
    none = kernel_attention(k[..., :4, :], k[..., :0, :], v[..., :0, :], "laplacian",
                            engine="distance")
    assert none.shape == (1, 2, 4, 2) and bool((none == 0).all())
    # one key: its value
    one = kernel_attention(k, k[..., :1, :], v[..., :1, :], "laplacian", engine="distance")
    torch.testing.assert_close(one, v[..., :1, :].expand_as(one))
    # a fully hidden row: zero, or an error on request
    bias = torch.zeros(4, 6, dtype=torch.float64)
    bias[1] = -math.inf
    hidden = kernel_attention(k[..., :4, :], k, v, "laplacian", attn_mask=bias,
                              engine="distance")
    assert bool((hidden[..., 1, :] == 0).all())
    with pytest.raises(ValueError, match="see no key"):
        kernel_attention(k[..., :4, :], k, v, "laplacian", attn_mask=bias, empty="raise",
                         engine="distance")


def test_refuses_what_it_cannot_run(rng):
    q, k, v = _t(rng, 1, 2, 4, 3), _t(rng, 1, 2, 6, 3), _t(rng, 1, 2, 6, 2)
    with pytest.raises(ValueError, match="weights were asked for"):
        kernel_attention(q, k, v, "laplacian", engine="distance", need_weights=True)
    with pytest.raises(ValueError, match="not -"):
        kernel_attention(q, k, v, "polynomial", engine="distance")
    with pytest.raises(ValueError, match="dropout"):
        kernel_attention(q, k, v, "laplacian", engine="distance", dropout_p=0.5)


@pytest.mark.parametrize("lead", [(0, 2), (1, 0)])
def test_empty_batch_runs_forward_and_backward(lead):
    # no problem at all (an empty batch or no heads): an empty output, no error
    q = torch.randn(*lead, 4, 3, requires_grad=True)
    k = torch.randn(*lead, 6, 3, requires_grad=True)
    v = torch.randn(*lead, 6, 2, requires_grad=True)
    out = kernel_attention(q, k, v, "laplacian", engine="distance")
    assert out.shape == (*lead, 4, 2)
    out.sum().backward()
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape
