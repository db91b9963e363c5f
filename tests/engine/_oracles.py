"""Independent oracles for the engine tests.

Kernel formulas, mask predicates and the smoothing sum are written out here
with plain Python loops and :mod:`math`, without calling the library's kernel
or mask classes, so that they can disagree with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M

Vector = Sequence[float]
LogK = Callable[[Vector, Vector], float]

EPS32 = float(np.finfo(np.float32).eps)

# Float32 results may be this many times less accurate than the float32
# dense engine (measured against the float64 dense result), or than eps32.
FLOAT32_FACTOR = 16.0


# -- the sum --------------------------------------------------------------------
def naive_smooth(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    logk: LogK,
    visible: np.ndarray | None = None,
) -> np.ndarray:
    """Double loop over queries and keys; NaN for a query with no weight."""
    queries, keys, values = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values))
    values2 = values.reshape(len(values), -1)
    m, n = len(queries), len(keys)
    out = np.empty((m, values2.shape[1]))
    for i in range(m):
        scores = []
        for j in range(n):
            seen = True if visible is None else bool(visible[i][j])
            scores.append(logk(list(queries[i]), list(keys[j])) if seen else -math.inf)
        top = max(scores)
        if top == -math.inf:
            out[i] = math.nan
            continue
        w = [math.exp(s - top) for s in scores]
        total = math.fsum(w)
        for c in range(values2.shape[1]):
            out[i, c] = math.fsum(wj * values2[j, c] for j, wj in enumerate(w)) / total
    return out if values.ndim == 2 else out[:, 0]


def naive_weights(queries: np.ndarray, keys: np.ndarray, logk: LogK,
                  visible: np.ndarray | None = None) -> np.ndarray:
    """Rows of the smoother matrix by the double loop (NaN rows when empty)."""
    n = len(keys)
    return naive_smooth(queries, keys, np.eye(n), logk, visible)


# -- kernel formulas --------------------------------------------------------------
def _norm(x: Vector) -> float:
    return math.sqrt(math.fsum(t * t for t in x))


def scaled_distance(q: Vector, k: Vector, bandwidth: Any) -> float:
    """``||L (q - k)||`` with ``L`` from a scalar, a vector or a matrix bandwidth."""
    diff = [a - b for a, b in zip(q, k, strict=True)]
    b = np.asarray(bandwidth, dtype=float)
    if b.ndim == 0:
        return _norm([t / float(b) for t in diff])
    if b.ndim == 1:
        return _norm([t / float(h) for t, h in zip(diff, b, strict=True)])
    return _norm([math.fsum(float(b[r, c]) * diff[c] for c in range(len(diff)))
                  for r in range(b.shape[0])])


def _log1p_neg(x: float) -> float:
    return math.log1p(-x) if x < 1.0 else -math.inf


PROFILES: dict[str, Callable[[float], float]] = {
    "gaussian": lambda r: -0.5 * r * r,
    "laplacian": lambda r: -r,
    "matern32": lambda r: math.log1p(math.sqrt(3.0) * r) - math.sqrt(3.0) * r,
    "matern52": lambda r: math.log1p(math.sqrt(5.0) * r + 5.0 * r * r / 3.0) - math.sqrt(5.0) * r,
    "cauchy": lambda r: -math.log1p(r * r),
    "epanechnikov": lambda r: _log1p_neg(r * r),
    "tricube": lambda r: 3.0 * _log1p_neg(r**3) if r < 1.0 else -math.inf,
    "uniform": lambda r: 0.0 if r <= 1.0 else -math.inf,
}


def radial_logk(name: str, bandwidth: Any, columns: Sequence[int] | None = None) -> LogK:
    profile = PROFILES[name]

    def logk(q: Vector, k: Vector) -> float:
        if columns is not None:
            q, k = [q[c] for c in columns], [k[c] for c in columns]
        return profile(scaled_distance(q, k, bandwidth))

    return logk


def expdot_logk(scale: float | None, columns: Sequence[int] | None = None) -> LogK:
    def logk(q: Vector, k: Vector) -> float:
        if columns is not None:
            q, k = [q[c] for c in columns], [k[c] for c in columns]
        s = 1.0 / math.sqrt(len(q)) if scale is None else scale
        return s * math.fsum(a * b for a, b in zip(q, k, strict=True))

    return logk


def product_logk(*parts: LogK) -> LogK:
    return lambda q, k: math.fsum(p(q, k) for p in parts)


def sum_logk(*parts: LogK) -> LogK:
    def logk(q: Vector, k: Vector) -> float:
        s = [p(q, k) for p in parts]
        top = max(s)
        if top == -math.inf:
            return -math.inf
        return top + math.log(math.fsum(math.exp(t - top) for t in s))

    return logk


def l1_logk(scale: float) -> LogK:
    return lambda q, k: -math.fsum(abs(a - b) for a, b in zip(q, k, strict=True)) / scale


# -- kernel cases ---------------------------------------------------------------------
@dataclass(frozen=True)
class KernelCase:
    """A kernel as passed to ``smooth`` and its independent formula."""

    id: str
    kernel: Any
    bandwidth: Any
    logk: LogK


_BASE_H = {"gaussian": 0.4, "laplacian": 0.5, "cauchy": 0.3,
           "epanechnikov": 0.8, "tricube": 0.9, "uniform": 0.7}
_VECTOR = np.array([0.8, 1.2, 1.0])
_METRIC = np.array([[1.0, 0.3, 0.0], [0.0, 0.8, -0.4], [0.2, 0.0, 1.1]])
_PROJECTION = np.array([[1.0, 0.5, -0.5], [0.0, 1.0, 0.5]])


def _l1_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return -torch.cdist(q, k, p=1) / 0.6


def _inverse_quadratic(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return 1.0 / (1.0 + torch.cdist(q, k, p=1) ** 2)


def kernel_cases() -> list[KernelCase]:
    """Kernels on three features: every named radial kernel with a scalar, a
    per-feature and a metric bandwidth, softmax, products, sums and callables."""
    cases = []
    for name, h in _BASE_H.items():
        cls = K.RADIAL[name]
        cases.append(KernelCase(f"{name}-scalar", name, h, radial_logk(name, h)))
        vec = h * _VECTOR
        cases.append(KernelCase(f"{name}-vector", cls(vec), None, radial_logk(name, vec)))
        metric = _METRIC / h
        if name in ("gaussian", "epanechnikov", "cauchy"):
            cases.append(KernelCase(f"{name}-metric", name, metric, radial_logk(name, metric)))
        else:
            cases.append(KernelCase(f"{name}-metric", cls(metric=metric), None,
                                    radial_logk(name, metric)))
    proj = _PROJECTION / 0.4
    cases += [
        KernelCase("gaussian-metric-2x3", K.Gaussian(metric=proj), None,
                   radial_logk("gaussian", proj)),
        KernelCase("softmax-default", "softmax", None, expdot_logk(None)),
        KernelCase("softmax-scale", K.ExpDot(scale=0.8), None, expdot_logk(0.8)),
        KernelCase(
            "product-bilateral",
            K.Gaussian(0.5).on([0, 1]) * K.Gaussian(0.3).on([2]),
            None,
            product_logk(radial_logk("gaussian", 0.5, [0, 1]), radial_logk("gaussian", 0.3, [2])),
        ),
        KernelCase(
            "product-compact",
            K.Epanechnikov(1.2).on([0]) * K.Laplacian(0.6).on([1, 2]),
            None,
            product_logk(radial_logk("epanechnikov", 1.2, [0]),
                         radial_logk("laplacian", 0.6, [1, 2])),
        ),
        KernelCase(
            "product-dot-position",
            K.ExpDot(0.5).on([0, 1]) * K.Gaussian(0.4).on([2]),
            None,
            product_logk(expdot_logk(0.5, [0, 1]), radial_logk("gaussian", 0.4, [2])),
        ),
        KernelCase(
            "sum",
            K.Gaussian(0.3) + K.Laplacian(0.8),
            None,
            sum_logk(radial_logk("gaussian", 0.3), radial_logk("laplacian", 0.8)),
        ),
        KernelCase(
            "sum-columns",
            K.Gaussian(0.4).on([0]) + K.Cauchy(0.5).on([1, 2]),
            None,
            sum_logk(radial_logk("gaussian", 0.4, [0]), radial_logk("cauchy", 0.5, [1, 2])),
        ),
        KernelCase("callable-log", K.CallableKernel(_l1_scores), None, l1_logk(0.6)),
        KernelCase(
            "callable-weights",
            K.CallableKernel(_inverse_quadratic, log=False),
            None,
            lambda q, k: -math.log1p(math.fsum(abs(a - b) for a, b in zip(q, k, strict=True))
                                     ** 2),
        ),
        KernelCase("plain-function", _l1_scores, None, l1_logk(0.6)),
    ]
    return cases


# -- mask cases -----------------------------------------------------------------------
@dataclass(frozen=True)
class MaskCase:
    """A mask as passed to ``smooth`` (built from the problem) and its matrix."""

    id: str
    make: Callable[[np.ndarray, np.ndarray], Any]
    visible: Callable[[np.ndarray, np.ndarray], np.ndarray | None]


def _dist(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    m, n = len(queries), len(keys)
    return np.array([[_norm([a - b for a, b in zip(queries[i], keys[j], strict=True)])
                      for j in range(n)] for i in range(m)])


def _index_matrix(fn: Callable[[int, int], bool]) -> Callable[[np.ndarray, np.ndarray],
                                                                np.ndarray]:
    def visible(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return np.array([[fn(i, j) for j in range(len(keys))] for i in range(len(queries))])

    return visible


def _knearest_matrix(k: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def visible(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        d = _dist(queries, keys)
        out = np.zeros(d.shape, dtype=bool)
        for i, row in enumerate(d):
            for j in sorted(range(len(row)), key=lambda t: row[t])[:k]:
                out[i, j] = True
        return out

    return visible


def _radius_matrix(r: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda queries, keys: _dist(queries, keys) <= r


def _random_bool(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(7)
    out = rng.random((len(queries), len(keys))) < 0.5
    out[np.arange(len(queries)), rng.integers(0, len(keys), len(queries))] = True
    return out


def _predicate(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return (i + 2 * j) % 3 != 0


def _both(a: Callable[..., Any], b: Callable[..., Any], op: Callable[..., Any]) -> Callable[
        [np.ndarray, np.ndarray], np.ndarray]:
    return lambda queries, keys: op(a(queries, keys), b(queries, keys))


def mask_cases() -> list[MaskCase]:
    """Every mask kind and the & / | combinations, with independent matrices."""
    causal = _index_matrix(lambda i, j: j <= i)
    return [
        MaskCase("none", lambda q, k: None, lambda q, k: None),
        MaskCase("causal", lambda q, k: M.Causal(), causal),
        MaskCase("causal-offset2", lambda q, k: M.Causal(offset=2),
                 _index_matrix(lambda i, j: j <= i + 2)),
        MaskCase("causal-offset-1", lambda q, k: M.Causal(offset=-1),
                 _index_matrix(lambda i, j: j <= i - 1)),
        MaskCase("causal-name", lambda q, k: "causal", causal),
        MaskCase("window", lambda q, k: M.Window(2), _index_matrix(lambda i, j: abs(i - j) <= 2)),
        MaskCase("radius", lambda q, k: M.Radius(0.6), _radius_matrix(0.6)),
        MaskCase("knearest", lambda q, k: M.KNearest(3), _knearest_matrix(3)),
        MaskCase("leave-one-out", lambda q, k: M.LeaveOneOut(), _index_matrix(lambda i, j: i != j)),
        MaskCase("dense-bool", lambda q, k: _random_bool(q, k), _random_bool),
        MaskCase("sparse", lambda q, k: sp.csr_matrix(_random_bool(q, k)), _random_bool),
        MaskCase("predicate", lambda q, k: M.Predicate(_predicate),
                 _index_matrix(lambda i, j: (i + 2 * j) % 3 != 0)),
        MaskCase("causal&window", lambda q, k: M.Causal() & M.Window(1),
                 _index_matrix(lambda i, j: i - 1 <= j <= i)),
        MaskCase("knearest|causal", lambda q, k: M.KNearest(2) | M.Causal(),
                 _both(_knearest_matrix(2), causal, np.logical_or)),
        MaskCase("radius&loo", lambda q, k: M.Radius(0.7) & M.LeaveOneOut(),
                 _both(_radius_matrix(0.7), _index_matrix(lambda i, j: i != j),
                       np.logical_and)),
        MaskCase("knearest|sparse", lambda q, k: M.KNearest(2) | M.MatrixMask(
            sp.csr_matrix(_random_bool(q, k))), _both(_knearest_matrix(2), _random_bool,
                                                      np.logical_or)),
    ]


# -- problems and engines ------------------------------------------------------------------
def tiny_problem(m: int = 7, n: int = 9, d: int = 3, p: int = 2,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys in the unit cube; query ``i`` sits next to key ``i``."""
    rng = np.random.default_rng(seed)
    keys = rng.random((n, d))
    queries = keys[np.arange(m) % n] + 0.05 * rng.standard_normal((m, d))
    values = rng.standard_normal((n, p))
    return queries, keys, values


def skip_unless_runs(engine: str, queries: Any, keys: Any, values: Any, kernel: Any = "gaussian",
                     mask: Any = None, *, bandwidth: Any = None) -> None:
    """Skip the test when ``engine`` refuses this problem (explain says why)."""
    try:
        nadaraya.explain(queries, keys, values, kernel, mask, bandwidth=bandwidth, engine=engine)
    except NadarayaError as exc:
        pytest.skip(f"engine {engine!r} refuses: {exc}")


def dense64(queries: Any, keys: Any, values: Any, kernel: Any = "gaussian", mask: Any = None,
            **kwargs: Any) -> np.ndarray:
    """The golden result: the dense engine in float64 on the same (rounded) inputs."""
    def f64(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().to(torch.float64).numpy()
        return np.asarray(x, dtype=np.float64)

    out = nadaraya.smooth(f64(queries), f64(keys), f64(values), kernel, mask, engine="dense",
                          **kwargs)
    return out[0] if kwargs.get("return_lse") else out


def rel_err(out: Any, ref: np.ndarray) -> float:
    """Largest error over the finite entries, relative to the size of ``ref``;
    the NaN pattern must be the same."""
    out = np.asarray(out.detach().cpu() if isinstance(out, torch.Tensor) else out,
                     dtype=np.float64)
    assert out.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref), err_msg="NaN pattern differs")
    finite = np.isfinite(ref)
    if not finite.any():
        return 0.0
    scale = max(1.0, float(np.abs(ref[finite]).max()))
    return float(np.abs(out[finite] - ref[finite]).max()) / scale


def runnable_engines(queries: Any, keys: Any, values: Any, kernel: Any = "gaussian",
                     mask: Any = None, *, bandwidth: Any = None) -> list[str]:
    """The engines of ``ENGINES`` that accept this problem."""
    names = []
    for name in nadaraya.engine.ENGINES:
        try:
            nadaraya.explain(queries, keys, values, kernel, mask, bandwidth=bandwidth,
                             engine=name)
        except NadarayaError:
            continue
        names.append(name)
    return names


def examples(n: int) -> int:
    """``n`` hypothesis examples, or the loaded profile's count when that is a
    thorough one (more than hypothesis' default of 100, as in CI)."""
    from hypothesis import settings

    current = settings.default.max_examples
    return max(n, current) if current > 100 else n
