"""Learned metrics for Gaussian Nadaraya-Watson: MetricKernelRegressor against metric-learn's MLKR.

Both minimise the leave-one-out squared error of the Gaussian smoother over a
linear map ``L`` (Weinberger and Tesauro 2007) with L-BFGS-B (SciPy).
``MetricKernelRegressor`` writes the objective as attention with
``W_q = W_k = L`` and differentiates it with torch autograd, starting from the
identity at the isotropic scale with the lowest leave-one-out error;
metric-learn codes the gradient by hand and starts from the identity. By
default ``MetricKernelRegressor`` stops early on 20% held-out data and refits
on all of it with the chosen number of steps (the full metric's leave-one-out
error overfits small noisy data); ``early_stopping=False`` minimises exactly
metric-learn's objective. The isotropic baseline is ``NadarayaWatsonRegressor``
with its bandwidth chosen by exact leave-one-out cross-validation.

* Data: ``make_friedman1`` (10 features, 5 informative, noise 1.0,
  ``--n`` samples) and ``load_diabetes`` (442 samples, 10 features), split
  70/30; for each seed ``s`` in ``0 .. --seeds - 1`` the friedman1 sample and
  the split of both data sets are drawn with ``random_state=s``. Features are
  standardised on the training part for every method; every library gets the
  same ``max_iter`` (``--max-iter``).
* Reported per data set: held-out R^2 averaged over the seeds (and its
  standard deviation across them), fit time (seconds, best of ``--repeat``
  runs after a warm-up, averaged over the seeds; one thread for every library
  unless ``--threads=N``, same machine, same run), and the ratio of fit times
  to metric-learn's; with several seeds, the R^2 difference between
  ``MetricKernelRegressor`` and metric-learn paired by split (mean, standard
  error, and on how many splits it is >= 0).

Run::

    python benchmarks/bench_mlkr.py            # both data sets, 5 splits, 100 iterations
    python benchmarks/bench_mlkr.py --seeds 1  # the first split only
    python benchmarks/bench_mlkr.py --n 2000 --max-iter 200

metric-learn 0.7 calls scikit-learn's ``check_X_y(force_all_finite=...)``,
renamed ``ensure_all_finite`` in scikit-learn 1.6; the script adapts that
keyword so the peer runs unchanged otherwise.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time

if __name__ == "__main__":
    # one thread each for torch, NumPy/SciPy's BLAS and OpenMP: comparable timings on a
    # shared machine (override with --threads)
    _threads = next((a.split("=")[1] for a in sys.argv if a.startswith("--threads=")), "1")
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads)

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import nadaraya
from nadaraya.estimators import MetricKernelRegressor, NadarayaWatsonRegressor


def _metric_learn():
    """metric-learn's MLKR, with the renamed scikit-learn keyword adapted."""
    import sklearn.utils.validation as validation
    from metric_learn import MLKR, _util

    if "force_all_finite" not in inspect.signature(validation.check_array).parameters:
        def adapt(fn):
            def call(*args, **kwargs):
                if "force_all_finite" in kwargs:
                    kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
                return fn(*args, **kwargs)
            return call

        _util.check_X_y = adapt(validation.check_X_y)
        _util.check_array = adapt(validation.check_array)
    return MLKR


def _data(name: str, n: int, seed: int):
    if name == "friedman1":
        X, y = make_friedman1(n, n_features=10, noise=1.0, random_state=seed)
    else:
        X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


REPEAT = 3


def _timed(fn):
    """Result and the best of ``REPEAT`` wall-clock times (the machine may be shared)."""
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, min(times)


def _warm_up() -> None:
    X, y = make_friedman1(60, n_features=10, random_state=1)
    MetricKernelRegressor(max_iter=2).fit(X, y)
    _metric_learn()(max_iter=2).fit(X, y)
    NadarayaWatsonRegressor(bandwidth="cv").fit(X, y)


def run(name: str, n: int, max_iter: int, seed: int) -> list[tuple[str, float, float]]:
    """(method, held-out R^2, fit seconds) for one split."""
    Xtr, Xte, ytr, yte = _data(name, n, seed)
    rows = []
    ours, t = _timed(lambda: MetricKernelRegressor(max_iter=max_iter, standardize=False)
                     .fit(Xtr, ytr))
    rows.append(("MetricKernelRegressor (nadaraya)", r2_score(yte, ours.predict(Xte)), t))
    plain, t = _timed(lambda: MetricKernelRegressor(max_iter=max_iter, standardize=False,
                                                    early_stopping=False).fit(Xtr, ytr))
    rows.append(("  same, early_stopping=False", r2_score(yte, plain.predict(Xte)), t))
    MLKR = _metric_learn()
    peer, t = _timed(lambda: MLKR(max_iter=max_iter, random_state=0).fit(Xtr, ytr))
    # metric-learn's kernel is exp(-||A x - A x'||^2): Gaussian of bandwidth 1/sqrt(2)
    pred = nadaraya.smooth(peer.transform(Xte), peer.transform(Xtr), ytr, "gaussian",
                           bandwidth=2**-0.5, empty="nearest")
    rows.append(("metric-learn MLKR", r2_score(yte, pred), t))
    iso, t = _timed(lambda: NadarayaWatsonRegressor(bandwidth="cv").fit(Xtr, ytr))
    rows.append(("isotropic NW, CV bandwidth", r2_score(yte, iso.predict(Xte)), t))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="friedman1 samples (default 1000)")
    parser.add_argument("--max-iter", type=int, default=100, help="L-BFGS iterations")
    parser.add_argument("--data", nargs="+", default=["friedman1", "diabetes"])
    parser.add_argument("--seeds", type=int, default=5,
                        help="splits (and friedman1 samples) averaged over: seeds 0 .. SEEDS-1")
    parser.add_argument("--repeat", type=int, default=3, help="timings per method (best kept)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for every library (give as --threads=N)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    global REPEAT
    REPEAT = max(1, args.repeat)
    _warm_up()
    for name in args.data:
        runs = [run(name, args.n, args.max_iter, seed) for seed in range(max(1, args.seeds))]
        labels = [label for label, _, _ in runs[0]]
        r2 = np.array([[row[1] for row in rows] for rows in runs])  # (seeds, methods)
        fit = np.array([[row[2] for row in rows] for rows in runs]).mean(0)
        print(f"\n{name}  (max_iter={args.max_iter}, {len(runs)} split(s); R2 mean and sd "
              f"over splits, fit s mean)")
        print(f"{'method':<34} {'test R2':>8} {'sd':>6} {'fit s':>8} {'time / MLKR':>12}")
        for j, label in enumerate(labels):
            print(f"{label:<34} {r2[:, j].mean():8.3f} {r2[:, j].std():6.3f} {fit[j]:8.2f} "
                  f"{fit[j] / fit[2]:12.2f}")
        if len(runs) > 1:
            # paired over the splits: the spread between splits is common to both
            gap = r2[:, 0] - r2[:, 2]
            print(f"R2 MetricKernelRegressor - MLKR: mean {gap.mean():+.4f}, standard error "
                  f"{gap.std(ddof=1) / np.sqrt(len(gap)):.4f}; >= on "
                  f"{int(np.sum(gap >= 0))} of {len(gap)} splits ("
                  + " ".join(f"{a:.3f}/{b:.3f}" for a, b in r2[:, [0, 2]]) + ")")


if __name__ == "__main__":
    main()
