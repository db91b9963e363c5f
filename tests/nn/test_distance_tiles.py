"""The distance engine's tiles and worker blocks against the float64 dense engine.

Tiles are made a few scores large, so that every problem spans several
tiles, or several problems share one, and a single problem's rows are split
among worker blocks (whose keys' gradients are summed afterwards); two torch
threads, so that the blocks run in worker threads. Oracles: the float64
dense engine (``engine="dense"``) and the naive formula from differences.
"""

from __future__ import annotations

import math

import pytest
import torch

from nadaraya.engine.batched import _tiling
from nadaraya.masks import KNearest, Window
from nadaraya.nn.functional import kernel_attention

from ._helpers import grads as _grads
from ._helpers import naive_laplacian as _naive
from ._helpers import normal as _t
from ._helpers import tied_points


@pytest.fixture(params=[24, 200])
def small_tiles(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Tiles of 24 scores (a few rows of one problem) or 200 (every row of two 13 x 7
    problems), two torch threads (restored afterwards)."""
    monkeypatch.setattr(_tiling, "_TILE", request.param)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)





def test_blocks_cover_every_tile_once():
    for problems, m, n in [(6, 9, 4), (1, 40, 3), (2, 5, 30), (3, 1, 1)]:
        tiles = _tiling._tiles(problems, m, n, 4)
        seen = [(ps.start, ps.stop, rows.start, rows.stop)
                for block in _tiling._blocks(tiles) for ps, rows_list, _ in block
                for rows in rows_list]
        assert sorted(seen) == sorted((ps.start, ps.stop, r.start, r.stop) for ps, r in tiles)
        cells = torch.zeros(problems, m, dtype=torch.int64)
        for ps, rows in tiles:
            cells[ps, rows] += 1
        assert bool((cells == 1).all())
        for block in _tiling._blocks(tiles):
            for ps, rows_list, own in block:
                whole = [r for p, r in tiles if p == ps]
                assert own == (rows_list == whole)
    assert _tiling._tiles(3, 5, 0, 4) == []


@pytest.mark.parametrize("lead", [(2, 3), (), (1,)])
@pytest.mark.parametrize("which", ["none", "bias", "causal", "window", "knearest"])
def test_small_tiles_match_the_dense_engine(rng, small_tiles, lead, which):
    # (): one problem, its rows split among blocks; (2, 3): several problems per block
    m, n = 13, 7
    q, k = _t(rng, *lead, m, 5), _t(rng, *lead, n, 5)
    v, g = _t(rng, *lead, n, 3), _t(rng, *lead, m, 3)
    k[..., 0, :] = q[..., 2, :]  # a key equal to a query: distance 0
    kwargs: dict = {}
    if which == "bias":
        kwargs["attn_mask"] = _t(rng, m, n).requires_grad_()
    elif which == "causal":
        kwargs["is_causal"] = True
    elif which == "window":
        kwargs["mask"] = Window(2)
    elif which == "knearest":  # reads the points: one binding per problem
        kwargs["mask"] = KNearest(3)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*inputs, "laplacian", scale=0.5, engine="distance", **kwargs)
    dense = kernel_attention(*inputs, "laplacian", scale=0.5, engine="dense", **kwargs)
    torch.testing.assert_close(out, dense, atol=1e-13, rtol=1e-12)
    extra = [kwargs["attn_mask"]] if which == "bias" else []
    for a, b in zip(_grads(out, inputs + extra, g), _grads(dense, inputs + extra, g),
                    strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_small_tiles_float32_tied_and_far_points(rng, small_tiles):
    # keys equal to queries (tied projections), keys a hair from them, and a problem
    # whose points lie far from each other (weights that underflow to 0 but one)
    q, k = tied_points(rng, (2, 2), 12, 6, 30.0)
    q[1, 1] = 1e3 * _t(rng, 12, 6, dtype=torch.float32)
    k[1, 1] = 1e3 * _t(rng, 36, 6, dtype=torch.float32)
    v = _t(rng, 2, 2, 36, 3, dtype=torch.float32)
    g = _t(rng, 2, 2, 12, 3, dtype=torch.float32)
    single = [t.clone().requires_grad_() for t in (q, k, v)]
    double = [t.double().requires_grad_() for t in (q, k, v)]
    out = kernel_attention(*single, "laplacian", engine="distance")
    ref = kernel_attention(*double, "laplacian", engine="dense")
    naive = _naive(*double, 6**0.25)  # scale 1 / sqrt(6): bandwidth 6 ** (1 / 4)
    torch.testing.assert_close(ref, naive, atol=1e-12, rtol=1e-10)
    plain = [t.detach().clone().requires_grad_() for t in single]
    dense = kernel_attention(*plain, "laplacian", engine="dense")
    dense_error = float((dense.double() - ref).detach().abs().max())
    err = float((out.double() - ref).detach().abs().max())
    assert err <= 8 * max(dense_error, 8 * torch.finfo(torch.float32).eps), (err, dense_error)
    for a, b, c in zip(_grads(out, single, g), _grads(ref, double, g.double()),
                       _grads(dense, plain, g), strict=True):
        floor = 8 * torch.finfo(torch.float32).eps * float(b.abs().max())
        dense_error = float((c.double() - b).abs().max())
        err = float((a.double() - b).abs().max())
        assert math.isfinite(err) and err <= 8 * max(dense_error, floor), (err, dense_error)


def test_small_tiles_every_point_equal(small_tiles):
    # every distance 0: weights all equal, gradients of q and k 0 (the convention at r = 0)
    q = torch.zeros(1, 3, 9, 4, requires_grad=True)
    k = torch.zeros(1, 3, 5, 4, requires_grad=True)
    v = torch.arange(15.0).reshape(1, 3, 5, 1).requires_grad_()
    out = kernel_attention(q, k, v, "laplacian", engine="distance")
    torch.testing.assert_close(out, v.mean(-2, keepdim=True).expand(1, 3, 9, 1).detach())
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    assert bool((gq == 0).all() and (gk == 0).all())
    torch.testing.assert_close(gv, torch.full_like(gv, 9 / 5))


def test_one_thread_and_two_agree(rng):
    q, k, v = _t(rng, 3, 2, 40, 8), _t(rng, 3, 2, 50, 8), _t(rng, 3, 2, 50, 4)
    g = _t(rng, 3, 2, 40, 4)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            inputs = [t.clone().requires_grad_() for t in (q, k, v)]
            out = kernel_attention(*inputs, "laplacian", engine="distance")
            results.append((out, *_grads(out, inputs, g)))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, atol=1e-14, rtol=1e-13)
