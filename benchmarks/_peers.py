"""The peers of ``bench_transforms.py``: other libraries' kernel sums on the same data.

Each peer computes what Nadaraya–Watson needs, ``total(q) = sum_j K(q, k_j)``
and ``acc(q) = sum_j K(q, k_j) y_j``, in our kernel convention (unnormalized:
the Gaussian ``exp(-r^2 / 2)``, the Laplacian ``exp(-r)``, the Epanechnikov
``max(0, 1 - r^2)``, ``r = ||q - k|| / h``), and returns the mean
``acc / total`` and, where the library gives it, ``total`` itself. A library
that cannot compute one of them says so in its note.

* Binned peers (``kind = "binned"``) run on every query: ``kdepy`` (KDEpy
  ``FFTKDE``: linear binning and an FFT convolution on its grid; it evaluates
  only on an equidistant grid, so the sums are interpolated linearly to the
  queries), ``statsmodels-fft`` (``KDEUnivariate(fft=True)``: 1-D Gaussian,
  no weights, so ``total`` only), ``r-kernsmooth`` (R's KernSmooth:
  ``locpoly(degree = 0)`` for the mean and ``bkde`` for the density, both
  binned on their grid; R's part timed inside R, so R's start-up and the
  file transfer are not counted, the interpolation to the queries is) and
  ``fastkde`` (its self-consistent kernel chosen from the data: no bandwidth
  and no weights, so its density only, a sum with another kernel).
* Exact peers (``kind = "exact"``) are direct O(n m) sums; they run on the
  first ``budget // n`` of the sampled queries against all keys, and the
  caller scales their time to all queries: ``keops`` (pykeops on the CPU,
  compiled at first use with the system C++ compiler), ``torch-sdpa`` (torch
  ``scaled_dot_product_attention`` with the Gaussian's key bias) and
  ``statsmodels-kernelreg`` (``KernelReg``, local constant).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Sums = dict[str, Any]  # "mean" and "total": (rows,) arrays or None


@dataclass(frozen=True)
class Peer:
    """A peer library: where it applies and how it runs."""

    name: str
    kind: str  # "binned": every query; "exact": the first budget // n sampled queries
    package: str  # what to install when it is missing
    module: str  # what to import to know it is there
    kernels: tuple[str, ...]
    dims: tuple[int, ...]
    run: Callable[..., Sums]
    note: str
    budget: float = 0.0  # kernel evaluations an exact peer may spend
    missing: Callable[[], str | None] | None = None  # why it cannot run here, or None


def kernel_integral(kernel: str, h: float, d: int) -> float:
    """``int K(x / h) dx`` over R^d for our unnormalized kernels (binned peers' densities)."""
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)  # volume of the unit ball
    if kernel == "gaussian":
        return (2 * math.pi) ** (d / 2) * h**d
    if kernel == "laplacian":
        return d * ball * math.gamma(d) * h**d
    if kernel == "epanechnikov":
        return ball * 2 / (d + 2) * h**d
    raise ValueError(f"kernel {kernel!r} has no integral here")


def _grid_axes(points: list[np.ndarray], h: float, per_h: float,
               max_cells: float) -> tuple[list[np.ndarray], bool]:
    """Equidistant axes one step beyond every point, ``per_h`` steps per bandwidth (fewer,
    the same in every dimension, where the grid would exceed ``max_cells``); and whether
    they were made fewer."""
    lo = np.min([p.min(0) for p in points], axis=0)
    hi = np.max([p.max(0) for p in points], axis=0)
    steps = np.ceil((hi - lo) / h * per_h).astype(int) + 2
    shrink = (max_cells / np.prod(steps + 1.0)) ** (1 / lo.size)
    if shrink < 1:
        steps = np.maximum(3, np.floor(steps * shrink)).astype(int)
    axes = []
    for a, b, m in zip(lo, hi, steps, strict=True):
        s = (b - a) / (m - 2)
        axes.append(np.linspace(a - s, b + s, m + 1))
    return axes, bool(shrink < 1)


def _interpolate(axes: list[np.ndarray], values: np.ndarray, q: np.ndarray) -> np.ndarray:
    if len(axes) == 1:
        return np.interp(q[:, 0], axes[0], values)
    from scipy.interpolate import RegularGridInterpolator

    shape = tuple(a.size for a in axes)
    return RegularGridInterpolator(axes, values.reshape(shape))(q)


def kdepy(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float, *,
          grid_per_h: float, max_cells: float, **_: Any) -> Sums:
    """KDEpy ``FFTKDE`` with and without the weights ``y``, on its grid, interpolated."""
    from KDEpy import FFTKDE

    # KDEpy's bw is the kernel's standard deviation
    name, bw = {"gaussian": ("gaussian", h), "laplacian": ("exponential", h * math.sqrt(2)),
                "epanechnikov": ("epa", h / math.sqrt(5))}[kernel]
    axes, capped = _grid_axes([q, k], h, grid_per_h, max_cells)
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, k.shape[1])
    density = FFTKDE(kernel=name, bw=bw).fit(k).evaluate(grid)
    weight = float(y.sum())  # FFTKDE divides the weights by their sum
    weighted = FFTKDE(kernel=name, bw=bw).fit(k, weights=y).evaluate(grid)
    c = kernel_integral(kernel, h, k.shape[1])
    total = _interpolate(axes, density, q) * (k.shape[0] * c)
    acc = _interpolate(axes, weighted, q) * (weight * c)
    grid_note = " x ".join(str(a.size) for a in axes) + (" (capped)" if capped else "")
    return {"mean": acc / total, "total": total, "note": f"grid {grid_note}"}


def statsmodels_fft(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float, *,
                    grid_per_h: float, **_: Any) -> Sums:
    """statsmodels ``KDEUnivariate(fft=True)``: the unweighted sum only."""
    from statsmodels.nonparametric.kde import KDEUnivariate

    span = float(max(k.max(), q.max()) - min(k.min(), q.min())) + 6 * h  # cut = 3
    kde = KDEUnivariate(k[:, 0])
    kde.fit(kernel="gau", bw=h, fft=True, gridsize=math.ceil(span / h * grid_per_h))
    c = kernel_integral("gaussian", h, 1)
    total = np.interp(q[:, 0], kde.support, kde.density) * (k.shape[0] * c)
    return {"mean": None, "total": total, "note": f"grid {kde.support.size}"}


_R_KERNSMOOTH = """
args <- commandArgs(TRUE)
n <- as.integer(args[2]); gridsize <- as.integer(args[3]); h <- as.numeric(args[4])
lo <- as.numeric(args[5]); hi <- as.numeric(args[6])
con <- file(args[1], "rb"); x <- readBin(con, "double", n); y <- readBin(con, "double", n)
close(con)
suppressPackageStartupMessages(library(KernSmooth))
t0 <- proc.time()
fit <- locpoly(x, y, degree = 0, bandwidth = h, gridsize = gridsize, range.x = c(lo, hi))
den <- bkde(x, kernel = "normal", bandwidth = h, gridsize = gridsize, range.x = c(lo, hi))
t <- proc.time() - t0
con <- file(args[7], "wb")
writeBin(c(t[["elapsed"]], t[["user.self"]] + t[["sys.self"]], fit$y, den$y), con)
close(con)
"""


def _r_kernsmooth_missing() -> str | None:
    if shutil.which("Rscript") is None:
        return "missing (no Rscript); install R and KernSmooth: apt-get install r-cran-kernsmooth"
    found = subprocess.run(["Rscript", "-e", "library(KernSmooth)"], capture_output=True)
    if found.returncode != 0:
        return "missing (R without KernSmooth); apt-get install r-cran-kernsmooth"
    return None


def r_kernsmooth(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float, *,
                 grid_per_h: float, max_cells: float, **_: Any) -> Sums:
    """R KernSmooth ``locpoly`` (degree 0) and ``bkde`` on their grid, interpolated."""
    lo = float(min(k.min(), q.min()))
    hi = float(max(k.max(), q.max()))
    cells = int(min(max_cells, max(401, math.ceil((hi - lo) / h * grid_per_h))))
    with tempfile.TemporaryDirectory() as tmp:
        data, out, script = (f"{tmp}/data.bin", f"{tmp}/out.bin", f"{tmp}/run.R")
        np.concatenate([k[:, 0], y]).astype("<f8").tofile(data)
        with open(script, "w", encoding="utf-8") as f:
            f.write(_R_KERNSMOOTH)
        subprocess.run(["Rscript", script, data, str(k.shape[0]), str(cells), repr(h),
                        repr(lo), repr(hi), out], check=True, capture_output=True)
        res = np.fromfile(out, dtype="<f8")
    t0, c0 = time.perf_counter(), time.process_time()  # the interpolation counts
    grid = np.linspace(lo, hi, cells)
    mean, density = res[2:2 + cells], res[2 + cells:]
    total = np.interp(q[:, 0], grid, density) * (k.shape[0] * kernel_integral(kernel, h, 1))
    mean = np.interp(q[:, 0], grid, mean)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"mean": mean, "total": total, "time": float(res[0]) + elapsed,
            "cpu": float(res[1]) + cpu, "note": f"grid {cells}; R timed inside R"}


def fastkde(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float,
            **_: Any) -> Sums:
    """fastkde's density (its own kernel) on its grid, interpolated to the queries."""
    import fastkde as fk

    density, axis = fk.pdf(k[:, 0], use_xarray=False)
    at_queries = np.interp(q[:, 0], axis, density)
    return {"mean": None, "total": None, "density": at_queries, "note": f"grid {np.size(axis)}"}


def keops(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float,
          **_: Any) -> Sums:
    """pykeops (CPU, float64): both sums in one reduction."""
    from pykeops.numpy import LazyTensor

    qi = LazyTensor(np.ascontiguousarray(q / h)[:, None, :])
    kj = LazyTensor(np.ascontiguousarray(k / h)[None, :, :])
    vj = LazyTensor(np.stack([np.ones_like(y), y], 1)[None, :, :])
    r2 = ((qi - kj) ** 2).sum(-1)
    if kernel == "gaussian":
        w = (-0.5 * r2).exp()
    elif kernel == "laplacian":
        w = (-r2.sqrt()).exp()
    else:
        w = (1 - r2).relu()
    sums = (w * vj).sum(axis=1)
    return {"mean": sums[:, 1] / sums[:, 0], "total": sums[:, 0]}


def torch_sdpa(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float,
               **_: Any) -> Sums:
    """torch SDPA, float64, with the key bias ``-||k||^2 / 2h^2``; query chunks of bounded size."""
    import torch
    import torch.nn.functional as F

    centre = k.mean(0)  # smaller norms, less cancellation in q.k - ||k||^2 / 2
    kt = torch.from_numpy(k - centre)
    qt = torch.from_numpy(q - centre)
    v = torch.from_numpy(y)[None, None, :, None]  # 4-D: the fused CPU kernel's layout
    bias = -(kt * kt).sum(1) / (2 * h * h)
    rows = max(1, 2**23 // k.shape[0])
    out = []
    with torch.no_grad():
        for s in range(0, qt.shape[0], rows):
            qs = qt[s:s + rows]
            mask = bias[None, :].expand(qs.shape[0], -1)
            o = F.scaled_dot_product_attention(qs[None, None], kt[None, None], v,
                                               attn_mask=mask[None, None], scale=1.0 / (h * h))
            out.append(o[0, 0, :, 0])
    return {"mean": torch.cat(out).numpy(), "total": None}


def statsmodels_kernelreg(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float,
                          **_: Any) -> Sums:
    """statsmodels ``KernelReg`` (local constant, Gaussian, the bandwidth given)."""
    from statsmodels.nonparametric.kernel_regression import KernelReg

    d = k.shape[1]
    fit = KernelReg(y, k, "c" * d, reg_type="lc", bw=[h] * d)
    return {"mean": np.asarray(fit.fit(q)[0]), "total": None}


BINNED_NOTE = "sums on its grid, interpolated linearly to the queries"
ALL = ("gaussian", "laplacian", "epanechnikov")
GAUSS = ("gaussian",)
PEERS: dict[str, Peer] = {p.name: p for p in (
    Peer("kdepy", "binned", "KDEpy", "KDEpy", ALL, (1, 2, 3), kdepy, BINNED_NOTE),
    Peer("statsmodels-fft", "binned", "statsmodels", "statsmodels", GAUSS, (1,),
         statsmodels_fft,
         "the unweighted sum only (no weights with fft=True): 1 of the 2 sums; " + BINNED_NOTE),
    Peer("r-kernsmooth", "binned", "R's KernSmooth", "shutil", GAUSS, (1,), r_kernsmooth,
         "locpoly(degree = 0) and bkde, R's part timed inside R; " + BINNED_NOTE,
         missing=_r_kernsmooth_missing),
    Peer("fastkde", "binned", "fastkde", "fastkde", GAUSS, (1,), fastkde,
         "its density only, with its own kernel chosen from the data (no bandwidth or "
         "weights argument): 1 sum of another kernel, no error to compare"),
    Peer("keops", "exact", "pykeops", "pykeops.numpy", ALL, (1, 2, 3), keops,
         "exact direct sums on the CPU", budget=1e9),
    Peer("torch-sdpa", "exact", "torch", "torch", GAUSS, (1, 2, 3), torch_sdpa,
         "exact, the mean only (softmax normalizes)", budget=1e9),
    Peer("statsmodels-kernelreg", "exact", "statsmodels", "statsmodels", GAUSS, (1, 2, 3),
         statsmodels_kernelreg, "exact, the mean only", budget=1e8),
)}
