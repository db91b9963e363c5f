"""What the engine's front door accepts: containers, dtypes and scales a caller may pass.

Every call here either gives the float64 result of the same numbers (within the
precision of the dtype they were given in) or raises :class:`nadaraya.NadarayaError`
naming the parameter at fault. No TypeError, no ZeroDivisionError, no warning that
``python -W error`` turns into a traceback, no gradient lost to a rounding guard.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya.image import bilateral, kernel_regression, non_local_means, psnr
from nadaraya.image.nlm import patch_weights
from nadaraya.kernels.quadratic import bilateral_kernel, classic_kernel, nlm_kernel

from ..image import _naive
from ._inputs import as_float64, call

X = np.linspace(0.0, 3.0, 14)
Y = 2.0 * np.sin(2.0 * X) + 3.0
H = 0.6


def _oracle(q: Any, k: Any, v: Any, h: Any = H) -> np.ndarray:
    """The float64 result of the numbers as given (after the caller's own rounding)."""
    return np.asarray(nadaraya.smooth(as_float64(q), as_float64(k), as_float64(v),
                                      bandwidth=float(as_float64(h))))


# -- pandas' nullable dtypes ----------------------------------------------------------------
NULLABLE = ["Float64", "Float32", "Int64", "Int16", "UInt8", "boolean"]


def _nullable(dtype: str, data: np.ndarray) -> Any:
    pd = pytest.importorskip("pandas")
    if dtype == "boolean":
        data = data > np.median(data)
    elif dtype[0] in "IU":
        data = np.round(data * 10).astype(np.int64)
    return pd.Series(data, dtype=dtype)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("dtype", NULLABLE)
@pytest.mark.parametrize("where", ["queries", "keys", "values", "all"])
def test_pandas_nullable_series_give_the_numpy_result(dtype: str, where: str) -> None:
    args = {"queries": X, "keys": X, "values": Y}
    for name in args if where == "all" else [where]:
        args[name] = _nullable(dtype, args[name])
    numbers = {name: np.asarray(a.to_numpy(dtype="float64")) if hasattr(a, "to_numpy") else a
               for name, a in args.items()}
    h = 6.0 if where in ("queries", "keys", "all") and dtype[0] in "IU" else H
    ref = _oracle(numbers["queries"], numbers["keys"], numbers["values"], h)
    got = call(lambda: nadaraya.smooth(args["queries"], args["keys"], args["values"],
                                       bandwidth=h))
    assert got.ok, got.error
    eps = 1e-6 if dtype == "Float32" else 1e-12
    np.testing.assert_allclose(as_float64(got.value), ref, rtol=0, atol=eps * np.abs(ref).max())
    w = call(lambda: nadaraya.weights(args["queries"], args["keys"], bandwidth=h))
    assert w.ok, w.error
    ref_w = np.asarray(nadaraya.weights(numbers["queries"], numbers["keys"], bandwidth=h))
    np.testing.assert_allclose(as_float64(w.value), ref_w, rtol=0, atol=eps)
    e = call(lambda: nadaraya.explain(args["queries"], args["keys"], args["values"],
                                      bandwidth=h))
    assert e.ok, e.error


@pytest.mark.filterwarnings("error")
def test_a_dataframe_of_nullable_columns_gives_the_numpy_result() -> None:
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({"x": pd.array(X, dtype="Float64"),
                          "i": pd.array(np.arange(len(X)) % 4, dtype="Int64")})
    plain = np.column_stack([X, np.arange(len(X)) % 4]).astype(np.float64)
    got = nadaraya.smooth(table, table, pd.Series(Y, dtype="Float64"), bandwidth=1.5)
    np.testing.assert_allclose(got, _oracle(plain, plain, Y, 1.5), rtol=0, atol=1e-12)
    assert got.dtype == np.float64


@pytest.mark.parametrize("dtype", ["Float64", "Int64", "boolean"])
@pytest.mark.parametrize("where", ["queries", "keys", "values"])
def test_missing_values_are_refused_as_nan_is(dtype: str, where: str) -> None:
    pd = pytest.importorskip("pandas")
    row = 5
    holed = _nullable(dtype, {"queries": X, "keys": X, "values": Y}[where]).astype(object)
    holed.iloc[row] = pd.NA
    holed = holed.astype(dtype)
    with_nan = holed.to_numpy(dtype="float64", na_value=np.nan)
    args = {"queries": X, "keys": X, "values": Y}
    expected = call(lambda: nadaraya.smooth(*{**args, where: with_nan}.values(), bandwidth=H))
    got = call(lambda: nadaraya.smooth(*{**args, where: holed}.values(), bandwidth=H),
               names=(where,))
    assert expected.error is not None and got.error is not None
    assert str(got.error) == str(expected.error)
    assert f"rows {row}" in str(got.error)
    table = pd.DataFrame({"a": holed, "b": pd.array(X, dtype="Float64")})
    two = {"queries": np.column_stack([X, X]), "keys": np.column_stack([X, X]), "values": Y}
    out = call(lambda: nadaraya.smooth(*{**two, where: table}.values(), bandwidth=H),
               names=(where,))
    assert out.error is not None and f"rows {row}" in str(out.error)


# -- arrays of every kind -------------------------------------------------------------------
def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


CONTAINERS = {
    "read-only": _read_only,
    "big-endian": lambda a: a.astype(">f8"),
    "big-endian float32": lambda a: a.astype(">f4"),
    "long double": lambda a: a.astype(np.longdouble),
    "broadcast view": lambda a: np.broadcast_to(a[:, None], (len(a), 1)),
    "masked, none hidden": lambda a: np.ma.masked_array(a, mask=np.zeros(len(a), bool)),
    "float8 tensor": lambda a: torch.from_numpy(a).to(torch.float8_e4m3fn),
    "uint16 tensor": lambda a: torch.from_numpy(np.round(a * 10)).to(torch.uint16),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("kind", CONTAINERS)
@pytest.mark.parametrize("where", ["queries", "keys", "values"])
def test_arrays_of_every_layout_give_the_float64_result(kind: str, where: str) -> None:
    args = {"queries": X, "keys": X, "values": Y}
    args[where] = CONTAINERS[kind](args[where])
    h = 6.0 if kind == "uint16 tensor" and where != "values" else H
    got = call(lambda: nadaraya.smooth(args["queries"], args["keys"], args["values"],
                                       bandwidth=h), names=(where,))
    assert got.ok, got.error
    ref = _oracle(args["queries"], args["keys"], args["values"], h)
    eps = 2.0**-3 if "float8" in kind else 1e-6 if "float32" in kind else 1e-12
    np.testing.assert_allclose(as_float64(got.value).reshape(ref.shape), ref, rtol=0,
                               atol=eps * np.abs(ref).max())


REFUSED = {
    "masked entries": (lambda a: np.ma.masked_array(a, mask=np.arange(len(a)) == 3),
                       "rows 3"),
    "sparse tensor": (lambda a: torch.from_numpy(a)[:, None].to_sparse(), "to_dense()"),
    "nested tensor": (lambda a: torch.nested.as_nested_tensor([torch.from_numpy(a)],
                                                              layout=torch.jagged), "nested"),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("kind", REFUSED)
@pytest.mark.parametrize("where", ["queries", "keys", "values"])
def test_arrays_that_are_not_plain_numbers_are_refused_by_name(kind: str, where: str) -> None:
    make, word = REFUSED[kind]
    args = {"queries": X, "keys": X, "values": Y}
    args[where] = make(args[where])
    got = call(lambda: nadaraya.smooth(args["queries"], args["keys"], args["values"],
                                       bandwidth=H), names=(where,))
    assert got.error is not None and word in str(got.error)


def test_tensors_on_the_meta_device_are_refused_by_name() -> None:
    meta = torch.empty(len(X), dtype=torch.float64, device="meta")
    got = call(lambda: nadaraya.smooth(meta, meta, meta, bandwidth=H), names=("queries",))
    assert got.error is not None and "'meta' device" in str(got.error)


def test_a_quantized_tensor_gives_the_result_of_its_dequantized_values() -> None:
    with pytest.warns(UserWarning):  # torch deprecates the creation, not the reading
        v = torch.quantize_per_tensor(torch.from_numpy(Y).float(), 0.05, 0, torch.quint8)
    got = nadaraya.smooth(torch.from_numpy(X), torch.from_numpy(X), v, bandwidth=H)
    np.testing.assert_allclose(as_float64(got), _oracle(X, X, v.dequantize()), rtol=0,
                               atol=1e-6 * np.abs(Y).max())


# -- every dtype for every parameter --------------------------------------------------------
TORCH = [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64, torch.bool,
         torch.complex64]
NUMPY = ["object", "complex128", "float16", "int16", "uint8", "bool", "longdouble"]


def _variants(a: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {str(d): torch.from_numpy(a).to(d) for d in TORCH}
    out.update({f"numpy {d}": a.astype(d) for d in NUMPY})
    return out


def _precision(label: str) -> float:
    """The unit roundoff of the dtype a result may come back in (others give float64)."""
    if "bfloat16" in label:
        return 2.0**-8
    if "float16" in label:
        return 2.0**-11
    if "float32" in label or "complex64" in label:
        return 2.0**-24
    return 2.0**-50


CALLS = {
    "smooth": lambda q, k, v, h: nadaraya.smooth(q, k, v, bandwidth=h),
    "weights": lambda q, k, v, h: nadaraya.weights(q, k, bandwidth=h),
    "explain": lambda q, k, v, h: nadaraya.explain(q, k, v, bandwidth=h),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("where", ["queries", "keys", "values", "bandwidth"])
def test_every_dtype_of_every_parameter_matches_float64_or_is_refused_by_name(
        where: str) -> None:
    base = {"queries": X, "keys": X, "values": Y, "bandwidth": np.float64(H)}
    for label, given in _variants(np.asarray(base[where])).items():
        args = {**base, where: given}
        for fn, run in CALLS.items():
            if fn == "weights" and where == "values":
                continue
            got = call(partial(run, *args.values()), names=(where,))
            if not got.ok or fn == "explain":
                continue
            try:
                    numbers = {n: as_float64(a) for n, a in args.items()}
            except (TypeError, ValueError):
                pytest.fail(f"{fn} with {where} {label} gave a result for unreadable input")
            if not np.isfinite(numbers["bandwidth"]).all() or numbers["bandwidth"] <= 0:
                pytest.fail(f"{fn} accepted bandwidth {given!r}")
            if fn == "smooth":
                ref = _oracle(numbers["queries"], numbers["keys"], numbers["values"],
                              numbers["bandwidth"])
            else:
                ref = np.asarray(nadaraya.weights(numbers["queries"], numbers["keys"],
                                                  bandwidth=float(numbers["bandwidth"])))
            err = np.abs(as_float64(got.value).reshape(ref.shape) - ref).max()
            assert err <= 8 * _precision(label) * max(np.abs(ref).max(), 1.0), (
                f"{fn} with {where} as {label}: error {err:.3g}")


# -- scales of the image filters ------------------------------------------------------------
def _levels(rng: np.random.Generator) -> np.ndarray:
    """A float image of four levels: neighbours share values exactly, or differ by 1/4."""
    return rng.integers(0, 4, (10, 11)).astype(np.float64) / 4


FILTER_SCALES = {
    "nlm h": lambda img, s: non_local_means(img, s, 3, 2),
    "global nlm h": lambda img, s: non_local_means(img, s, 3, None),
    "bilateral sigma_color": lambda img, s: bilateral(img, s, 1.5),
    "bilateral sigma_spatial": lambda img, s: bilateral(img, 0.3, s, radius=2),
    "kernel_regression h": lambda img, s: kernel_regression(img, s, radius=2),
}


@pytest.mark.parametrize("scale", [5e-324, 1e-300, 1e-170, 1e-160, 1e160, 1e300, 1.7e308],
                         ids=repr)
@pytest.mark.parametrize("name", FILTER_SCALES)
def test_scales_whose_square_leaves_float64_are_refused_by_name(
        name: str, scale: float, rng: np.random.Generator) -> None:
    param = name.split()[-1]
    got = call(lambda: FILTER_SCALES[name](_levels(rng), scale), names=(param,))
    assert got.error is not None and "between" in str(got.error)


@pytest.mark.parametrize("make", [lambda s: classic_kernel(s), lambda s: bilateral_kernel(s, 1.0),
                                  lambda s: bilateral_kernel(1.0, s),
                                  lambda s: nlm_kernel(s, patch_weights(3), 1)],
                         ids=["classic", "bilateral space", "bilateral colour", "nlm"])
@pytest.mark.parametrize("scale", [5e-324, 1e-170, 1e170, 1e300], ids=repr)
def test_the_kernels_refuse_those_scales_themselves(make, scale: float) -> None:
    with pytest.raises(nadaraya.NadarayaError, match="must lie between about"):
        make(scale)


def test_a_noise_level_far_above_h_is_refused_naming_sigma() -> None:
    with pytest.raises(nadaraya.NadarayaError, match=r"sigma / h"):
        nlm_kernel(1e-100, patch_weights(3), 1, sigma=1e100)


@pytest.mark.parametrize("scale", [6e-155, 1e-150, 1e-20, 4e153], ids=repr)
def test_scales_at_the_ends_of_the_range_match_the_naive_loops(
        scale: float, rng: np.random.Generator) -> None:
    img = _levels(rng)
    cases = {
        "bilateral sigma_color": (bilateral(img, scale, 1.5, radius=2),
                                  _naive.bilateral(img, 1.5, scale, 2)),
        "nlm h": (non_local_means(img, scale, 3, 2),
                  _naive.nlm(img, scale, patch_weights(3).numpy(), 2)),
    }
    if scale < 1:  # a huge spatial scale needs a window to match; its default is the image
        cases["kernel_regression h"] = (
            kernel_regression(img, scale, radius=2),
            _naive.weighted_mean(img, lambda i, j, y, x: float(i == y and j == x), 0))
    for what, (got, ref) in cases.items():
        np.testing.assert_allclose(np.asarray(got), ref, rtol=0, atol=1e-12, err_msg=what)


# -- PSNR reads the range from the dtype, as scikit-image does ------------------------------
PSNR_CASES = [("uint8", 0, 255), ("uint16", 0, 4000), ("int8", -100, 100), ("int8", 0, 100),
              ("int16", -300, 300), ("int32", -5, 5), ("bool", 0, 1), ("float64", 0, 1),
              ("float64", -1, 1), ("float32", -0.5, 0.5), ("float32", 0, 1)]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("dtype", "low", "high"), PSNR_CASES)
@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "torch"])
def test_psnr_default_range_is_scikit_images(dtype: str, low: float, high: float,
                                             tensor: bool, rng: np.random.Generator) -> None:
    metrics = pytest.importorskip("skimage.metrics")
    ref = rng.uniform(low, high, (12, 13))
    noisy = ref + rng.normal(0, 0.02 * (high - low), ref.shape)
    a = np.clip(ref, low, high).astype(dtype)
    b = (rng.random(ref.shape) < 0.5) if dtype == "bool" else np.clip(noisy, low, high).astype(
        dtype)
    expected = metrics.peak_signal_noise_ratio(a, b)
    got = psnr(torch.from_numpy(a), torch.from_numpy(b)) if tensor else psnr(a, b)
    # scikit-image computes float32 images in float32
    assert got == pytest.approx(expected, rel=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "torch"])
def test_psnr_of_float_images_beyond_unit_range_asks_for_data_range(
        tensor: bool, rng: np.random.Generator) -> None:
    metrics = pytest.importorskip("skimage.metrics")
    a = rng.uniform(0, 255, (8, 8))
    b = a + rng.normal(0, 2, a.shape)
    with pytest.raises(ValueError, match="data_range"):
        metrics.peak_signal_noise_ratio(a, b)
    with pytest.raises(nadaraya.NadarayaError, match="data_range=255"):
        psnr(torch.from_numpy(a), torch.from_numpy(b)) if tensor else psnr(a, b)
    assert psnr(a, b, data_range=255) == pytest.approx(
        metrics.peak_signal_noise_ratio(a, b, data_range=255), rel=1e-12)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("exponent", [-1060, -1000, 1000, 1020])
def test_psnr_at_any_magnitude_is_the_unscaled_one(exponent: int,
                                                  rng: np.random.Generator) -> None:
    metrics = pytest.importorskip("skimage.metrics")
    a = rng.uniform(-1, 1, (9, 9))
    b = np.clip(a + rng.normal(0, 0.1, a.shape), -1, 1)
    expected = metrics.peak_signal_noise_ratio(a, b, data_range=2.0)
    got = psnr(np.ldexp(a, exponent), np.ldexp(b, exponent), data_range=np.ldexp(2.0, exponent))
    # below the normal range the scaled images themselves are rounded
    assert got == pytest.approx(expected, abs=1e-9 if exponent > -1000 else 0.05)


@pytest.mark.parametrize("data_range", [0, -1.0, np.nan, np.inf, "wide", [1, 2]], ids=repr)
def test_psnr_refuses_a_data_range_that_is_no_scale(data_range: Any) -> None:
    with pytest.raises(nadaraya.NadarayaError, match="data_range"):
        psnr(np.zeros((3, 3)), np.ones((3, 3)), data_range=data_range)


@pytest.mark.parametrize("bad", [np.zeros((0, 3)), np.zeros((2, 2), complex),
                                 np.array([["a", "b"]]), torch.zeros(2, 2, dtype=torch.complex64),
                                 np.array([[0.0, np.nan]])], ids=["empty", "complex", "text",
                                                                  "complex tensor", "nan"])
def test_psnr_refuses_images_without_pixel_values(bad: Any) -> None:
    with pytest.raises(nadaraya.NadarayaError, match="reference"):
        psnr(bad, bad)


# -- autograd -------------------------------------------------------------------------------
WARNING_FREE = {
    "linear whitened": "LinearKernel('whitened')",
    "linear whitened with intercept": "LinearKernel('whitened', intercept=True)",
    "gaussian unnormalized": "'gaussian'",
}


@pytest.mark.parametrize("case", WARNING_FREE)
def test_backward_is_clean_under_python_w_error(case: str) -> None:
    # torch warns once per process about float() on a tensor that requires grad, so each
    # case runs in a fresh interpreter, as `python -W error` would
    script = textwrap.dedent(f"""
        import torch, nadaraya
        from nadaraya.kernels.linear import LinearKernel
        x = torch.linspace(1, 2, 9, dtype=torch.float64)[:, None]
        q, k = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        v = torch.sin(3 * x).requires_grad_(True)
        kernel = {WARNING_FREE[case]}
        kw = {{"bandwidth": 0.3, "normalize": False}} if kernel == "gaussian" else {{}}
        out = nadaraya.smooth(q, k, v, kernel, **kw)
        out.sum().backward()
        # the oracle: the same smoother written out in torch
        q2, k2, v2 = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        if kernel == "gaussian":
            w = torch.exp(-(q2 - k2.T) ** 2 / (2 * 0.3 ** 2))
        else:
            c = k2.mean(0) if kernel.intercept else 0.0
            kc, qc = k2 - c, q2 - c
            w = qc @ torch.linalg.pinv(kc.T @ kc) @ kc.T + (1 / len(k2) if kernel.intercept
                                                            else 0.0)
            w = w / w.sum(1, keepdim=True)
        (w @ v2).sum().backward()
        for a, b in ((q, q2), (k, k2), (v, v2)):
            assert torch.allclose(a.grad, b.grad, rtol=1e-9, atol=1e-9), (a.grad, b.grad)
        print("clean")
    """)
    done = subprocess.run([sys.executable, "-W", "error", "-c", script], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "clean" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("engine", ["auto", "dense", "autograd"])
@pytest.mark.parametrize("values", ["constant", "at the edge", "random"])
def test_the_range_guard_keeps_the_gradient_of_the_mean(engine: str, values: str) -> None:
    g = torch.Generator().manual_seed(5)
    keys = torch.rand(7, 1, dtype=torch.float64, generator=g)
    queries = torch.rand(5, 1, dtype=torch.float64, generator=g)
    v = {"constant": torch.full((7, 2), 0.3, dtype=torch.float64),
         "at the edge": torch.tensor([[0.1]] * 6 + [[0.7]], dtype=torch.float64),
         "random": torch.rand(7, 2, dtype=torch.float64, generator=g)}[values]
    v.requires_grad_(True)

    def fn(v: torch.Tensor) -> torch.Tensor:
        return nadaraya.smooth(queries, keys, v, bandwidth=0.3, engine=engine)

    assert torch.autograd.gradcheck(fn, (v,))
    # each row's weights sum to one: d sum(out) / d v sums to the number of queries
    (grad,) = torch.autograd.grad(fn(v).sum(), v)
    torch.testing.assert_close(grad.sum(0), torch.full((v.shape[1],), 5.0,
                                                       dtype=torch.float64))


@pytest.mark.parametrize("kind", ["meta", "sparse", "complex"])
def test_a_bandwidth_tensor_without_real_values_is_refused_by_name(kind: str) -> None:
    x = np.linspace(0.0, 1.0, 10)
    bandwidth = {"meta": lambda: torch.empty((), device="meta"),
                 "sparse": lambda: torch.tensor([0.7], dtype=torch.float64).to_sparse(),
                 "complex": lambda: torch.tensor(0.3 + 0.1j)}[kind]()
    with pytest.raises(nadaraya.NadarayaError, match=r"^bandwidth must be a dense real tensor"):
        nadaraya.smooth(x, x, x, bandwidth=bandwidth)
    dense = nadaraya.smooth(x, x, x, bandwidth=torch.tensor(0.7, dtype=torch.float64))
    np.testing.assert_array_equal(dense, nadaraya.smooth(x, x, x, bandwidth=0.7))


@pytest.mark.parametrize("bandwidth", [1e-310, 5e-324, [1e-310, 1.0]], ids=repr)
def test_a_bandwidth_whose_distances_overflow_is_refused_by_name(bandwidth: object) -> None:
    # distances divided by a subnormal bandwidth overflow: every key was reported unseen
    x = np.c_[np.arange(6.0) % 3, np.linspace(0.0, 6.0, 6)]
    with pytest.raises(nadaraya.NadarayaError, match=r"^bandwidth is too small for these points"):
        nadaraya.smooth(x, x, np.ones(6), "gaussian", bandwidth=bandwidth)
    smallest = np.finfo(np.float64).tiny
    out = nadaraya.smooth(x, x, np.arange(6.0), "gaussian", bandwidth=[smallest, 1.0])
    assert np.isfinite(out).all()
