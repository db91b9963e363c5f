"""Kernel smoothers with the scikit-learn contract.

:class:`NadarayaWatsonRegressor` (local constant), :class:`LocalPolynomialRegressor`
(local linear by default) and :class:`KernelClassifier` (kernel-weighted
one-hot labels). :class:`KernelDensity` (mixed data, CV and plug-in bandwidths,
sampling), :class:`ConditionalDensity` (``f(y | x)``, its CDF and quantiles) and
:class:`ConditionalQuantileRegressor` sum the same kernels unnormalized. The smoothers
are linear smoothers computed by :func:`nadaraya.smooth`;
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
from ._significance import significance_test
from ._specification import specification_test
from .conditional import ConditionalDensity, ConditionalQuantileRegressor
from .density import KernelDensity
from .linear import LinearSmoother

__all__ = [
    "ConditionalDensity",
    "ConditionalQuantileRegressor",
    "FormulaDesign",
    "KernelClassifier",
    "KernelDensity",
    "LinearSmoother",
    "LocalPolynomialRegressor",
    "NadarayaWatsonRegressor",
    "SearchStep",
    "from_formula",
    "parse_formula",
    "search_progress",
    "significance_test",
    "specification_test",
]

from .metric import MetricKernelRegressor

__all__ += ["MetricKernelRegressor"]
