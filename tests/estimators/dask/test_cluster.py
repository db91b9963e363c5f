"""On a LocalCluster of two worker processes the estimators fit as in memory (slow)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from nadaraya.estimators import KernelClassifier, LocalPolynomialRegressor, NadarayaWatsonRegressor

from ._data import chunked, frame, relative, series

distributed = pytest.importorskip("distributed")


@pytest.mark.slow
def test_two_worker_processes_fit_as_numpy(rng: np.random.Generator) -> None:
    X = rng.uniform(0, 4, (160, 2))
    y = np.sin(X.sum(axis=1)) + 0.3 * rng.normal(size=160)
    w = rng.integers(0, 3, 160).astype(float)
    Q = rng.uniform(0.2, 3.8, (30, 2))
    labels = (X[:, 0] > 2.0).astype(int) + (X[:, 1] > 2.0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster), dask.config.set(scheduler="distributed"):
        nw = NadarayaWatsonRegressor(bandwidth="cv").fit(chunked(X[:, :1], 45), series(y))
        ll = LocalPolynomialRegressor(bandwidth=0.8).fit(frame(X), chunked(y, 40),
                                                          sample_weight=chunked(w, 40),
                                                          persist=True)
        kc = KernelClassifier(bandwidth=0.7).fit(chunked(X, 50), chunked(labels, 50))
        out = {"nw": nw.predict(chunked(Q[:, :1], 8)), "ll": ll.predict(frame(Q, 2)),
               "kc": kc.predict_proba(chunked(Q, 11))}
        assert all(isinstance(v, da.Array) for v in out.values())
        got = dask.compute(out)[0]
    a = NadarayaWatsonRegressor(bandwidth="cv").fit(X[:, :1], y)
    np.testing.assert_allclose(nw.bandwidth_, a.bandwidth_, rtol=1e-9)
    a = NadarayaWatsonRegressor(bandwidth=nw.bandwidth_).fit(X[:, :1], y)
    assert relative(got["nw"], a.predict(Q[:, :1])) <= 1e-12
    b = LocalPolynomialRegressor(bandwidth=0.8).fit(X, y, sample_weight=w)
    assert relative(got["ll"], b.predict(Q)) <= 1e-12
    assert relative(ll.cv_score_, b.cv_score_) <= 1e-9
    c = KernelClassifier(bandwidth=0.7).fit(X, labels)
    assert relative(got["kc"], c.predict_proba(Q)) <= 1e-12
