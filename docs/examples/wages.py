"""Hourly wages on mixed data: the np package's wage1 example, with nadaraya.

Run from the repository root::

    python docs/examples/wages.py            # fit, bandwidths, R^2, predictions
    python docs/examples/wages.py --inference  # and summary, marginal effects, a test

The data (:func:`nadaraya.datasets.load_wage1`) hold 526 workers of the 1976
US Current Population Survey. As in Racine (2008, Section 4.2.3, Table 4.1),
log hourly wage is regressed by local linear kernel regression on sex and
marital status (unordered categories, Aitchison-Aitken kernel) and years of
education, experience and tenure (continuous, Gaussian kernel), with the
bandwidths chosen by the corrected AIC of Hurvich, Simonoff and Tsai (1998).
See ``docs/examples/wages.md`` for the output and the comparison with np.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nadaraya.datasets import load_wage1
from nadaraya.estimators import LocalPolynomialRegressor, from_formula

FORMULA = "lwage ~ C(female) + C(married) + educ + exper + tenure"

#: Racine (2008), Table 4.1: np's npregbw, local linear, AICc, on the same data.
NP_BANDWIDTHS = {"female": 0.01978275, "married": 0.15228887, "educ": 7.84663015,
                 "exper": 8.43548175, "tenure": 41.60546059}
#: Racine (2008), Section 4.3: the R^2 of that fit.
NP_R2 = 0.515


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """Racine's R^2: the squared correlation of the outcome and the fit (in [0, 1])."""
    yc, fc = y - y.mean(), fitted - y.mean()
    return float((yc @ fc) ** 2 / ((yc @ yc) * (fc @ fc)))


def fit(bandwidth: object = "aicc") -> tuple[object, object, np.ndarray]:
    """The local linear fit of the formula; returns the model, the data and its fit."""
    wages = load_wage1()
    start = time.perf_counter()
    model = from_formula(FORMULA, wages, LocalPolynomialRegressor(bandwidth=bandwidth))
    seconds = time.perf_counter() - start
    X = model.formula_.features(wages)
    fitted = model.predict(X)
    print(f"{FORMULA}: local linear on {len(wages)} rows, bandwidth={bandwidth!r} "
          f"({seconds:.1f} s)")
    print(f"{'feature':<10} {'type':<5} {'nadaraya':>12} {'np (Racine 2008)':>18}")
    for name, t, h in zip(model.feature_names_in_, model._types, model.bandwidth_,
                          strict=True):
        kind = "h" if t == "c" else "lambda"
        print(f"{name:<10} {kind:<6} {h:12.6g} {NP_BANDWIDTHS[name]:18.6g}")
    print(f"R^2 {r_squared(wages['lwage'].to_numpy(), fitted):.3f} (np: {NP_R2:.3f}); "
          f"leave-one-out MSE {model.cv_score_:.4f}; effective degrees of freedom "
          f"{model.effective_dof_:.1f}")
    return model, wages, fitted


def predict_profiles(model: object) -> None:
    """Predicted log wage for 12 years of education at the median experience and tenure."""
    import pandas as pd

    wages = load_wage1()
    grid = pd.DataFrame({
        "female": ["Female", "Female", "Male", "Male"],
        "married": ["Married", "Notmarried", "Married", "Notmarried"],
        "educ": 12.0, "exper": wages["exper"].median(), "tenure": wages["tenure"].median(),
    })
    mean, std = model.predict(model.formula_.features(grid), return_std=True)
    for row, m, s in zip(grid.itertuples(), mean, std, strict=True):
        print(f"  {row.female:<6} {row.married:<10} lwage {m:.3f} (standard error {s:.3f})")


def inference(model: object, wages: object) -> None:
    """Summary table, marginal effects and a significance test of ``female``."""
    from nadaraya.estimators import significance_test

    X = model.formula_.features(wages)
    print(model.summary())
    effects = model.gradient(X)
    print("mean marginal effect of one more year:",
          {name: float(np.mean(effects[:, j])) for j, name in
           enumerate(model.feature_names_in_) if model._types[j] == "c"})
    print(significance_test(model, ["female"], n_resamples=399, random_state=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inference", action="store_true",
                        help="also print the summary, marginal effects and a significance test")
    parser.add_argument("--bandwidth", default="aicc", help="aicc (default), cv or gcv")
    args = parser.parse_args()
    model, wages, _ = fit(args.bandwidth)
    print("predicted log wage, 12 years of education, median experience and tenure:")
    predict_profiles(model)
    if args.inference:
        inference(model, wages)


if __name__ == "__main__":
    main()
