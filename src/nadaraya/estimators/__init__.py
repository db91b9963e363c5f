"""Kernel smoothers with the scikit-learn contract.

:class:`NadarayaWatsonRegressor` (local constant), :class:`LocalPolynomialRegressor`
(local linear by default) and :class:`KernelClassifier` (kernel-weighted
one-hot labels). All are linear smoothers computed by :func:`nadaraya.smooth`;
their bandwidth can be a number, a vector, a rule (``"scott"``,
``"silverman"``) or chosen by exact leave-one-out cross-validation
(``"cv"``), ``"gcv"`` or ``"aicc"``.

Examples
--------
>>> import numpy as np
>>> from nadaraya.estimators import LocalPolynomialRegressor
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(0, 6, (100, 1)); y = 2 * np.sin(x[:, 0]) + rng.normal(size=100)
>>> model = LocalPolynomialRegressor().fit(x, y)
>>> mean, std = model.predict(x[:3], return_std=True)
"""

from __future__ import annotations

from ._classifier import KernelClassifier
from ._formula import FormulaDesign, from_formula, parse_formula
from ._progress import SearchStep, search_progress
from ._regression import LocalPolynomialRegressor, NadarayaWatsonRegressor
from .linear import LinearSmoother

__all__ = [
    "FormulaDesign",
    "KernelClassifier",
    "LinearSmoother",
    "LocalPolynomialRegressor",
    "NadarayaWatsonRegressor",
    "SearchStep",
    "from_formula",
    "parse_formula",
    "search_progress",
]

from .metric import MetricKernelRegressor

__all__ += ["MetricKernelRegressor"]
