"""The sweep engine in the dispatcher, its refusals, threads, instruction sets and parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine import native
from nadaraya.engine.sweep import worth_it
from nadaraya.engine.sweep._native import load, pointer
from nadaraya.engine.sweep._order import sort_order

from . import test_exp, test_window
from ._helpers import EXP, WINDOW, any_size, need_native, skip_without_extended

ROOT = Path(__file__).resolve().parents[3]
ALL = [*EXP, *WINDOW]


def _problem(n: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    keys = rng.uniform(0, 6, n)
    return rng.uniform(0, 6, m), keys, 2 * np.sin(keys) + rng.standard_normal(n)


@pytest.mark.parametrize("kernel", ALL)
def test_chosen_for_large_one_dimensional_problems(kernel: str,
                                                   rng: np.random.Generator) -> None:
    need_native()
    q, k, v = _problem(3000, 3000, rng)
    assert worth_it(3000, 3000)
    why = nadaraya.explain(q, k, v, kernel, bandwidth=0.3)
    assert why.engine == "sweep"
    assert why.reasons["sweep"].startswith("chosen")
    assert "sweep" in str(why)


def test_not_chosen_for_small_problems(rng: np.random.Generator) -> None:
    need_native()
    q, k, v = _problem(200, 200, rng)
    why = nadaraya.explain(q, k, v, "laplacian", bandwidth=0.3)
    assert why.engine != "sweep"
    assert "summing every pair is as fast" in why.reasons["sweep"]
    with pytest.raises(NadarayaError, match="engine='sweep' cannot run this problem"):
        nadaraya.smooth(q, k, v, "laplacian", bandwidth=0.3, engine="sweep")
    assert not worth_it(1, 10**5) and worth_it(10**4, 10**4)


@pytest.mark.parametrize(("kernel", "mask", "points", "reason"), [
    ("gaussian", None, 1, "is not one it sums exactly"),
    (K.Laplacian(0.3) * K.Epanechnikov(0.5), None, 1, "is not one it sums exactly"),
    ("laplacian", None, 2, "sees 2 features"),
    ("epanechnikov", M.Causal(), 1, "a mask hides keys"),
], ids=["gaussian", "product", "two-features", "mask"])
def test_refusals_name_the_reason(kernel, mask, points, reason,  # type: ignore[no-untyped-def]
                                  rng: np.random.Generator) -> None:
    q, k = rng.uniform(0, 6, (2000, points)), rng.uniform(0, 6, (2000, points))
    v = rng.standard_normal(2000)
    with any_size():
        why = nadaraya.explain(q, k, v, kernel, mask, bandwidth=None if
                               isinstance(kernel, K.Kernel) else 0.3)
    assert reason in why.reasons["sweep"]
    assert why.engine != "sweep"


def test_refuses_gradients(rng: np.random.Generator) -> None:
    q, k, v = (torch.tensor(a) for a in _problem(2000, 2000, rng))
    q.requires_grad_(True)
    with any_size():
        why = nadaraya.explain(q, k, v, "laplacian", bandwidth=0.3)
    assert "require grad" in why.reasons["sweep"]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **env})


def test_native_off_refuses_and_smooth_still_works() -> None:
    code = (
        "import json, numpy as np, nadaraya\n"
        "x = np.linspace(0, 6, 3000); y = np.sin(x)\n"
        "e = nadaraya.explain(x, x, y, 'laplacian', bandwidth=0.3)\n"
        "out = nadaraya.smooth(x, x, y, 'laplacian', bandwidth=0.3)\n"
        "print(json.dumps([e.engine, e.reasons['sweep'], bool(np.isfinite(out).all())]))\n"
    )
    done = _python(code, NADARAYA_NATIVE="0")
    assert done.returncode == 0, done.stderr
    engine, reason, finite = json.loads(done.stdout.strip().splitlines()[-1])
    assert engine != "sweep" and "NADARAYA_NATIVE=0" in reason and finite


@pytest.mark.parametrize("isa", ["avx2", "generic"])
def test_every_instruction_set_within_the_bounds(isa: str) -> None:
    """The compiled loops built for a lower instruction set (as on other CPUs) run the
    checks of ``test_exp`` and ``test_window``."""
    need_native()
    if isa == "avx2" and native.instruction_set() == "generic":
        pytest.skip("this CPU has no AVX2")
    code = (
        "import numpy as np\n"
        "from nadaraya.engine.native import instruction_set\n"
        "from tests.engine.sweep import test_exp, test_window\n"
        f"assert instruction_set() == {isa!r}\n"
        "rng = np.random.default_rng(5)\n"
        "keys = np.concatenate([rng.uniform(0, 6, 800), [1e3]])\n"
        "q = np.concatenate([rng.uniform(-1, 7, 80), [-1e4, 2e4]])\n"
        "v = rng.standard_normal((801, 2))\n"
        "for kernel in test_exp.KERNELS:\n"
        "    test_exp.check(kernel, q, keys, v, 0.3, dense=False)\n"
        "for kernel in ('epanechnikov', 'tricube', 'uniform'):\n"
        "    test_window.check(kernel, q, keys, v, 0.3, dense=False)\n"
        "print('ok')\n"
    )
    done = _python(code, NADARAYA_ISA=isa)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


@pytest.mark.parametrize("kernel", ["laplacian", "matern52", "epanechnikov", "tricube"])
def test_threads_split_the_work_within_the_bound(kernel: str,
                                                 rng: np.random.Generator) -> None:
    """Enough points to run in threads: blocks (and, for compact kernels, query ranges)
    side by side, each within the same bound."""
    keys = rng.uniform(0, 6, 70_000)
    queries = np.concatenate([rng.uniform(0, 6, 40), [-50.0, 60.0]])
    values = rng.standard_normal(70_000)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        if kernel in EXP:
            test_exp.check(kernel, queries, keys, values, 0.3)
        else:
            test_window.check(kernel, queries, keys, values, 0.3)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kernel", ALL)
def test_smoothing_the_keys_themselves(kernel: str, rng: np.random.Generator) -> None:
    """Queries equal to the keys (unsorted, with ties) share the keys' sorted order."""
    keys = np.concatenate([rng.uniform(0, 6, 700), np.full(30, 2.0)])
    rng.shuffle(keys)
    values = rng.standard_normal((730, 2))
    (test_exp.check if kernel in EXP else test_window.check)(kernel, keys, keys, values, 0.3)


@pytest.mark.parametrize("wide", [False, True])
def test_sorting_matches_numpy(wide: bool, rng: np.random.Generator) -> None:
    need_native()
    tiny = np.finfo(np.float64).tiny
    x = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-300, 300, 5000),
                        [0.0, -0.0, tiny / 4, -tiny / 4, 1e308, -1e308],
                        np.repeat(rng.standard_normal(20), 50)])
    rng.shuffle(x)
    order = sort_order(x, wide)
    assert order is not None and order.dtype == (np.int64 if wide else np.int32)
    points = x[order]
    np.testing.assert_array_equal(points, np.sort(x))
    np.testing.assert_array_equal(np.sort(order), np.arange(x.size))
    ties = points[1:] == points[:-1]
    assert np.all(order[1:][ties & (points[1:] != 0)] > order[:-1][ties & (
        points[1:] != 0)])  # stable among equal numbers
    assert sort_order(np.sort(x), wide) is None  # sorted input is used as it is


def test_own_exp_within_two_ulp(rng: np.random.Generator) -> None:
    """The sweeps' vectorized exp of non-positive numbers against the C library's exp in
    extended precision: within 2 ulp; 0 below -700."""
    need_native()
    skip_without_extended()
    lib = load("expsweep")
    x = np.concatenate([-rng.uniform(0, 700, 200_000), -rng.uniform(0, 1e-3, 1000),
                        [0.0, -0.0, -1e-300, -0.5 * np.log(2), -700.0, -700.5, -1e5, -np.inf]])
    out = np.empty_like(x)
    lib.nadaraya_exp_neg(x.size, pointer(x), pointer(out))
    exact = np.exp(x.astype(np.longdouble))
    kept = x >= -700
    ulp = np.spacing(exact[kept].astype(np.float64))
    assert np.all(np.abs(out[kept] - exact[kept]) <= 2 * ulp)
    assert np.all(out[~kept] == 0.0)
    assert out[x == 0.0].tolist() == [1.0, 1.0]
