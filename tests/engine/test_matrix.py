"""Every engine x kernel x mask x dtype against the float64 dense result and a
double loop written from the formula."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

import nadaraya
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine import ENGINES

from ._oracles import (
    EPS32,
    FLOAT32_FACTOR,
    kernel_cases,
    mask_cases,
    naive_smooth,
    rel_err,
    skip_unless_runs,
    tiny_problem,
)

KERNELS = {c.id: c for c in kernel_cases()}
MASKS = {c.id: c for c in mask_cases()}

# The default run crosses every kernel with these masks and every mask with
# these kernels; the rest of the full product is marked slow.
_EVERY_KERNEL_WITH = {"none", "causal-offset-1", "knearest|sparse", "radius&loo"}
_EVERY_MASK_WITH = {"gaussian-scalar", "uniform-scalar", "tricube-metric", "softmax-default",
                    "product-compact", "callable-log"}


def _pairs() -> list[object]:
    out = []
    for kid in KERNELS:
        for mid in MASKS:
            fast = kid in _EVERY_MASK_WITH or mid in _EVERY_KERNEL_WITH
            marks = () if fast else (pytest.mark.slow,)
            out.append(pytest.param(kid, mid, marks=marks, id=f"{kid}-{mid}"))
    return out


@functools.cache
def _problem(dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(a.astype(dtype) for a in tiny_problem())  # type: ignore[return-value]


@functools.cache
def _reference(kernel_id: str, mask_id: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Float64 dense result and the double loop, on the (rounded) inputs."""
    q, k, v = (a.astype(np.float64) for a in _problem(dtype))
    kc, mc = KERNELS[kernel_id], MASKS[mask_id]
    dense = nadaraya.smooth(q, k, v, kc.kernel, mc.make(q, k), bandwidth=kc.bandwidth,
                            engine="dense", empty="nan")
    loop = naive_smooth(q, k, v, kc.logk, mc.visible(q, k))
    return dense, loop


@functools.cache
def _dense32_error(kernel_id: str, mask_id: str) -> float:
    q, k, v = _problem("float32")
    kc, mc = KERNELS[kernel_id], MASKS[mask_id]
    out = nadaraya.smooth(q, k, v, kc.kernel, mc.make(q, k), bandwidth=kc.bandwidth,
                          engine="dense", empty="nan")
    return rel_err(out, _reference(kernel_id, mask_id, "float32")[0])


@pytest.mark.parametrize("mask_id", list(MASKS))
@pytest.mark.parametrize("kernel_id", list(KERNELS))
def test_dense_float64_equals_double_loop(kernel_id: str, mask_id: str) -> None:
    dense, loop = _reference(kernel_id, mask_id, "float64")
    assert rel_err(dense, loop) <= 1e-12
    assert np.isfinite(loop).any()


@pytest.mark.parametrize(("kernel_id", "mask_id"), _pairs())
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_matches_dense_and_loop(engine: str, kernel_id: str, mask_id: str) -> None:
    kc, mc = KERNELS[kernel_id], MASKS[mask_id]
    for dtype in ("float64", "float32"):
        q, k, v = _problem(dtype)
        mask = mc.make(q, k)
        skip_unless_runs(engine, q, k, v, kc.kernel, mask, bandwidth=kc.bandwidth)
        out = nadaraya.smooth(q, k, v, kc.kernel, mask, bandwidth=kc.bandwidth, engine=engine,
                              empty="nan")
        assert isinstance(out, np.ndarray)
        assert out.dtype == np.dtype(dtype)
        assert out.shape == (len(q), v.shape[1])
        dense, loop = _reference(kernel_id, mask_id, dtype)
        if dtype == "float64":
            assert rel_err(out, dense) <= 1e-12
            assert rel_err(out, loop) <= 1e-12
        else:
            # C = FLOAT32_FACTOR times the float32 dense error (or eps32).
            bound = FLOAT32_FACTOR * max(_dense32_error(kernel_id, mask_id), EPS32)
            assert rel_err(out, dense) <= bound
            assert rel_err(out, loop) <= bound + 1e-12


# A sparse problem: many keys, compact kernels and sparse masks, where an
# engine that visits only the neighbours of each query takes over.
_SPARSE_KERNELS = {
    "epanechnikov": ("epanechnikov", 0.06),
    "tricube-vector": (K.Tricube([0.05, 0.08]), None),
    "uniform": ("uniform", 0.05),
    "gaussian": ("gaussian", 0.03),
    "laplacian-metric": ("laplacian", np.array([[20.0, 5.0], [0.0, 30.0]])),
    "product": (K.Epanechnikov(0.07).on([0]) * K.Uniform(0.05).on([1]), None),
    "softmax": ("softmax", None),
}
_SPARSE_MASKS = {
    "none": lambda: None,
    "knearest": lambda: M.KNearest(5),
    "radius": lambda: M.Radius(0.08),
    "sparse": lambda: _sparse_matrix(),
    "knearest&causal": lambda: M.KNearest(4) & M.Causal(offset=200),
    "radius&loo": lambda: M.Radius(0.1) & M.LeaveOneOut(),
    "knearest|sparse": lambda: M.KNearest(3) | M.MatrixMask(_sparse_matrix()),
}


def _sparse_problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.random((30, 2)), rng.random((250, 2)), rng.standard_normal((250, 3))


def _sparse_matrix() -> sp.csr_matrix:
    return sp.random(30, 250, density=0.03, format="csr", random_state=2)


@pytest.mark.parametrize("mask_id", list(_SPARSE_MASKS))
@pytest.mark.parametrize("kernel_id", list(_SPARSE_KERNELS))
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_matches_dense_on_a_sparse_problem(engine: str, kernel_id: str,
                                                  mask_id: str) -> None:
    kernel, bandwidth = _SPARSE_KERNELS[kernel_id]
    q, k, v = _sparse_problem()
    mask = _SPARSE_MASKS[mask_id]()
    skip_unless_runs(engine, q, k, v, kernel, mask, bandwidth=bandwidth)
    for empty in ("nan", "nearest"):
        out = nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bandwidth, engine=engine,
                              empty=empty)
        ref = nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bandwidth, engine="dense",
                              empty=empty)
        assert rel_err(out, ref) <= 1e-12, empty
    q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
    out = nadaraya.smooth(q32, k32, v32, kernel, mask, bandwidth=bandwidth, engine=engine,
                          empty="nan")
    ref = nadaraya.smooth(*(a.astype(np.float64) for a in (q32, k32, v32)), kernel, mask,
                          bandwidth=bandwidth, engine="dense", empty="nan")
    dense = nadaraya.smooth(q32, k32, v32, kernel, mask, bandwidth=bandwidth, engine="dense",
                            empty="nan")
    assert rel_err(out, ref) <= FLOAT32_FACTOR * max(rel_err(dense, ref), EPS32)
