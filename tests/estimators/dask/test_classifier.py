"""The kernel classifier on Dask data equals the in-memory classifier."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from nadaraya.estimators import KernelClassifier

from ._data import chunked, frame, relative


def _blobs(rng: np.random.Generator, n: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    centres = np.array([[0.0, 0.0], [2.0, 0.5], [0.5, 2.0]])
    codes = rng.integers(0, 3, n)
    X = centres[codes] + 0.7 * rng.normal(size=(n, 2))
    names = np.array(["alpha", "beta", "gamma"], dtype=object)
    return X, names[codes], rng.uniform(-0.5, 2.5, (20, 2))


@pytest.mark.parametrize("bandwidth", [0.6, "cv"])
def test_labels_from_a_dask_series(rng: np.random.Generator, bandwidth: object) -> None:
    X, y, Q = _blobs(rng)
    a = KernelClassifier(bandwidth=bandwidth).fit(X, y)
    labels = dd.from_pandas(pd.Series(y, name="label"), npartitions=3)
    b = KernelClassifier(bandwidth=bandwidth).fit(frame(X), labels)
    assert list(b.classes_) == list(a.classes_)
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-9)
    assert relative(b.cv_score_, a.cv_score_) <= 1e-9
    if bandwidth == "cv":
        a = KernelClassifier(bandwidth=b.bandwidth_).fit(X, y)
    proba = b.predict_proba(frame(Q, 2))
    assert isinstance(proba, da.Array)
    assert relative(proba.compute(), a.predict_proba(Q)) <= 1e-12
    predicted = b.predict(frame(Q, 2))
    assert isinstance(predicted, da.Array)
    assert list(predicted.compute()) == list(a.predict(Q))


def test_integer_labels_weights_and_lazy_score(rng: np.random.Generator) -> None:
    X, y, Q = _blobs(rng)
    codes = np.searchsorted(np.unique(y), y)
    w = rng.integers(1, 3, X.shape[0]).astype(float)
    a = KernelClassifier(bandwidth=0.5).fit(X, codes, sample_weight=w)
    b = KernelClassifier(bandwidth=0.5).fit(chunked(X, 17), chunked(codes, 17),
                                            sample_weight=chunked(w, 17))
    assert relative(b.predict_proba(Q), a.predict_proba(Q)) <= 1e-12
    score = b.score(chunked(X, 20), chunked(codes, 20))
    assert isinstance(score, da.Array)
    assert relative(score.compute(), a.score(X, codes)) <= 1e-12
