"""Boxes, window passes and the compiled loops under every instruction set."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nadaraya.engine.fgt._boxes import bin_points, unique_rows
from nadaraya.engine.fgt._hermite import window_weights
from nadaraya.engine.fgt._passes import run_chain, support, window_sets

from ._exact import requires_native

pytestmark = requires_native


@pytest.mark.parametrize("spread", [10.0, 1e13])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_points_land_in_their_boxes(d: int, spread: float, rng: np.random.Generator) -> None:
    # spread 1e13 leaves the counting sort for the comparison sort
    pts = torch.from_numpy(np.concatenate([rng.uniform(-3, 3, (500, d)),
                                           rng.uniform(-spread, spread, (20, d))]))
    for side in (0.375, 1.0, 4.0):
        boxes = bin_points(pts, side)
        assert sorted(boxes.order.tolist()) == list(range(pts.shape[0]))
        coords = boxes.coords.numpy()
        assert all(tuple(a) < tuple(b) for a, b in itertools.pairwise(coords))
        owner = np.repeat(np.arange(boxes.n_boxes), boxes.count.numpy())
        sorted_pts = pts.numpy()[boxes.order.numpy()]
        low = coords[owner] * side
        assert np.all(sorted_pts >= low) and np.all(sorted_pts < low + side)


def test_unique_rows_matches_numpy(rng: np.random.Generator) -> None:
    for big in (False, True):
        rows = rng.integers(-5, 5, (2000, 3))
        if big:
            rows[::3, 0] *= 10**17
        got = unique_rows(torch.from_numpy(rows)).numpy()
        assert np.array_equal(got, np.unique(rows, axis=0))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_window_sums_match_a_double_loop(d: int, rng: np.random.Generator) -> None:
    reach = 2
    sources = np.unique(rng.integers(-6, 6, (40, d)), axis=0)
    targets = np.unique(rng.integers(-8, 8, (30, d)), axis=0)
    weights = rng.uniform(0, 1, (sources.shape[0], 2))
    w1 = window_weights(reach, 0.7, gaussian=True)[:, 0, 0].numpy()
    src, tgt = torch.from_numpy(sources), torch.from_numpy(targets)
    sets = support(src, window_sets(tgt, reach), reach)
    got = run_chain(src, torch.from_numpy(weights), sets, window_weights(reach, 0.7, True), 2)
    want = np.zeros((targets.shape[0], 2))
    for t, c in enumerate(targets):
        for s, b in enumerate(sources):
            o = c - b
            if np.all(np.abs(o) <= reach):
                want[t] += weights[s] * np.prod(w1[o + reach])
    assert np.allclose(got.numpy(), want, rtol=1e-13, atol=0)


_ISA_SCRIPT = """
import numpy as np, torch
from nadaraya.engine import native
from nadaraya.engine.fgt._basis import Basis
from nadaraya.engine.fgt._plan import Params
from nadaraya.engine.fgt._transform import transform
from tests.engine.fgt._exact import check
print(native.instruction_set())
rng = np.random.default_rng(3)
for d in (1, 2):
    k = torch.from_numpy(rng.uniform(0, 4, (700, d)))
    q = torch.from_numpy(rng.uniform(-1, 5, (90, d)))
    v = torch.from_numpy(rng.uniform(-1, 1, (700, 2)))
    for basis, order in (("hermite", 10), ("chebyshev", 9)):
        plan = Params(1.0, basis, order, 6, Basis(basis).factor(1.0, order, d, 6, 700), 0.0)
        for expand in (True, False):
            check(transform(q, k, v, plan, expand).sums, q, k, v)
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_every_instruction_set_keeps_its_bounds(isa: str, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "NADARAYA_ISA": isa, "NADARAYA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _ISA_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [isa, "ok"]
