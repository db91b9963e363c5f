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
scale. Every evaluation statsmodels makes is reported back with its time, so
a peer stopped at the timeout still gives a measured lower bound on its time
(printed as ``>``) and its best score so far.

statsmodels' search at n = 10000 takes about an hour. ``--replay`` runs its
search alongside: its start (``1.06 std n^(-1/(4 + d))``) and its
``scipy.optimize.fmin`` options on a vectorized copy of its ``cv_loo``
(:func:`replica`, the same formula summed by blocks of rows). The replay's
evaluations are checked against statsmodels' own, point by point, as far as
statsmodels got; where they agree, the replay gives where its search ends
(bandwidths, score, evaluation count) and its time as that count times its
own measured seconds per evaluation, labelled ``replayed``. Without a replay
a timed-out peer gets a time extrapolated from its largest finished ``n`` as
``t (n / n0)^2`` (its loop is O(n^2) per evaluation), labelled
``extrapolated``.

Run ``python benchmarks/bench_mixed.py --help``; the issue's figure is::

    python benchmarks/bench_mixed.py --n 10000 --peer-timeout 1800 --replay

and the sizes statsmodels finishes: ``--n 1000,2000 --peer-timeout 600``.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from _machine import header
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

    class Traced(KernelReg):
        """statsmodels' ``KernelReg``, reporting each evaluation of its objective."""

        def cv_loo(self, bw: np.ndarray, func: Any) -> float:
            value = super().cv_loo(bw, func)
            queue.put(("eval", time.perf_counter() - start, np.array(bw, float),
                       float(np.squeeze(value))))
            return value

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    model = Traced(y, X, var_type=VAR_TYPE, reg_type="lc", bw="cv_ls")
    seconds = time.perf_counter() - start
    h = np.asarray(model.bw, float)
    queue.put(("fit", seconds, h, float(np.squeeze(
        KernelReg.cv_loo(model, h, model._est_loc_constant)))))
    fixed = KernelReg(y, X, var_type=VAR_TYPE, reg_type="lc", bw=h_ours)
    queue.put(("ours", float(np.squeeze(fixed.cv_loo(h_ours, fixed._est_loc_constant)))))


def peer(X: np.ndarray, y: np.ndarray, h_ours: np.ndarray, timeout: float,
         meanwhile: Callable[[], Any] | None = None) -> dict[str, Any]:
    """statsmodels' cross-validated fit in a child process, stopped after ``timeout`` s.

    The result holds ``evals``: the (seconds, bandwidths, score) of every
    evaluation of its objective, in order, whether it finished or not. With
    ``meanwhile``, that function runs here while the child works; its result
    is ``out["meanwhile"]``.
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peer, args=(X, y, h_ours, queue), daemon=True)
    proc.start()
    out: dict[str, Any] = {"evals": []}
    deadline = time.monotonic() + timeout
    try:
        if meanwhile is not None:
            out["meanwhile"] = meanwhile()
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
            if item[0] == "eval":
                out["evals"].append(item[1:])
            elif item[0] == "fit":
                out.update(seconds=item[1], h=item[2], score=item[3])
            else:
                out["score_at_ours"] = item[1]
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()
    while True:  # what the child sent before it stopped
        try:
            item = queue.get(timeout=0.1)
        except Exception:  # queue.Empty
            break
        if item[0] == "eval":
            out["evals"].append(item[1:])
    return out


def replica(X: np.ndarray, y: np.ndarray, block: int = 512) -> Callable[[np.ndarray], float]:
    """statsmodels' ``cv_loo`` for ``var_type="ccuu"``, local constant, vectorized.

    The same formula as its loop (Gaussian kernels ``exp(-d^2 / (2 h^2))`` for
    the continuous columns; Aitchison-Aitken, ``1 - lambda`` on a level match
    and ``lambda / (levels - 1)`` otherwise, for the unordered ones, with
    ``lambda`` used as given, as statsmodels does even outside [0, 1]), summed
    over blocks of rows instead of one row at a time. The pairwise squared
    differences and level mismatches are computed once and held (about 1.8 GB
    at n = 10000), so each evaluation costs a few passes over them.
    The constants statsmodels multiplies every weight by cancel in the ratio.
    """
    n = len(y)
    diff = [(X[:, None, j] - X[None, :, j]) ** 2 for j in (0, 1)]
    mismatch = [X[:, None, j] != X[None, :, j] for j in (2, 3)]
    levels = [np.unique(X[:, j]).size for j in (2, 3)]
    rows = np.arange(n)

    def cv_loo(bw: np.ndarray) -> float:
        total = 0.0
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            k = np.exp(-diff[0][lo:hi] / (bw[0] ** 2 * 2.0))
            k *= np.exp(-diff[1][lo:hi] / (bw[1] ** 2 * 2.0))
            for j, lam in enumerate(bw[2:]):
                k *= np.where(mismatch[j][lo:hi], lam / (levels[j] - 1), 1 - lam)
            k[rows[lo:hi] - lo, rows[lo:hi]] = 0.0
            fit = (k @ y) / k.sum(axis=1)
            total += float(((y[lo:hi] - fit) ** 2).sum())
        return total / n

    return cv_loo


def replay(X: np.ndarray, y: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """statsmodels' search (its start, ``scipy.optimize.fmin`` with its options) on ``replica``.

    Returns every evaluation's (bandwidths, score) in order; the last best one
    is the bandwidth statsmodels returns when its own evaluations agree.
    """
    from scipy import optimize

    objective = replica(X, y)
    trace: list[tuple[np.ndarray, float]] = []

    def traced(bw: np.ndarray) -> float:
        value = objective(bw)
        trace.append((np.array(bw, float), value))
        return value

    h0 = 1.06 * np.std(X, axis=0) * len(y) ** (-1.0 / (4 + X.shape[1]))
    optimize.fmin(traced, x0=h0, maxiter=1e3, maxfun=1e3, disp=0)
    return trace


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
    parser.add_argument("--replay", action="store_true",
                        help="while statsmodels runs, replay its search (its start and "
                             "Nelder-Mead options) on a vectorized copy of its objective; a "
                             "peer stopped at the timeout then gets its evaluation count, "
                             "bandwidths and score from the replay, and its time as that "
                             "count times its own measured seconds per evaluation")
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.n.split(",")] if args.data == "simulated" else [526]
    print(header(("nadaraya", "statsmodels", "numpy", "scipy")))
    print(f"mixed-data CV bandwidth, var_type={VAR_TYPE!r}, data={args.data}")
    print(f"{'n':>6} {'ours s':>8} {'statsmodels s':>22} {'ratio':>8}  "
          f"{'CV ours@ours':>12} {'sm@ours':>10} {'ours@sm':>10} {'sm@sm':>10} "
          f"{'gap':>8}  bandwidths (ours | statsmodels)")
    done: tuple[int, float] | None = None
    for n in sizes:
        X, y = simulate(n, args.seed) if args.data == "simulated" else wage1()
        t_ours, h_ours, cv_ours = ours(X, y)
        skip = args.peer_max_n is not None and n > args.peer_max_n
        trace = functools.partial(replay, X, y) if args.replay and not skip else None
        res = {} if skip else peer(X, y, h_ours, args.peer_timeout, trace)
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
        if not skip:
            report_trace(X, y, t_ours, res)


def report_trace(X: np.ndarray, y: np.ndarray, t_ours: float, res: dict[str, Any]) -> None:
    """statsmodels' progress and, with a replay, where its search ends and what that takes."""
    evals = res["evals"]
    if not evals:
        print("        statsmodels: no evaluation finished before the timeout")
        return
    elapsed = evals[-1][0]
    per_eval = elapsed / len(evals)
    best = min(v for _, _, v in evals)
    done = "finished" if "seconds" in res else "stopped at the timeout"
    print(f"        statsmodels {done}: {len(evals)} evaluations in {elapsed:.0f} s "
          f"({per_eval:.2f} s each), best score {best:.9f}")
    trace = res.get("meanwhile")
    if trace is None:
        return
    k = min(len(trace), len(evals))
    tiny = np.finfo(float).tiny  # a zero bandwidth or score compares absolutely
    agree = max(float(np.max(np.abs(evals[i][1] - trace[i][0])
                             / np.maximum(np.abs(evals[i][1]), tiny))) for i in range(k))
    scores = max(abs(evals[i][2] - trace[i][1]) / max(abs(evals[i][2]), tiny) for i in range(k))
    values = np.array([v for _, v in trace])
    h_sm = trace[int(np.nanargmin(values))][0]
    cv_sm = float(np.nanmin(values))
    guess = per_eval * len(trace)
    print(f"        replay: {len(trace)} evaluations; its first {k} equal statsmodels' own to "
          f"{agree:.1e} (bandwidths) and {scores:.1e} (scores), relative")
    print(f"        replay ends at {np.array2string(h_sm, precision=4)}, score {cv_sm:.9f} "
          f"(ours there {our_score(X, y, h_sm):.9f}; ours at our bandwidths above)")
    if "seconds" in res:
        print(f"        statsmodels' own run: {res['seconds']:.0f} s; "
              f"replayed estimate {guess:.0f} s")
    else:
        print(f"        statsmodels' time (replayed: {len(trace)} x {per_eval:.2f} s) "
              f"~{guess:.0f} s, ~{guess / t_ours:.1f}x ours; measured: >{elapsed:.0f} s, "
              f">{elapsed / t_ours:.1f}x ours")


if __name__ == "__main__":
    main()
