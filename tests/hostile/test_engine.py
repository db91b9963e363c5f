"""``smooth``, ``weights`` and ``explain`` under hostile input: every engine keeps the contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya.engine import ENGINES
from nadaraya.masks import Causal, KNearest, LeaveOneOut

from ._inputs import (
    NUMERIC_DTYPES,
    REFUSED_DTYPES,
    TORCH_DTYPES,
    as_float64,
    assert_finite,
    call,
    naive_gaussian,
    point_sets,
    poison,
    value_sets,
)

ALL = ("auto", *ENGINES)


def _run(engine: str, q, k, v, h, **kw):
    return call(lambda: nadaraya.smooth(q, k, v, "gaussian", bandwidth=h, engine=engine, **kw),
                names=("engine", "bandwidth", "values"))


def _refusal(outcome) -> bool:
    return outcome.error is not None and "cannot run this problem" in str(outcome.error)


def _matches_naive_in_float64(q, k, v, h) -> None:
    ref = naive_gaussian(q, k, v, h)
    scale = np.abs(v).max(axis=0)
    # 1e-9 of the values' scale, but no finer than float64 resolves: among subnormal values
    # the naive sum and the engine may round a half-unit apart
    atol = max(1e-9 * scale.max(), 2 * np.finfo(np.float64).smallest_subnormal)
    for engine in ALL:
        got = _run(engine, q, k, v, h)
        if _refusal(got) and engine != "auto":
            continue
        assert got.ok, f"engine={engine}: {got.error}"
        out = as_float64(got.value).reshape(ref.shape)
        assert_finite(out, f"engine={engine}")
        np.testing.assert_allclose(out, ref, rtol=0, atol=atol, err_msg=f"engine={engine}")


@given(data=st.data())
def test_any_scale_in_float64_matches_the_naive_sum(data) -> None:
    q, k, h = data.draw(point_sets())
    _matches_naive_in_float64(q, k, data.draw(value_sets(len(k))), h)


def test_subnormal_values_round_within_float64_resolution() -> None:
    # the mean of 2 and -3 units of the smallest subnormal is -1/2 unit: -0.0 when rounded
    # to even, -1 unit by the naive sum of half-weighted values
    tiny = np.finfo(np.float64).smallest_subnormal
    _matches_naive_in_float64(np.zeros((1, 1)), np.zeros((2, 1)),
                              np.array([[2 * tiny], [-3 * tiny]]), 1.0)


@given(data=st.data())
def test_any_scale_in_float32_is_as_good_as_the_dense_float32_sum(data) -> None:
    q, k, h = data.draw(point_sets(dtype="float32"))
    v = data.draw(value_sets(len(k), dtype="float32"))
    ref = naive_gaussian(q, k, v, h)
    scale = float(np.abs(v.astype(np.float64)).max())
    dense = _run("dense", q, k, v, h)
    assert dense.ok, dense.error
    dense_err = float(np.abs(as_float64(dense.value).reshape(ref.shape) - ref).max())
    tol = max(4.0 * dense_err, 1e-5 * scale)
    for engine in ALL:
        got = _run(engine, q, k, v, h)
        if _refusal(got) and engine != "auto":
            continue
        assert got.ok, f"engine={engine}: {got.error}"
        assert got.value.dtype == np.float32
        out = as_float64(got.value).reshape(ref.shape)
        assert_finite(out, f"engine={engine}")
        assert np.abs(out - ref).max() <= tol, f"engine={engine}"


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_every_numeric_numpy_dtype_is_accepted(dtype: str, rng) -> None:
    x = (rng.uniform(0, 6, (15, 2)) * (1 if dtype in ("bool",) else 10)).astype(dtype)
    v = rng.integers(0, 2, 15).astype(dtype)
    out = call(lambda: nadaraya.smooth(x, x, v, bandwidth=3.0))
    assert out.ok, out.error
    assert_finite(out.value, dtype)
    expected = np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.float64)
    assert out.value.dtype == expected
    ref = naive_gaussian(x.astype(np.float64), x.astype(np.float64), v.astype(np.float64), 3.0)
    tol = {"float16": 2e-3, "float32": 1e-5}.get(dtype, 1e-12)
    np.testing.assert_allclose(as_float64(out.value), ref[:, 0], rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_every_torch_dtype_is_accepted_and_returned(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(15, 2, generator=g) * 6).to(dtype)
    v = (torch.rand(15, generator=g) * 2).to(dtype)
    out = call(lambda: nadaraya.smooth(x, x, v, bandwidth=3.0))
    assert out.ok, out.error
    assert isinstance(out.value, torch.Tensor)
    assert out.value.dtype == (dtype if dtype.is_floating_point else torch.float64)
    assert_finite(out.value, str(dtype))
    w = call(lambda: nadaraya.weights(x, x, bandwidth=3.0))
    assert w.ok, w.error
    assert_finite(w.value, str(dtype))


@pytest.mark.parametrize("dtype", REFUSED_DTYPES)
@pytest.mark.parametrize("where", ["queries", "keys", "values"])
def test_non_numeric_dtypes_are_refused_by_name(dtype: str, where: str) -> None:
    x = np.linspace(0, 1, 6)
    args = {"queries": x, "keys": x, "values": x}
    args[where] = np.array([1, 2, 3, 4, 5, 6]).astype(dtype)
    out = call(lambda: nadaraya.smooth(args["queries"], args["keys"], args["values"],
                                       bandwidth=0.5), names=(where,))
    assert not out.ok


@given(data=st.data(), where=st.sampled_from(["queries", "keys", "values"]),
       engine=st.sampled_from(ALL))
def test_nan_and_inf_are_refused_by_name(data, where: str, engine: str) -> None:
    q, k, h = data.draw(point_sets(max_rows=6))
    v = data.draw(value_sets(len(k)))
    args = {"queries": q, "keys": k, "values": v}
    args[where] = poison(data.draw, args[where])
    out = call(lambda: nadaraya.smooth(args["queries"], args["keys"], args["values"],
                                       bandwidth=h, engine=engine), names=(where,))
    assert not out.ok
    w = call(lambda: nadaraya.weights(args["queries"], args["keys"], bandwidth=h),
             names=(where,))
    assert (where == "values") == w.ok


BAD_SHAPES = {
    "empty queries": (np.zeros((0, 2)), np.ones((4, 2)), np.ones(4), "queries"),
    "empty keys": (np.ones((3, 2)), np.zeros((0, 2)), np.zeros(0), "keys"),
    "3-D queries": (np.ones((2, 2, 2)), np.ones((4, 2)), np.ones(4), "queries"),
    "0-D keys": (np.ones((2, 1)), np.float64(1.0), np.ones(1), "keys"),
    "columns differ": (np.ones((3, 3)), np.ones((4, 2)), np.ones(4), "keys"),
    "values rows differ": (np.ones((3, 2)), np.ones((4, 2)), np.ones(5), "values"),
    "3-D values": (np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2, 2)), "values"),
    "ragged list": ([[1.0, 2.0], [3.0]], np.ones((4, 2)), np.ones(4), "queries"),
}


@pytest.mark.parametrize("case", BAD_SHAPES, ids=str)
def test_wrong_shapes_are_refused_by_name(case: str) -> None:
    q, k, v, name = BAD_SHAPES[case]
    out = call(lambda: nadaraya.smooth(q, k, v, bandwidth=1.0), names=(name,))
    assert not out.ok


@pytest.mark.parametrize("bandwidth", [0.0, -1.0, np.nan, np.inf, -np.inf, "wide", [1.0, -1.0],
                                       [1.0, 2.0, 3.0], [[1.0]], True, None, 5e-324, 1e308],
                         ids=repr)
def test_bandwidth_is_a_positive_finite_scale_or_an_error_naming_it(bandwidth) -> None:
    x = np.column_stack([np.linspace(0, 1, 8), np.linspace(1, 0, 8) ** 2])
    out = call(lambda: nadaraya.smooth(x, x, x[:, 0], bandwidth=bandwidth),
               names=("bandwidth",))
    if out.ok:
        assert_finite(out.value, f"bandwidth={bandwidth!r}")


@pytest.mark.parametrize("empty", ["raise", "nan", "nearest"])
@pytest.mark.parametrize("hidden", [True, False], ids=["masked", "unreachable"])
@pytest.mark.parametrize("engine", ALL)
def test_queries_that_see_no_weight_follow_the_empty_policy(empty: str, hidden: bool,
                                                            engine: str) -> None:
    x = np.linspace(0, 1, 9)
    v = np.cos(x)
    q = x.copy()
    visible = np.ones((9, 9), dtype=bool)
    if hidden:
        visible[0] = False  # the mask hides every key from the first query
    else:
        q[0] = 50.0  # the first query lies beyond the compact kernel's reach of every key
    out = call(lambda: nadaraya.smooth(q, x, v, "epanechnikov", visible, bandwidth=0.3,
                                       engine=engine, empty=empty),
               names=("empty", "engine"))
    if _refusal(out):
        return
    if empty == "raise" or (empty == "nearest" and hidden):
        assert not out.ok
        return
    assert out.ok, out.error
    got = as_float64(out.value)
    assert np.isfinite(got[1:]).all()
    if empty == "nan":
        assert np.isnan(got[0])
    else:  # the value of the nearest key
        assert got[0] == v[-1]


@pytest.mark.parametrize("mask", [KNearest(1), KNearest(10_000), LeaveOneOut(), Causal()],
                         ids=repr)
def test_one_row_problems(mask) -> None:
    x, v = np.array([[0.5]]), np.array([2.0])
    out = call(lambda: nadaraya.smooth(x, x, v, "gaussian", mask, bandwidth=1.0),
               names=("mask", "empty"))
    if isinstance(mask, LeaveOneOut):  # the only key is hidden: an empty row
        assert not out.ok
    else:
        assert out.ok, out.error
        np.testing.assert_array_equal(out.value, v)
