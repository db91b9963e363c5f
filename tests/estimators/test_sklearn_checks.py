"""The scikit-learn estimator contract, checked by scikit-learn itself.

With the default ``bandwidth="cv"`` every fit searches a bandwidth per
feature, and some checks fit 10-feature data many times, so the full run
takes minutes: it is marked slow. A numeric bandwidth runs the same checks
quickly, except the ones that need the search to score well.
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor


def _expected_failures(estimator) -> dict[str, str]:
    if isinstance(estimator, LocalPolynomialRegressor):
        return {
            "check_sample_weight_equivalence_on_dense_data": (
                "the check fits a local line in 30 dimensions to 15 points and predicts "
                "about ten bandwidths away from them, where the slope rests on directions "
                "weighted 1e-12; moments from one engine pass resolve those to about 1e-4, "
                "so weighted and repeated rows differ by 1e-5 there (the check asks 1e-7). "
                "With a given bandwidth the same check passes (below)."
            ),
        }
    return {}


@pytest.mark.slow
@parametrize_with_checks([NadarayaWatsonRegressor(), LocalPolynomialRegressor(),
                          KernelClassifier()], expected_failed_checks=_expected_failures)
def test_sklearn_contract_default(estimator, check) -> None:
    check(estimator)


@parametrize_with_checks([NadarayaWatsonRegressor(bandwidth="scott"),
                          LocalPolynomialRegressor(bandwidth=1.0),
                          KernelClassifier(kernel="laplacian", bandwidth="silverman")])
def test_sklearn_contract_fixed_bandwidth(estimator, check) -> None:
    check(estimator)
