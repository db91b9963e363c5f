"""Bandwidth search benchmark: criterion reached, evaluations and time, against statsmodels cv_ls.

For each problem ``bandwidth="cv"`` is fitted and statsmodels'
``KernelReg(..., bw="cv_ls")`` (Nelder-Mead from the normal-reference
bandwidth) on the same data; our criterion is evaluated at statsmodels'
bandwidth (a fit at that bandwidth, its ``cv_score_``) and compared with
ours: ``gain`` is their score over ours minus one (>= 0: ours is no worse).
Problems:

* ``sine1``: ``y = 2 sin x + N(0, 1)``, ``x ~ U(0, 6)`` (the tests' 1-D task);
* ``three``: ``sin(2 x1) + x2^2 - cos(x3) + 0.3 N`` on normal ``x`` (the tests' 3-D task);
* ``trend_hf``: a smooth trend in ``x1`` and a high-frequency wave in ``x2``
  (several local minima in ``h2``);
* ``irrelevant``: ``y = sin(2 pi x1) + noise``, ``x2`` unrelated;
* ``np3``: three regressors, one of them irrelevant, in the style of R np's examples;
* ``linear``: ``y = 1 + 2 x + N(0, 0.5^2)``, local linear (optimum: ``h = inf``).

Run ``python benchmarks/bench_search.py`` (``--problems``, ``--n``, ``--no-peer``).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def problem(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """``(X, y, reg)`` of a named problem; ``reg`` is ``"lc"`` or ``"ll"``."""
    rng = np.random.default_rng(seed)
    if name == "sine1":
        x = rng.uniform(0, 6, (n, 1))
        return x, 2 * np.sin(x[:, 0]) + rng.normal(size=n), "lc"
    if name == "three":
        X = rng.normal(size=(n, 3))
        y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - np.cos(X[:, 2]) + 0.3 * rng.normal(size=n)
        return X, y, "lc"
    if name == "trend_hf":
        X = rng.uniform(0, 1, (n, 2))
        y = 2 * X[:, 0] + 0.6 * np.sin(30 * X[:, 1]) + 0.4 * rng.normal(size=n)
        return X, y, "lc"
    if name == "irrelevant":
        X = rng.uniform(0, 1, (n, 2))
        return X, np.sin(2 * np.pi * X[:, 0]) + 0.3 * rng.normal(size=n), "lc"
    if name == "np3":
        X = np.c_[rng.uniform(0, 1, n), rng.normal(size=n), rng.uniform(-1, 1, n)]
        y = np.cos(2 * np.pi * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
        return X, y, "ll"
    if name == "linear":
        x = rng.uniform(0, 1, (n, 1))
        return x, 1 + 2 * x[:, 0] + 0.5 * rng.normal(size=n), "ll"
    raise SystemExit(f"unknown problem {name!r}")


PROBLEMS = ("sine1", "three", "trend_hf", "irrelevant", "np3", "linear")
ESTIMATORS = {"lc": NadarayaWatsonRegressor, "ll": LocalPolynomialRegressor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    print(f"{'problem':<11}{'seed':>5}{'evals':>7}{'ours s':>8}{'peer s':>8}{'ratio':>7}"
          f"{'gain':>11}  bandwidth (ours | statsmodels)")
    for name in args.problems.split(","):
        for seed in map(int, args.seeds.split(",")):
            X, y, reg = problem(name, args.n, seed)
            cls = ESTIMATORS[reg]
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = cls().fit(X, y)
            ours_s = time.perf_counter() - start
            res = model.cv_results_
            evals = len(res["score"]) + res["subsample_evaluations"]
            h = np.atleast_1d(model.bandwidth_)
            peer_s, gain, theirs = float("nan"), float("nan"), ""
            if not args.no_peer:
                from statsmodels.nonparametric.kernel_regression import KernelReg

                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sm = KernelReg(y, X, "c" * X.shape[1], reg_type=reg, bw="cv_ls")
                peer_s = time.perf_counter() - start
                bw = np.abs(np.asarray(sm.bw, dtype=float))
                at = cls(bandwidth=bw).fit(X, y).cv_score_
                gain = at / model.cv_score_ - 1.0
                theirs = np.array2string(bw, precision=4)
            print(f"{name:<11}{seed:>5}{evals:>7}{ours_s:>8.2f}{peer_s:>8.2f}"
                  f"{peer_s / ours_s:>7.2f}{gain:>11.2e}  "
                  f"{np.array2string(h, precision=4)} | {theirs}", flush=True)


if __name__ == "__main__":
    main()
