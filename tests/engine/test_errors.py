"""Bad input raises NadarayaError (a ValueError) whose message names the parameter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M

rng = np.random.default_rng(0)
Q = rng.random((4, 3))
KEYS = rng.random((6, 3))
V = rng.random((6, 2))


def _with(array: np.ndarray, row: int, value: float) -> np.ndarray:
    out = array.copy()
    out[row, 1] = value
    return out


def _call(**changes: Any) -> Callable[[], Any]:
    args = {"queries": Q, "keys": KEYS, "values": V, "kernel": "gaussian", "mask": None}
    args.update(changes)

    def run() -> Any:
        a = dict(args)
        return nadaraya.smooth(a.pop("queries"), a.pop("keys"), a.pop("values"), a.pop("kernel"),
                               a.pop("mask"), **a)

    return run


def _bad_callable_kernel(result: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                         log: bool = True) -> Callable[[], Any]:
    return _call(kernel=K.CallableKernel(result, log=log), engine="dense")


CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "nan-queries": (_call(queries=_with(Q, 2, np.nan)), r"queries .*row\(s\) \(rows 2\)"),
    "inf-queries": (_call(queries=_with(Q, 1, np.inf)), r"queries contains NaN or infinity"),
    "nan-keys": (_call(keys=_with(KEYS, 5, np.nan)), r"keys contains NaN or infinity .*rows 5"),
    "inf-keys": (_call(keys=_with(KEYS, 0, -np.inf)), r"keys contains NaN or infinity"),
    "nan-values": (_call(values=_with(V, 3, np.nan)), r"values contains NaN or infinity"),
    "inf-values": (_call(values=_with(V, 3, np.inf)), r"values contains NaN or infinity"),
    "nan-torch-values": (_call(values=torch.tensor(_with(V, 3, np.nan))), r"values contains"),
    "length": (_call(values=V[:5]), r"values have 5 row\(s\) but keys have 6"),
    "features": (_call(queries=Q[:, :2]), r"queries have 2 feature\(s\) but keys have 3"),
    "bandwidth-zero": (_call(bandwidth=0.0), r"bandwidth must be > 0"),
    "bandwidth-negative": (_call(bandwidth=-1.0), r"bandwidth must be > 0"),
    "bandwidth-nan": (_call(bandwidth=np.nan), r"bandwidth must be finite"),
    "bandwidth-inf": (_call(bandwidth=np.inf), r"bandwidth must be finite"),
    "bandwidth-vector-negative": (_call(bandwidth=[1.0, -1.0, 1.0]), r"bandwidth must be > 0"),
    "bandwidth-vector-nan": (_call(bandwidth=[1.0, np.nan, 1.0]), r"bandwidth must be finite"),
    "bandwidth-length": (_call(bandwidth=[1.0, 2.0]), r"bandwidth vector must have one value "
                                                      r"per feature \(3\); got 2"),
    "bandwidth-complex": (_call(bandwidth=1 + 1j), r"bandwidth must be finite"),
    "bandwidth-rule": (_call(bandwidth="scot"), r"bandwidth 'scot' is not a known rule"),
    "bandwidth-3d": (_call(bandwidth=np.ones((3, 3, 3))), r"bandwidth must be a number or a "
                                                          r"vector"),
    "bandwidth-tensor-zero": (lambda: K.Gaussian(torch.tensor([1.0, 0.0, 1.0])),
                              r"bandwidth must be > 0"),
    "bandwidth-tensor-nan": (lambda: K.Gaussian(torch.tensor(float("nan"))),
                             r"bandwidth must be finite"),
    "bandwidth-with-object": (_call(kernel=K.Gaussian(0.3), bandwidth=0.3),
                              r"bandwidth was given together with a kernel object"),
    "bandwidth-with-softmax": (_call(kernel="softmax", bandwidth=0.3),
                               r"softmax kernel takes no bandwidth"),
    "bandwidth-with-function": (_call(kernel=lambda q, k: q @ k.T, bandwidth=0.3),
                                r"bandwidth cannot be used with a kernel function"),
    "metric-shape": (_call(bandwidth=np.eye(2)),
                     r"metric \(or a 2-D bandwidth, taken as the metric L\) must have one column "
                     r"per feature \(3\); got shape \(2, 2\)"),
    "metric-nan": (_call(bandwidth=np.full((3, 3), np.nan)), r"bandwidth must be finite"),
    "metric-object-shape": (_call(kernel=K.Laplacian(metric=np.eye(4))),
                            r"metric \(or a 2-D bandwidth.*\) must have one column per feature"),
    "metric-object-1d": (lambda: K.Gaussian(metric=np.ones(3)), r"metric must be a 2-D"),
    "metric-and-bandwidth": (lambda: K.Gaussian(0.5, metric=np.eye(3)),
                             r"either bandwidth or metric"),
    "empty-queries": (_call(queries=np.zeros((0, 3))), r"queries is empty"),
    "empty-keys": (_call(keys=np.zeros((0, 3)), values=np.zeros((0, 2))), r"keys is empty"),
    "empty-values": (_call(values=np.zeros((0, 2))), r"values have 0 row\(s\) but keys have 6"),
    "empty-list": (_call(queries=[]), r"queries is empty"),
    "complex-queries": (_call(queries=Q + 1j), r"queries must be real"),
    "complex-values": (_call(values=V.astype(complex)), r"values must be real"),
    "complex-torch-keys": (_call(keys=torch.tensor(KEYS, dtype=torch.complex128)),
                           r"keys must be real"),
    "string-values": (_call(values=np.array(["a"] * 6)), r"values must hold numbers"),
    "ragged-queries": (_call(queries=[[1.0, 2.0, 3.0], [1.0]]), r"queries must be an array"),
    "values-3d": (_call(values=np.zeros((6, 2, 2))), r"values must be 1-D or 2-D"),
    "queries-3d": (_call(queries=np.zeros((4, 3, 1))), r"queries must be 1-D or 2-D"),
    "queries-scalar": (_call(queries=1.0), r"queries must be 1-D or 2-D"),
    "mask-shape": (_call(mask=np.ones((4, 5), dtype=bool)),
                   r"mask must have shape \(n_queries, n_keys\) = \(4, 6\); got \(4, 5\)"),
    "mask-shape-transposed": (_call(mask=np.ones((6, 4), dtype=bool)), r"mask must have shape"),
    "mask-sparse-shape": (_call(mask=sp.csr_matrix(np.ones((5, 6), dtype=bool))),
                          r"mask must have shape"),
    "mask-torch-shape": (_call(mask=torch.ones(4, 7, dtype=torch.bool)), r"mask must have shape"),
    "mask-not-bool": (_call(mask=np.ones((4, 6))), r"mask matrix must be boolean"),
    "mask-3d": (_call(mask=np.ones((4, 6, 1), dtype=bool)), r"mask matrix must be 2-D"),
    "mask-name": (_call(mask="casual"), r"mask 'casual' is not known"),
    "mask-type": (_call(mask=3.5), r"mask must be a Mask"),
    "mask-predicate-dtype": (_call(mask=M.Predicate(lambda i, j: i - j)),
                             r"mask predicate must return a bool tensor"),
    "mask-predicate-shape": (_call(mask=M.Predicate(lambda i, j: torch.ones(3, 3, dtype=bool))),
                             r"mask predicate returned shape \(3, 3\)"),
    "kernel-name": (_call(kernel="gausian"), r"kernel 'gausian' is not known"),
    "kernel-type": (_call(kernel=3), r"kernel must be a name, a Kernel or a callable"),
    "kernel-shape": (_bad_callable_kernel(lambda q, k: q @ q.T),
                     r"kernel function must return shape"),
    "kernel-nan": (_bad_callable_kernel(lambda q, k: (q @ k.T) * np.nan),
                   r"kernel function returned NaN"),
    "kernel-plus-inf": (_bad_callable_kernel(lambda q, k: (q @ k.T) + np.inf),
                        r"kernel function returned \+inf"),
    "kernel-negative-weight": (_bad_callable_kernel(lambda q, k: -(q @ k.T), log=False),
                               r"kernel function with log=False returned a negative weight"),
    "engine-name": (_call(engine="gpu"), r"engine 'gpu' is not known"),
    "empty-policy": (_call(empty="zero"), r"empty must be one of 'raise', 'nan', 'nearest'; "
                                          r"got 'zero'"),
    "radius": (lambda: M.Radius(-1.0), r"radius must be a positive finite number"),
    "radius-nan": (lambda: M.Radius(float("nan")), r"radius must be a positive finite number"),
    "knearest": (lambda: M.KNearest(0), r"k must be a positive integer"),
    "knearest-float": (lambda: M.KNearest(2.5), r"k must be a positive integer"),
    "window": (lambda: M.Window(-1), r"window radius must be an integer >= 0"),
    "causal-offset": (lambda: M.Causal(0.5), r"offset must be an integer"),
    "softmax-scale": (lambda: K.ExpDot(scale=-1.0), r"scale must be a positive finite number"),
    "predicate-callable": (lambda: M.Predicate(3), r"mask predicate must be callable"),
    "kernel-callable": (lambda: K.CallableKernel(3), r"kernel function must be callable"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_naming_the_parameter(case: str) -> None:
    run, match = CASES[case]
    with pytest.raises(NadarayaError, match=match) as info:
        run()
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", ["queries", "keys", "values"])
def test_nan_is_refused_by_every_entry_point(name: str) -> None:
    bad = {"queries": _with(Q, 0, np.nan), "keys": _with(KEYS, 0, np.nan),
           "values": _with(V, 0, np.nan)}
    args = {"queries": Q, "keys": KEYS, "values": V, name: bad[name]}
    with pytest.raises(NadarayaError, match=name):
        nadaraya.explain(args["queries"], args["keys"], args["values"])
    if name != "values":
        with pytest.raises(NadarayaError, match=name):
            nadaraya.weights(args["queries"], args["keys"])


def test_tensors_on_different_devices_are_refused() -> None:
    # The meta device stands in for a second device.
    q = torch.tensor(Q)
    k = torch.empty(6, 3, dtype=torch.float64, device="meta")
    with pytest.raises(NadarayaError, match=r"one device; got \['cpu', 'meta'\]"):
        nadaraya.smooth(q, k, torch.tensor(V))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_on_cpu_and_cuda_are_refused() -> None:
    with pytest.raises(NadarayaError, match="device"):
        nadaraya.smooth(torch.tensor(Q).cuda(), torch.tensor(KEYS), torch.tensor(V))


def test_weights_beyond_the_budget_refuse_and_name_config_context() -> None:
    q = rng.random((300, 2))
    with nadaraya.config_context(working_memory=0.5):
        with pytest.raises(NadarayaError, match=r"working-memory budget.*config_context"):
            nadaraya.weights(q, q, bandwidth=0.3)
    assert nadaraya.weights(q, q, bandwidth=0.3).shape == (300, 300)


def test_explain_refused_engine_raises_with_the_reason() -> None:
    q = torch.tensor(Q, requires_grad=True)
    with pytest.raises(NadarayaError, match=r"engine='streamed' cannot run this problem: .*grad"):
        nadaraya.explain(q, torch.tensor(KEYS), torch.tensor(V), engine="streamed")
    with pytest.raises(NadarayaError, match=r"engine='streamed' cannot run"):
        nadaraya.smooth(q, torch.tensor(KEYS), torch.tensor(V), engine="streamed")
