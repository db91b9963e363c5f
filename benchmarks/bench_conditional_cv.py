"""Conditional density least-squares cross-validation against statsmodels, as ratios.

Data: ``x ~ N(0, 1)``, a categorical ``u`` with 3 levels and
``y = sin(x) + 0.8 u + 0.4 e``; ``y`` given ``(x, u)``.

* ``criterion``: one evaluation of the ``cv_ls`` criterion at a fixed bandwidth
  (ours: engine sums in blocks; statsmodels: ``KDEMultivariateConditional.imse``,
  a Python loop over the rows with ``(n - 1)^2`` products each), on ``--sizes``;
  the relative difference of the two values is printed beside the times.
* ``search``: ``ConditionalDensity(bandwidth="cv_ls")`` against
  ``KDEMultivariateConditional(bw="cv_ls")`` on ``--search-sizes``, with both
  criteria in statsmodels' units (lower is better).

Ratios are statsmodels' time over ours (above 1: we are faster). Each time is
the best of ``--repeat`` runs (statsmodels' search runs once); the load
average is printed with the results. Run::

    python benchmarks/bench_conditional_cv.py --sizes 100,200,400 --search-sizes 100
"""

from __future__ import annotations

import argparse
import os
import warnings
from typing import Any

import numpy as np

from _timing import best_time
from nadaraya.estimators import ConditionalDensity
from nadaraya.estimators._conditional_cv import conditional_cv_ls
from nadaraya.estimators._density_fit import density_model, levels_of

_BW = np.array([0.3, 0.4, 0.2])


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, u = rng.normal(size=n), rng.integers(0, 3, n).astype(float)
    return np.column_stack([x, u]), np.sin(x) + 0.8 * u + 0.4 * rng.normal(size=n)


def _statsmodels(X: np.ndarray, y: np.ndarray, bw: Any) -> Any:
    from statsmodels.nonparametric.kernel_density import KDEMultivariateConditional

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KDEMultivariateConditional(endog=y, exog=X, dep_type="c", indep_type="cu",
                                          bw=bw)


def criterion_task(sizes: list[int], repeat: int) -> None:
    print("cv_ls criterion at h = (0.3, 0.4), lambda = 0.2")
    print(f"{'n':>6} {'ours s':>9} {'sm s':>9} {'sm/ours':>8} {'rel diff':>10}")
    for n in sizes:
        X, y = make_data(n)
        Z = np.column_stack([y, X])
        make = density_model("gaussian", "ccu", levels_of(Z, "ccu"), "aitchison-aitken",
                             "wang-van-ryzin", [[0], [1]])
        objective = conditional_cv_ls(make, 1, Z, np.ones(n))
        ours_t, ours = best_time(lambda objective=objective: objective(_BW), repeat)
        sm = _statsmodels(X, y, _BW)
        sm_t, ref = best_time(lambda sm=sm: sm.imse(_BW), 1)
        print(f"{n:>6} {ours_t:9.4f} {sm_t:9.4f} {sm_t / ours_t:8.2f} "
              f"{abs(ours / ref - 1):10.2e}")


def search_task(sizes: list[int], repeat: int) -> None:
    print("cv_ls bandwidth search, y given (x, u)")
    print(f"{'n':>6} {'ours s':>9} {'sm s':>9} {'sm/ours':>8} {'crit ours':>12} {'crit sm':>12}")
    for n in sizes:
        X, y = make_data(n, 1)
        ours_t, ours = best_time(
            lambda X=X, y=y: ConditionalDensity(bandwidth="cv_ls", var_types="cu").fit(X, y),
            repeat)
        sm_t, sm = best_time(lambda X=X, y=y: _statsmodels(X, y, "cv_ls"), 1)
        print(f"{n:>6} {ours_t:9.3f} {sm_t:9.3f} {sm_t / ours_t:8.2f} "
              f"{sm.imse(ours.bandwidth_):12.6f} {sm.imse(sm.bw):12.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="criterion,search")
    parser.add_argument("--sizes", default="100,200,400")
    parser.add_argument("--search-sizes", default="100")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    tasks = args.tasks.split(",")
    if "criterion" in tasks:
        criterion_task([int(s) for s in args.sizes.split(",")], args.repeat)
    if "search" in tasks:
        search_task([int(s) for s in args.search_sizes.split(",")], args.repeat)


if __name__ == "__main__":
    main()
