"""Mixed-data bandwidth selection: our leave-one-out CV against statsmodels, in the same run.

Data: ``n`` rows of 2 continuous and 2 unordered categorical regressors,
``x1, x2 ~ U(0, 1)``, ``u1`` with 3 levels, ``u2`` with 4 levels,
``y = sin(2 pi x1) + x2^2 + 0.5 [u1 = 1] + 0.2 [u2 even] + N(0, 0.3^2)``;
or, with ``--data wage1``, the shipped wage data (``lwage`` on ``educ``,
``exper``, ``female``, ``married``; 526 rows).

Ours: ``NadarayaWatsonRegressor(bandwidth="cv", var_types="ccuu")`` (Gaussian
and Aitchison-Aitken kernels, exact leave-one-out sums). Peer: statsmodels
``KernelReg(var_type="ccuu", reg_type="lc", bw="cv_ls")``, the same kernels
and the same criterion (Nelder-Mead over a leave-one-out loop), run in a
child process stopped after ``--peer-timeout`` seconds.

Both bandwidths are scored by both objectives (our ``cv_score_`` at a fixed
bandwidth, statsmodels' ``cv_loo``): the two agree at equal bandwidths (the
``objective gap`` column), so "equal or lower CV score" is checked on one
scale. A peer that timed out at some ``n`` gets a time extrapolated from its
largest finished ``n`` as ``t (n / n0)^2`` (its loop is O(n^2) per
evaluation), labelled ``extrapolated``; no ratio is printed as measured
for it.

Run ``python benchmarks/bench_mixed.py --help``; the issue's figure is::

    python benchmarks/bench_mixed.py --n 1000,2000,10000 --peer-timeout 600

(``--peer-max-n 2000`` skips the statsmodels run at 10000, hours long, and
extrapolates it instead.)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np

from nadaraya.estimators import NadarayaWatsonRegressor

VAR_TYPE = "ccuu"


def simulate(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``X`` of shape (n, 4) (two continuous columns, two level codes) and ``y`` (n,)."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.uniform(size=n), rng.uniform(size=n)
    u1, u2 = rng.integers(0, 3, n), rng.integers(0, 4, n)
    y = (np.sin(2 * np.pi * x1) + x2**2 + 0.5 * (u1 == 1) + 0.2 * (u2 % 2 == 0)
         + 0.3 * rng.normal(size=n))
    return np.column_stack([x1, x2, u1, u2]).astype(float), y


def wage1() -> tuple[np.ndarray, np.ndarray]:
    """The wage data as ``educ, exper, female, married`` (codes) and ``lwage``."""
    from nadaraya.datasets import load_wage1

    frame = load_wage1()
    X = np.column_stack([frame["educ"], frame["exper"], frame["female"].cat.codes,
                         frame["married"].cat.codes]).astype(float)
    return X, frame["lwage"].to_numpy()


def ours(X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, float]:
    """Seconds, bandwidths and leave-one-out score of our cross-validated fit."""
    start = time.perf_counter()
    model = NadarayaWatsonRegressor(bandwidth="cv", var_types=VAR_TYPE).fit(X, y)
    return time.perf_counter() - start, np.asarray(model.bandwidth_, float), model.cv_score_


def our_score(X: np.ndarray, y: np.ndarray, h: np.ndarray) -> float:
    """Our leave-one-out score at the fixed bandwidths ``h``."""
    return NadarayaWatsonRegressor(bandwidth=h, var_types=VAR_TYPE).fit(X, y).cv_score_


def _peer(X: np.ndarray, y: np.ndarray, h_ours: np.ndarray, queue: Any) -> None:
    import warnings

    from statsmodels.nonparametric.kernel_regression import KernelReg

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    model = KernelReg(y, X, var_type=VAR_TYPE, reg_type="lc", bw="cv_ls")
    seconds = time.perf_counter() - start
    h = np.asarray(model.bw, float)
    queue.put(("fit", seconds, h, float(np.squeeze(model.cv_loo(h, model._est_loc_constant)))))
    fixed = KernelReg(y, X, var_type=VAR_TYPE, reg_type="lc", bw=h_ours)
    queue.put(("ours", float(np.squeeze(fixed.cv_loo(h_ours, fixed._est_loc_constant)))))


def peer(X: np.ndarray, y: np.ndarray, h_ours: np.ndarray, timeout: float) -> dict[str, Any]:
    """statsmodels' cross-validated fit in a child process, stopped after ``timeout`` s."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peer, args=(X, y, h_ours, queue), daemon=True)
    proc.start()
    out: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while "score_at_ours" not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                item = queue.get(timeout=min(left, 1.0))
            except Exception:  # queue.Empty: keep waiting until the deadline
                if not proc.is_alive() and queue.empty():
                    break
                continue
            if item[0] == "fit":
                out.update(seconds=item[1], h=item[2], score=item[3])
            else:
                out["score_at_ours"] = item[1]
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="1000,2000",
                        help="comma-separated sizes of the simulated data (default 1000,2000)")
    parser.add_argument("--data", choices=("simulated", "wage1"), default="simulated")
    parser.add_argument("--peer-timeout", type=float, default=300.0,
                        help="seconds statsmodels may take at one size (default 300)")
    parser.add_argument("--peer-max-n", type=int, default=None,
                        help="run statsmodels only up to this size; above it, its time is "
                             "extrapolated (labelled) from the largest size it finished")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.n.split(",")] if args.data == "simulated" else [526]
    print(f"mixed-data CV bandwidth, var_type={VAR_TYPE!r}, data={args.data}, "
          f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    print(f"{'n':>6} {'ours s':>8} {'statsmodels s':>22} {'ratio':>8}  "
          f"{'CV ours@ours':>12} {'sm@ours':>10} {'ours@sm':>10} {'sm@sm':>10} "
          f"{'gap':>8}  bandwidths (ours | statsmodels)")
    done: tuple[int, float] | None = None
    for n in sizes:
        X, y = simulate(n, args.seed) if args.data == "simulated" else wage1()
        t_ours, h_ours, cv_ours = ours(X, y)
        skip = args.peer_max_n is not None and n > args.peer_max_n
        res = {} if skip else peer(X, y, h_ours, args.peer_timeout)
        if "seconds" in res:
            done = (n, res["seconds"])
            peer_time = f"{res['seconds']:.2f}"
            ratio = f"{res['seconds'] / t_ours:.1f}x"
            ours_at_sm = our_score(X, y, res["h"])
            scores = (f"{res.get('score_at_ours', float('nan')):10.6f} {ours_at_sm:10.6f} "
                      f"{res['score']:10.6f} {abs(ours_at_sm - res['score']):8.1e}")
            hs = f"{np.array2string(h_ours, precision=4)} | " \
                 f"{np.array2string(res['h'], precision=4)}"
        else:
            if done is not None:
                guess = done[1] * (n / done[0]) ** 2
                peer_time = (f"~{guess:.0f} (extrap.)" if skip
                             else f">{args.peer_timeout:.0f} (~{guess:.0f} extrap.)")
                ratio = f"~{guess / t_ours:.0f}x ext"
            else:
                peer_time = f">{args.peer_timeout:.0f} (timeout)"
                ratio = f">{args.peer_timeout / t_ours:.0f}x"
            scores = f"{'-':>10} {'-':>10} {'-':>10} {'-':>8}"
            hs = f"{np.array2string(h_ours, precision=4)} | -"
        print(f"{n:>6} {t_ours:8.2f} {peer_time:>22} {ratio:>8}  {cv_ours:12.6f} {scores}  {hs}",
              flush=True)


if __name__ == "__main__":
    main()
