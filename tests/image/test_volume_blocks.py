"""Volumes in blocks: the engine cuts a volume along all three axes, every voxel once,
each block read with its halo; a tiny working-memory budget (many blocks) gives the
uncut result bit for bit, and the naive loop's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine.grid import _blocks as _grid_blocks
from nadaraya.engine.grid import blocks, run_blocks
from nadaraya.image import bilateral, non_local_means

from . import _naive


@pytest.mark.parametrize(("shape", "halo", "budget", "outside"),
                         [((12, 13, 14), 2, 500 * 8, 0), ((9, 30, 31), 1, 2000 * 8, 0),
                          ((10, 10, 10), 3, 50 * 8, 2), ((3, 40, 50), 1, 900 * 8, 1),
                          ((6, 7, 8), 0, 1e9, 0), ((2, 5, 6, 7), 1, 300 * 8, 0)])
def test_volume_blocks_cover_every_voxel_once_with_their_halo(
        shape: tuple[int, ...], halo: int, budget: float, outside: int) -> None:
    parts = blocks(shape, halo, 8.0, outside=outside, budget=budget)
    seen = np.zeros(shape, int)
    for b in parts:
        seen[b.own] += 1
        assert b.size == int(np.prod([hi - lo for lo, hi in b.spans]))
        for (lo, hi), (rlo, rhi), n in zip(b.spans, b.read_spans, shape, strict=True):
            grown = (max(lo - halo, 0), min(hi + halo, n))
            assert (rlo, rhi) == (grown[0] - (outside if grown[0] == 0 and len(parts) > 1
                                              else 0),
                                  grown[1] + (outside if grown[1] == n and len(parts) > 1
                                              else 0))
        if len(parts) > 1:
            read = np.prod([hi - lo for lo, hi in b.read_spans])
            assert read * 8.0 <= budget or min(hi - lo for lo, hi in b.spans) <= max(2, halo)
    assert (seen == 1).all()
    assert (len(parts) == 1) == (np.prod(shape) * 8.0 <= budget)


def test_a_cube_budget_cuts_every_axis() -> None:
    parts = blocks((40, 40, 40), 1, 8.0, budget=8.0 * 12**3)
    cut = [len({b.spans[a] for b in parts}) for a in range(3)]
    assert min(cut) > 1, cut


@pytest.mark.parametrize("border", ["reflect", "symmetric", "edge", "wrap"])
def test_a_volume_block_reads_beyond_the_border_through_the_border_mode(border: str) -> None:
    vol = torch.arange(5 * 6 * 7, dtype=torch.float64).reshape(1, 5, 6, 7)
    parts = blocks((5, 6, 7), 1, 8.0, outside=2, budget=40 * 8)
    assert len(parts) > 1
    padded = np.pad(vol[0].numpy(), 2, mode=border)
    mask = np.pad(np.ones((5, 6, 7), bool), 2)
    for b in parts:
        where = tuple(slice(lo + 2, hi + 2) for lo, hi in b.read_spans)
        np.testing.assert_array_equal(b.read(vol, border)[0].numpy(), padded[where])
        inside = b.inside()
        if inside is None:
            assert mask[where].all()
        else:
            np.testing.assert_array_equal(inside.numpy(), mask[where])


def test_run_blocks_fills_a_volume_with_each_blocks_own_voxels() -> None:
    vol = torch.rand(2, 7, 8, 9, dtype=torch.float64)

    def box(b: Any) -> torch.Tensor:  # a 3 x 3 x 3 mean over the region read
        region = torch.nn.functional.pad(b.read(vol)[None], (1,) * 6, mode="replicate")[0]
        return torch.nn.functional.avg_pool3d(region, 3, stride=1)

    whole = run_blocks(box, torch.empty_like(vol), 1, 8.0, ndim=3)
    with nadaraya.config_context(working_memory=200 * 8 / 0.75 / 2**20):
        assert len(blocks(vol.shape[1:], 1, 8.0)) > 1
        tiled = run_blocks(box, torch.empty_like(vol), 1, 8.0, ndim=3)
    assert torch.equal(tiled, whole)


def test_blocks_refuse_a_one_axis_shape() -> None:
    with pytest.raises(NadarayaError, match="shape"):
        blocks((10,), 1, 8.0)


Run = Callable[[Any], Any]
VOLUME_CASES: dict[str, Run] = {
    "bilateral": lambda x: bilateral(x, 0.3, 1.2, 2, channel_axis=None),
    "bilateral-square-wrap": lambda x: bilateral(x, 0.3, 1.2, 1, window="square",
                                                 border="wrap", channel_axis=None),
    "nlm": lambda x: non_local_means(x, 0.3, 3, 2, sigma=0.05, channel_axis=None),
    "nlm-wrap": lambda x: non_local_means(x, 0.3, 3, 1, border="wrap", channel_axis=None),
    "nlm-colour": lambda x: non_local_means(x[..., None].repeat(2, -1) * [1.0, 0.5], 0.3, 3,
                                            1),
}


@pytest.mark.parametrize("name", list(VOLUME_CASES))
@pytest.mark.parametrize("budget", [0.002, 0.02])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_volume_blocks_give_the_whole_volume_result(
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, name: str, budget: float,
        dtype: type) -> None:
    run = VOLUME_CASES[name]
    vol = rng.random((9, 11, 12)).astype(dtype)
    whole = np.asarray(run(vol))
    counts: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> list[Any]:
        parts = blocks(*args, **kwargs)
        counts.append(len(parts))
        return parts

    monkeypatch.setattr(_grid_blocks, "blocks", counted)
    with nadaraya.config_context(working_memory=budget):
        tiled = np.asarray(run(vol))
    assert counts and max(counts) > 1
    assert tiled.dtype == whole.dtype
    np.testing.assert_array_equal(tiled, whole)


def test_tiled_volumes_equal_the_naive_loop(rng: np.random.Generator) -> None:
    vol = rng.random((6, 7, 8))
    with nadaraya.config_context(working_memory=0.002):
        out = bilateral(vol, 0.3, 1.2, 2, channel_axis=None)
        nlm = non_local_means(vol, 0.3, 3, 1, sigma=0.05, channel_axis=None)
    np.testing.assert_allclose(out, _naive.bilateral_volume(vol, 1.2, 0.3, 2, disk=True),
                               rtol=0, atol=1e-14)
    g = np.exp(-(np.arange(3) - 1.0) ** 2 / (2 * 0.5**2))
    g3 = g[:, None, None] * g[None, :, None] * g[None, None, :]
    np.testing.assert_allclose(nlm, _naive.nlm_volume(vol, 0.3, g3, 1, sigma=0.05),
                               rtol=0, atol=1e-13)


_VOLUME_PEAK = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    import nadaraya
    from nadaraya.image import bilateral, non_local_means

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    name, side, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    run = {"nlm": lambda x: non_local_means(x, 0.2, 3, 1, sigma=0.1, channel_axis=None),
           "bilateral": lambda x: bilateral(x, 0.25, 1.0, 1, channel_axis=None)}[name]
    vol = np.random.default_rng(0).random((side // 4, side, side)).astype(np.float32)
    with nadaraya.config_context(working_memory=budget):
        run(vol[:4, :16, :16])
        Path("/proc/self/clear_refs").write_text("5")
        before = status("VmRSS")
        out = run(vol)
    print(json.dumps({"peak": status("VmHWM") - before, "out": out.nbytes}))
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("name", ["nlm", "bilateral"])
def test_volume_peak_memory_follows_the_budget(name: str) -> None:
    # a 24 x 96 x 96 float32 volume (0.84 MiB) with a 0.25 MiB budget: the peak above the
    # baseline, less the output and the float32 copy, stays within twice the budget
    budget = 0.25
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run([sys.executable, "-c", _VOLUME_PEAK, name, "96", str(budget)],
                          capture_output=True, text=True, env=env, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["peak"] - 2 * result["out"] <= 2 * budget * 2**20, result
