"""The scikit-learn estimator contract, checked by scikit-learn itself.

With the default ``bandwidth="cv"`` every fit searches a bandwidth per
feature, and some checks fit 10-feature data many times, so the full run
takes minutes: it is marked slow. A numeric bandwidth runs the same checks
quickly, except the ones that need the search to score well. KernelDensity's
Sheather-Jones rule is for one feature, and the checks fit several: it is
checked in ``test_density.py``.
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from nadaraya.estimators import (
    ConditionalQuantileRegressor,
    KernelClassifier,
    KernelDensity,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
)


@pytest.mark.slow
@parametrize_with_checks([NadarayaWatsonRegressor(), LocalPolynomialRegressor(),
                          KernelClassifier(), KernelDensity(), KernelDensity(bandwidth="cv_ls")])
def test_sklearn_contract_default(estimator, check) -> None:
    check(estimator)


@parametrize_with_checks([NadarayaWatsonRegressor(bandwidth="scott"),
                          LocalPolynomialRegressor(bandwidth=1.0),
                          KernelClassifier(kernel="laplacian", bandwidth="silverman"),
                          KernelDensity(bandwidth="scott"),
                          KernelDensity("epanechnikov", bandwidth=2.0),
                          ConditionalQuantileRegressor(0.3, bandwidth="scott")])
def test_sklearn_contract_fixed_bandwidth(estimator, check) -> None:
    check(estimator)
