"""Marginal effects benchmark: gradients of the regressors against statsmodels, as ratios.

Data: ``X ~ U(0, 3)^d``, ``y = sin(2 x_0) + x_1^2 + 0.1 N(0, 1)`` (``x_1`` only
when ``d > 1``), ``n`` training rows, ``m`` query rows, a fixed bandwidth
(0.3 per feature). For each size of ``--sizes``:

* ``ll``: ``LocalPolynomialRegressor.gradient`` against statsmodels'
  ``KernelReg(reg_type="ll").fit(X_query)[1]`` (its marginal effects, one
  pseudo-inverse solve per query in Python): time ratio peer / ours and the
  normwise relative difference of the derivatives;
* ``lc``: ``NadarayaWatsonRegressor.gradient`` against statsmodels'
  ``KernelReg(reg_type="lc").fit`` (whose marginal effects are a scaled
  derivative in one dimension; see ``tests/estimators/test_marginal.py``):
  time ratio only, plus our asymptotic standard errors' time.

statsmodels is run up to ``--peer-max`` query rows (its loop is O(n) Python
work per query). The load average of the machine is printed with the results.

    python benchmarks/bench_marginal.py --sizes 1000,4000 --dim 2
"""

from __future__ import annotations

import argparse
import os
import warnings
from functools import partial

import numpy as np

from _timing import best_time
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor


def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, (n, d))
    y = np.sin(2 * X[:, 0]) + (X[:, 1] ** 2 if d > 1 else 0.0) + 0.1 * rng.normal(size=n)
    return X, y


def statsmodels_mfx(X: np.ndarray, y: np.ndarray, Xq: np.ndarray, reg: str,
                    bw: np.ndarray) -> np.ndarray:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KernelReg(y, X, "c" * X.shape[1], reg_type=reg, bw=bw).fit(Xq)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,4000", help="n = m, comma-separated")
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--peer-max", type=int, default=2000,
                        help="largest m statsmodels runs on")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'reg':>3} {'n':>7} {'ours s':>9} {'std s':>9} {'peer s':>9} {'ratio':>7} "
          f"{'rel diff':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        X, y = make_data(n, args.dim)
        Xq = make_data(n, args.dim, seed=1)[0]
        bw = np.full(args.dim, 0.3)
        for reg, cls in (("ll", LocalPolynomialRegressor), ("lc", NadarayaWatsonRegressor)):
            model = cls(bandwidth=bw).fit(X, y)
            ours, grad = best_time(partial(model.gradient, Xq), args.repeat)
            std_t, _ = best_time(partial(model.gradient, Xq, return_std=True), 1)
            peer = ratio = diff = float("nan")
            if n <= args.peer_max:
                peer, mfx = best_time(partial(statsmodels_mfx, X, y, Xq, reg, bw), 1)
                ratio = peer / ours
                if reg == "ll":
                    diff = float(np.abs(grad - mfx).max() / np.abs(mfx).max())
            print(f"{reg:>3} {n:>7} {ours:>9.4f} {std_t:>9.4f} {peer:>9.3f} {ratio:>7.1f} "
                  f"{diff:>9.1e}")


if __name__ == "__main__":
    main()
