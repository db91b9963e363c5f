"""smooth() on Dask arrays equals smooth() in memory (the float64 dense engine)."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import kernels as K

from .conftest import as_dask, compute, da

COMBOS = [c for c in itertools.product([False, True], repeat=3) if any(c)]


def _data(rng: np.random.Generator, m: int = 37, n: int = 101, d: int = 2, p: int = 3,
          dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = rng.uniform(-1, 1, (m, d)).astype(dtype)
    k = rng.uniform(-1, 1, (n, d)).astype(dtype)
    v = rng.normal(size=(n, p)).astype(dtype)
    return q, k, v


def _close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-12) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("which", COMBOS, ids=lambda c: "".join("DN"[not x] for x in c))
def test_every_combination_of_dask_and_numpy_inputs_equals_numpy(rng, which) -> None:
    q, k, v = _data(rng)
    args = [as_dask(a, c) if lazy else a for a, lazy, c in zip((q, k, v), which, (10, 17, 23),
                                                              strict=True)]
    out = nadaraya.smooth(*args, bandwidth=0.4)
    assert isinstance(out, da.Array)
    _close(compute(out), nadaraya.smooth(q, k, v, bandwidth=0.4, engine="dense"))


@pytest.mark.parametrize("kernel, bandwidth", [
    ("gaussian", 0.3), ("laplacian", 0.2), ("epanechnikov", 0.5), ("cauchy", 0.3),
    ("softmax", None), (K.Gaussian(0.3) * K.Laplacian(0.5), None), ("linear", None),
])
def test_kernels_and_their_engines_match_memory(rng, kernel, bandwidth) -> None:
    q, k, v = _data(rng, d=1)
    if kernel == "linear":
        q, k = q + 2.0, k + 2.0  # positive weights, no zero row sum
    out = compute(nadaraya.smooth(as_dask(q, 9), as_dask(k, 13), as_dask(v, 13), kernel,
                                  bandwidth=bandwidth))
    _close(out, nadaraya.smooth(q, k, v, kernel, bandwidth=bandwidth, engine="dense"))


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_bandwidth_rules_are_computed_over_all_keys(rng, rule) -> None:
    q, k, v = _data(rng)
    out = compute(nadaraya.smooth(q, as_dask(k, 11), v, bandwidth=rule))
    _close(out, nadaraya.smooth(q, k, v, bandwidth=rule, engine="dense"))


def test_lse_and_unnormalized_sums(rng) -> None:
    q, k, v = _data(rng)
    out, lse = nadaraya.smooth(as_dask(q, 5), as_dask(k, 30), v, bandwidth=0.3,
                               return_lse=True)
    want, want_lse = nadaraya.smooth(q, k, v, bandwidth=0.3, return_lse=True, engine="dense")
    got, got_lse = compute(out, lse)
    _close(got, want)
    _close(got_lse, want_lse)
    raw = compute(nadaraya.smooth(as_dask(q, 5), as_dask(k, 30), v, bandwidth=0.3,
                                  normalize=False))
    _close(raw, nadaraya.smooth(q, k, v, bandwidth=0.3, normalize=False, engine="dense"))


def test_float32_values_give_float32_within_the_float32_error(rng) -> None:
    q, k, v = _data(rng, dtype=np.float32)
    got = compute(nadaraya.smooth(as_dask(q, 8), as_dask(k, 25), as_dask(v, 25), bandwidth=0.3))
    want = nadaraya.smooth(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                           bandwidth=0.3, engine="dense")
    same = nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dense")
    assert got.dtype == np.float32
    err, ref_err = np.abs(got - want).max(), np.abs(same - want).max()
    assert err <= 16 * max(ref_err, np.finfo(np.float32).eps * np.abs(want).max())


def test_one_dimensional_values_give_one_dimensional_results(rng) -> None:
    q, k, v = _data(rng, d=1, p=1)
    out = nadaraya.smooth(as_dask(q[:, 0], 7), as_dask(k[:, 0], 20), as_dask(v[:, 0], 20),
                          bandwidth=0.3)
    assert out.ndim == 1
    _close(compute(out), nadaraya.smooth(q[:, 0], k[:, 0], v[:, 0], bandwidth=0.3,
                                         engine="dense"))


def test_values_near_the_largest_float_are_scaled_over_all_chunks(rng) -> None:
    q, k, v = _data(rng)
    v = v * 1e307
    v[5] = 1.7e308  # the largest magnitude in one chunk only
    got = compute(nadaraya.smooth(q, as_dask(k, 10), as_dask(v, 10), bandwidth=0.3))
    _close(got, nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dense"))


def test_nothing_is_computed_until_asked(rng) -> None:
    q, k, v = _data(rng)
    calls = []

    def loaded(block: np.ndarray) -> np.ndarray:
        calls.append(block.shape)
        return block

    lazy_keys = as_dask(k, 20).map_blocks(loaded, dtype=k.dtype, meta=np.empty((0, 0)))
    out = nadaraya.smooth(as_dask(q, 10), lazy_keys, as_dask(v, 20), bandwidth="scott")
    nadaraya.explain(as_dask(q, 10), as_dask(k, 20), as_dask(v, 20), bandwidth=0.3)
    assert calls == []
    compute(out)
    assert calls


def test_engine_dask_on_memory_inputs_returns_the_callers_kind(rng) -> None:
    q, k, v = _data(rng)
    with nadaraya.config_context(working_memory=0.01):  # a few chunks
        out = nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dask")
    assert isinstance(out, np.ndarray)
    _close(out, nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dense"))
    t = nadaraya.smooth(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                        bandwidth=0.3, engine="dask")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float64


@pytest.mark.parametrize("engine", ["streamed", "dense", "compiled"])
def test_the_block_engine_can_be_forced(rng, engine) -> None:
    q, k, v = _data(rng)
    out = compute(nadaraya.smooth(as_dask(q, 10), as_dask(k, 30), v, bandwidth=0.3,
                                  engine=engine))
    _close(out, nadaraya.smooth(q, k, v, bandwidth=0.3, engine="dense"))
    why = nadaraya.explain(as_dask(q, 10), as_dask(k, 30), v, bandwidth=0.3, engine=engine)
    assert why.detail["block_engine"].startswith(engine)


def test_unknown_block_engine_is_refused_by_name(rng) -> None:
    q, k, v = _data(rng)
    with pytest.raises(nadaraya.NadarayaError, match="engine"):
        nadaraya.smooth(as_dask(q, 10), k, v, engine="warp")


def test_memory_inputs_do_not_import_dask() -> None:
    import subprocess

    code = ("import numpy as np, nadaraya, sys; x = np.linspace(0, 1, 9); "
            "nadaraya.smooth(x, x, x, bandwidth=0.2); nadaraya.explain(x, x, x); "
            "print('dask' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_a_rule_over_constant_keys_is_refused_when_computed(rng) -> None:
    q, k, v = _data(rng)
    k[:, 1] = 2.0
    out = nadaraya.smooth(as_dask(q, 10), as_dask(k, 20), v, bandwidth="silverman")
    with pytest.raises(nadaraya.NadarayaError, match=r"feature\(s\) \[1\].*bandwidth as a number"):
        compute(out)
