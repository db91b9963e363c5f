"""Plug-in bandwidths: the density functionals summed by the engine, against peers, as ratios.

Tasks, on skewed data (``z^3``, ``z`` normal; columns mixed in ``d`` dimensions):

* ``sj``: the 1-D Sheather-Jones bandwidth (:func:`sheather_jones`, exact pair
  sums through the engine with ``GaussianDerivative``). Peers: the direct NumPy
  pair sum over half the pairs (symmetry) that the selector used before, run
  through the same root search here, and R's ``bw.SJ`` (binned pair distances,
  ``nb = 1000`` by default and ``nb = 1e5``; timed inside R).
* ``diag``: the diagonal plug-in in ``d`` dimensions (:func:`plugin_diagonal`,
  ``d (d + 1) / 2`` engine sums of ``GaussianDerivative`` and one of
  ``GaussianLaplacian``). Peer: R's ``ks::Hpi.diag(binned = FALSE, pilot =
  "dscalar")`` (timed inside R).
* ``dpi``: Ruppert, Sheather and Wand's direct plug-in for local linear
  regression (:func:`dpill`, binned sums by the grid engine). Peer: R's
  ``KernSmooth::dpill`` (timed inside R), which it equals to rounding.

Ratios are a peer's time over ours (above 1: we are faster); each time is the
best of ``--repeat`` runs; relative differences of the bandwidths are printed
beside them. Run::

    python benchmarks/bench_plugin.py --tasks sj,diag,dpi --sizes 500,2000 --dims 2,4
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import tempfile

import numpy as np
from scipy.optimize import brentq

from _timing import best_time
from nadaraya.estimators._plugin import dpill
from nadaraya.estimators._plugin_density import sheather_jones, weighted_quantile
from nadaraya.estimators._plugin_diag import plugin_diagonal


def make_data(n: int, d: int, seed: int = 0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=(n, d))
    M = np.eye(d) + 0.4 * np.triu(np.ones((d, d)), 1)
    return (z**3) @ M if d > 1 else z**3


def _numpy_pair_sum(x: np.ndarray, g: float, order: int, block: int = 1024) -> float:
    """``sum_ij phi^(order)((x_i - x_j) / g) sqrt(2 pi)``, half the pairs, NumPy blocks."""
    total = 0.0
    for start in range(0, x.size, block):
        stop = min(start + block, x.size)
        u2 = np.square(np.subtract.outer(x[start:stop], x[start:]) / g)
        e = np.exp(-0.5 * u2)
        e *= (u2 - 6.0) * u2 + 3.0 if order == 4 else ((u2 - 15.0) * u2 + 45.0) * u2 - 15.0
        rows = e.sum(1)
        total += float(2.0 * rows.sum() - e[:, : stop - start].sum())
    return total


def numpy_sheather_jones(x: np.ndarray) -> float:
    """The same selector with :func:`_numpy_pair_sum` (unit weights)."""
    n = float(x.size)
    sd = float(np.std(x, ddof=1))
    w = np.ones_like(x)
    scale = min(sd, (weighted_quantile(x, w, 0.75) - weighted_quantile(x, w, 0.25)) / 1.349)
    c = n * (n - 1.0) * math.sqrt(2.0 * math.pi)

    def S(g: float) -> float:
        return _numpy_pair_sum(x, g, 4) / (c * g**5)

    a, b = 1.24 * scale * n ** (-1 / 7), 1.23 * scale * n ** (-1 / 9)
    alph2 = 1.357 * (S(a) / (-_numpy_pair_sum(x, b, 6) / (c * b**7))) ** (1 / 7)
    c1 = 1.0 / (2.0 * math.sqrt(math.pi) * n)
    hmax = 1.144 * scale * n ** (-0.2)
    return float(brentq(lambda h: (c1 / S(alph2 * h ** (5 / 7))) ** 0.2 - h, 0.1 * hmax, hmax,
                        xtol=1e-14 * hmax, rtol=1e-12))


def r_times(code: str, x: np.ndarray) -> list[float] | None:
    """Run R ``code`` (reading ``x`` from the CSV ``file``); its printed numbers, or None."""
    if shutil.which("Rscript") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.csv")
        np.savetxt(path, x, delimiter=",", fmt="%.17g")
        script = f'x <- as.matrix(read.csv("{path}", header = FALSE))\n{code}'
        done = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if done.returncode:
        print(f"  (R failed: {done.stderr.strip().splitlines()[-3:]})")
        return None
    return [float(v) for v in done.stdout.split()]


def sj_task(sizes: list[int], repeat: int) -> None:
    print("1-D Sheather-Jones (solve-the-equation), exact pair sums")
    print(f"{'n':>7} {'ours s':>9} {'numpy/ours':>10} {'R nb=1e3/ours':>13} "
          f"{'R nb=1e5/ours':>13} {'numpy rel':>10} {'R 1e5 rel':>10}")
    for n in sizes:
        x = make_data(n, 1)[:, 0]
        ours_t, ours = best_time(lambda x=x: sheather_jones(x), repeat, warmup=True)
        np_t, ref = best_time(lambda x=x: numpy_sheather_jones(x), repeat, warmup=True)
        r = r_times(
            f"x <- x[, 1]; t1 <- min(replicate({repeat}, system.time(bw.SJ(x))[['elapsed']]))\n"
            f"t2 <- min(replicate({repeat}, system.time(bw.SJ(x, nb = 100000L, "
            "tol = 1e-14))[['elapsed']]))\n"
            "cat(t1, t2, sprintf('%.17g', bw.SJ(x, nb = 100000L, tol = 1e-14)))", x[:, None])
        r1 = r2 = rel = "-"
        if r is not None:
            r1, r2 = f"{r[0] / ours_t:13.2f}", f"{r[1] / ours_t:13.2f}"
            rel = f"{abs(r[2] / ours - 1):10.1e}"
        print(f"{n:>7} {ours_t:9.4f} {np_t / ours_t:10.2f} {r1:>13} {r2:>13} "
              f"{abs(ref / ours - 1):10.1e} {rel:>10}")


def diag_task(sizes: list[int], dims: list[int], repeat: int) -> None:
    print("diagonal plug-in (Wand-Jones, pilot dscalar), exact pair sums")
    print(f"{'n':>7} {'d':>3} {'ours s':>9} {'ks/ours':>8} {'max rel diff':>12}")
    for d in dims:
        for n in sizes:
            X = make_data(n, d)
            ours_t, ours = best_time(lambda X=X: plugin_diagonal(X), repeat, warmup=True)
            r = r_times(
                "suppressMessages(library(ks))\n"
                "H <- function() Hpi.diag(x, binned = FALSE, pilot = 'dscalar')\n"
                f"t <- min(replicate({repeat}, system.time(H())[['elapsed']]))\n"
                "cat(t, sprintf('%.17g', sqrt(diag(H()))))", X)
            if r is None:
                print(f"{n:>7} {d:>3} {ours_t:9.4f} {'-':>8} {'-':>12}")
                continue
            # ks stops its search at a relative change 1e-8 of the criterion: ~1e-5 apart
            rel = float(np.max(np.abs(np.array(r[1:]) / ours - 1)))
            print(f"{n:>7} {d:>3} {ours_t:9.4f} {r[0] / ours_t:8.2f} {rel:12.1e}")


def dpi_task(sizes: list[int], repeat: int) -> None:
    print("direct plug-in for local linear regression (dpill), binned on 401 points")
    print(f"{'n':>7} {'ours s':>9} {'R/ours':>8} {'rel diff':>9}")
    for n in sizes:
        rng = np.random.default_rng(n)
        x = rng.uniform(0.0, 1.0, n)
        xy = np.c_[x, np.sin(6.0 * x) + rng.normal(0.0, 0.3, n)]
        ours_t, ours = best_time(lambda xy=xy: dpill(xy[:, 0], xy[:, 1]), repeat, warmup=True)
        r = r_times(
            "suppressMessages(library(KernSmooth))\n"
            f"t <- min(replicate({repeat}, system.time(dpill(x[, 1], x[, 2]))[['elapsed']]))\n"
            "cat(t, sprintf('%.17g', dpill(x[, 1], x[, 2])))", xy)
        if r is None:
            print(f"{n:>7} {ours_t:9.4f} {'-':>8} {'-':>9}")
            continue
        print(f"{n:>7} {ours_t:9.4f} {r[0] / ours_t:8.2f} {abs(r[1] / ours - 1):9.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="sj,diag,dpi")
    parser.add_argument("--sizes", default="500,2000")
    parser.add_argument("--dims", default="2,4")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    tasks = args.tasks.split(",")
    if "sj" in tasks:
        sj_task(sizes, args.repeat)
    if "diag" in tasks:
        diag_task(sizes, [int(d) for d in args.dims.split(",")], args.repeat)
    if "dpi" in tasks:
        dpi_task(sizes, args.repeat)


if __name__ == "__main__":
    main()
