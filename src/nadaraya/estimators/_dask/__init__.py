"""The estimators on Dask arrays and DataFrames (loaded only when a Dask input is seen).

``fit`` accepts Dask arrays and Dask DataFrames for ``X``, ``y`` and
``sample_weight`` (in any mix with in-memory arrays) and never computes them
on the client: inputs are checked lazily (:mod:`._inputs`), the bandwidth
search runs its driver on the client and each criterion evaluation as one
graph on the cluster (:mod:`._fit`, :mod:`._pass`), and the fitted estimator
holds its training data as Dask arrays. ``predict``, ``predict_proba`` and
``score`` return Dask arrays for Dask queries, in-memory arrays for in-memory
queries (:mod:`._predict`).

What gathers data on the client: the unique class labels of a classifier;
the rows of the search's first phase on a subsample (more than twice
:data:`.._bandwidth.SUBSAMPLE` rows); and, for a local polynomial fit, all
training data when some rows need a direct least-squares solve from their
kernel weights, only within the working-memory budget (beyond it the fit
stops with an error that names the fixes).

Not available on Dask data (each refused with an error naming it): a user
``mask``, ``predict(return_std=True)``, ``predict_interval``, ``bootstrap``
and ``smoother_matrix``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._errors import NadarayaError
from ._inputs import any_dask, is_dask

__all__ = ["any_dask", "fit_classifier", "fit_regressor", "involved", "is_dask", "predict",
           "predict_classes", "predict_proba", "score_classifier", "score_regressor",
           "unavailable"]


def involved(est: Any, X: Any) -> bool:
    """Whether ``X`` is a Dask collection or ``est`` was fitted on one."""
    return is_dask(X) or is_dask(getattr(est, "X_fit_", None))


def unavailable(what: str) -> NadarayaError:
    """The error for a method not available with Dask inputs or fits."""
    return NadarayaError(
        f"{what} is not available for Dask inputs or estimators fitted on Dask data; "
        "compute the arrays into memory (.compute()) and fit again, or use predict()."
    )


def _features(est: Any, X: Any) -> Any:
    """Validate ``X`` for a fit: feature names and counts; returns it as a Dask array."""
    from sklearn.utils.validation import validate_data

    from ._inputs import as_matrix, check_features

    if is_dask(X):
        check_features(est, X, reset=True)
    else:
        X = validate_data(est, X, reset=True, dtype=np.float64)
    return as_matrix(X, "X")


def fit_regressor(est: Any, X: Any, y: Any, sample_weight: Any, persist: bool) -> Any:
    """:meth:`fit` of a regressor on Dask data; returns ``est``."""
    from ._fit import fit_smoother
    from ._inputs import as_targets, as_weights

    Xd = _features(est, X)
    rows = Xd.chunks[0]
    Y = as_targets(y, rows)
    est._y_1d = Y.ndim == 1
    Y = Y[:, None] if est._y_1d else Y
    est._n_outputs = Y.shape[1]
    est._sigma2 = fit_smoother(est, Xd, Y, as_weights(sample_weight, rows), persist)
    sigma2 = est._out(est._sigma2, power=2)
    est.residual_variance_ = float(sigma2[0]) if est._y_1d else sigma2
    return est


def _unique(y: Any) -> Any:
    from ._inputs import dask_array

    return dask_array().unique(y)


def fit_classifier(est: Any, X: Any, y: Any, sample_weight: Any, persist: bool) -> Any:
    """:meth:`fit` of :class:`.._classifier.KernelClassifier` on Dask data; returns ``est``."""
    from sklearn.utils.multiclass import check_classification_targets

    from ._fit import fit_smoother
    from ._inputs import as_weights, labels

    Xd = _features(est, X)
    rows = Xd.chunks[0]
    yl = labels(y, rows)
    # the distinct labels, and only they, come to the client
    names = np.unique(np.asarray(_unique(yl).compute()))
    check_classification_targets(names)
    est.classes_ = names
    k = names.shape[0]

    def onehot(block: np.ndarray) -> np.ndarray:
        return (np.searchsorted(names, block)[:, None] == np.arange(k)).astype(np.float64)

    Y = yl.map_blocks(onehot, new_axis=1, chunks=(rows, (k,)), dtype=np.float64)
    est._n_outputs = k
    fit_smoother(est, Xd, Y, as_weights(sample_weight, rows), persist)
    return est


def predict(est: Any, X: Any) -> Any:
    """Regressor predictions at ``X`` with Dask involved (lazy for Dask queries)."""
    from ._predict import fitted, queries

    Xq, lazy = queries(est, X)
    out = est._shape(est._out(fitted(est, Xq)))
    return out if lazy else np.asarray(out.compute())


def predict_proba(est: Any, X: Any) -> Any:
    """Classifier probabilities at ``X`` with Dask involved (lazy for Dask queries)."""
    from ._predict import fitted, queries

    Xq, lazy = queries(est, X)
    out = np.clip(est._out(fitted(est, Xq)), 0.0, 1.0)
    return out if lazy else np.asarray(out.compute())


def predict_classes(est: Any, X: Any) -> Any:
    """Classifier labels at ``X`` with Dask involved (lazy for Dask queries)."""
    from ._predict import classes

    proba = predict_proba(est, X)
    if is_dask(proba):
        return classes(est, proba)
    return est.classes_[np.argmax(proba, axis=1)]


def score_regressor(est: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """``R^2`` with Dask involved: a lazy Dask scalar."""
    from ._predict import score_regressor as score

    return score(est, X, y, sample_weight)


def score_classifier(est: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """Weighted accuracy with Dask involved: a lazy Dask scalar."""
    from ._predict import score_classifier as score

    return score(est, X, y, sample_weight)
