"""Kernel density benchmark: log densities and CV bandwidths against peers, as ratios.

Tasks, on ``x ~ N(0, 1)`` mixed with ``N(3, 0.5^2)`` (one feature):

* ``score``: ``score_samples`` at a fixed Gaussian bandwidth with ``n`` samples
  and ``n`` queries, for each size of ``--sizes``, exact and with
  ``--tolerance``. Peers: scipy ``gaussian_kde.logpdf``, scikit-learn
  ``KernelDensity`` (``rtol=0``: exact sums over its tree) and, up to
  ``--peer-max`` rows, statsmodels ``KDEMultivariate.pdf``. The largest
  relative difference of the densities to scipy's is printed beside the times.
* ``cv``: the ``cv_ml`` bandwidth search (our coordinate search on ``log h``)
  against statsmodels' ``KDEMultivariate(bw="cv_ml")`` (Nelder-Mead over its
  leave-one-out loop), on ``--cv-sizes``; both criteria are printed in
  statsmodels' units (lower is better).

Ratios are a peer's time over ours (above 1: we are faster). Each time is the
best of ``--repeat`` runs; the load average is printed with the results. Run::

    python benchmarks/bench_density.py --tasks score,cv --sizes 1000,10000 --cv-sizes 200,500
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np

from _timing import best_time
from nadaraya.estimators import KernelDensity


def make_data(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = n // 3
    return np.concatenate([rng.normal(size=n - k), 3 + 0.5 * rng.normal(size=k)])[:, None]


def score_task(sizes: list[int], tolerance: float, peer_max: int, repeat: int) -> None:
    print("score_samples, Gaussian, h = 0.2, n samples = n queries")
    print(f"{'n':>8} {'ours s':>9} {'tol s':>9} {'scipy/ours':>10} {'sklearn/ours':>12} "
          f"{'sm/ours':>8} {'max rel diff':>12}")
    for n in sizes:
        _score_size(n, tolerance, peer_max, repeat)


def _score_size(n: int, tolerance: float, peer_max: int, repeat: int) -> None:
    from scipy.stats import gaussian_kde
    from sklearn.neighbors import KernelDensity as SkKDE
    from statsmodels.nonparametric.kernel_density import KDEMultivariate

    h = 0.2
    x = make_data(n)
    q = np.linspace(-4, 6, n)[:, None]
    ours_t, ours = best_time(lambda: KernelDensity(bandwidth=h).fit(x).score_samples(q),
                             repeat)
    tol_t, _ = best_time(lambda: KernelDensity(bandwidth=h, tolerance=tolerance)
                         .fit(x).score_samples(q), repeat)
    sd = float(np.std(x[:, 0], ddof=1))
    sp_t, sp = best_time(lambda: gaussian_kde(x[:, 0], bw_method=h / sd).logpdf(q[:, 0]),
                         repeat)
    sk_t, _ = best_time(lambda: SkKDE(bandwidth=h).fit(x).score_samples(q), repeat)
    sm = "-"
    if n <= peer_max:
        sm_t, _ = best_time(lambda: KDEMultivariate(x, var_type="c", bw=[h]).pdf(q), 1)
        sm = f"{sm_t / ours_t:8.2f}"
    diff = float(np.max(np.abs(np.expm1(ours - sp))))
    print(f"{n:>8} {ours_t:9.4f} {tol_t:9.4f} {sp_t / ours_t:10.2f} {sk_t / ours_t:12.2f} "
          f"{sm:>8} {diff:12.2e}")


def cv_task(sizes: list[int], repeat: int) -> None:
    print("cv_ml bandwidth search, one continuous feature")
    print(f"{'n':>8} {'ours s':>9} {'sm/ours':>8} {'h ours':>10} {'h sm':>10} "
          f"{'crit ours':>12} {'crit sm':>12}")
    for n in sizes:
        _cv_size(n, repeat)


def _cv_size(n: int, repeat: int) -> None:
    from statsmodels.nonparametric.kernel_density import KDEMultivariate

    x = make_data(n)
    ours_t, ours = best_time(lambda: KernelDensity(bandwidth="cv_ml").fit(x), repeat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm_t, sm = best_time(lambda: KDEMultivariate(x, var_type="c", bw="cv_ml"), 1)
    crit = sm.loo_likelihood
    print(f"{n:>8} {ours_t:9.3f} {sm_t / ours_t:8.2f} {ours.bandwidth_[0]:10.6f} "
          f"{sm.bw[0]:10.6f} {crit(ours.bandwidth_, np.log):12.6f} "
          f"{crit(sm.bw, np.log):12.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="score,cv")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--cv-sizes", default="200,500")
    parser.add_argument("--tolerance", type=float, default=1e-8)
    parser.add_argument("--peer-max", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    tasks = args.tasks.split(",")
    if "score" in tasks:
        score_task([int(s) for s in args.sizes.split(",")], args.tolerance, args.peer_max,
                   args.repeat)
    if "cv" in tasks:
        cv_task([int(s) for s in args.cv_sizes.split(",")], args.repeat)


if __name__ == "__main__":
    main()
