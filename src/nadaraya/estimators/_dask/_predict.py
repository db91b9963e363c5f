"""Predictions and scores of a kernel smoother on Dask data, as lazy Dask arrays.

A prediction is one engine call (the queries' chunks mapped, the training
chunks tree-reduced) and the moment solve of each block of queries. A query
whose local problem the moments cannot fix to rounding is solved from its
kernel weights, which needs the training data on the worker that solves its
block: they are a dependency of each block when they fit the working-memory
budget; beyond it such a block stops with an error naming the fixes.

Queries given in memory to an estimator fitted on Dask data get in-memory
predictions (the graph is computed); Dask queries get Dask predictions, lazily.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import engine as _engine
from ..._config import get_config
from ..._errors import NadarayaError
from .._base import query_rows
from .._direct import solve_rows
from ._inputs import as_matrix, check_features, dask_array, is_dask, labels
from ._pass import too_large

__all__ = ["classes", "fitted", "queries", "score_classifier", "score_regressor"]

#: Rows per chunk of in-memory queries sent to a Dask fit.
QUERY_CHUNK = 4096


def queries(est: Any, X: Any) -> tuple[Any, bool]:
    """The queries as a Dask array and whether the caller gave them as one (lazy output)."""
    da = dask_array()
    if is_dask(X):
        check_features(est, X, reset=False)
        return as_matrix(X, "X"), True
    Xq = est._validate_X(X)
    return da.from_array(Xq, chunks=(min(QUERY_CHUNK, max(1, Xq.shape[0])), -1)), False


def _bundle(*arrays: Any) -> tuple[Any, ...]:
    return tuple(arrays)


def _training(est: Any) -> tuple[Any, str]:
    """The training data as one delayed value for direct solves (or None), and the refusal."""
    from dask import delayed

    X, Y, w = est.X_fit_, est._y_train, est._omega
    if not is_dask(X):
        return delayed(_bundle)(X, Y, w), ""
    size = 8.0 * X.shape[0] * (X.shape[1] + Y.shape[1] + 1)
    if size > get_config().working_memory * 2**20:
        return None, too_large(1, size / 2**20)
    return delayed(_bundle)(X, Y, w), ""


def _solve_block(means: np.ndarray, Xq: np.ndarray, train: Any, *, design: Any, p: int,
                 spec: Any, refusal: str) -> np.ndarray:
    """The moment solve of one block of queries; flagged rows from their kernel weights."""
    fitted, _, _, flags = design.solve_checked(means, Xq, p)
    rows = np.flatnonzero(flags)
    if rows.size:
        if train is None:
            raise NadarayaError(refusal.replace("1 row(s)", f"{rows.size} row(s)", 1))
        Xt, Yt, wt = train
        direct, f, _, _ = solve_rows(design, query_rows(Xq, Xt, Yt, wt, spec), Xq, rows, p)
        fitted[direct.index] = f
    return fitted


def fitted(est: Any, Xq: Any) -> Any:
    """Fitted values ``(m, p)`` at Dask queries, in the targets' frame (lazy)."""
    spec = est._spec
    means = _engine.smooth(Xq, est.X_fit_, est._values, spec.kernel, est.mask,
                           bandwidth=spec.bandwidth, engine=est.engine, empty=est.empty,
                           tolerance=est._tolerance())
    rows = Xq.chunks[0]
    means = means.rechunk({0: rows, 1: -1})
    design, p = est._design_, est._n_outputs
    train, refusal = (None, "") if design.degree == 0 else _training(est)
    return means.map_blocks(_solve_block, Xq, train, design=design, p=p, spec=spec,
                            refusal=refusal, chunks=(rows, (p,)), dtype=np.float64)


def classes(est: Any, proba: Any) -> Any:
    """The most probable class of each row of lazy probabilities ``(m, n_classes)``."""
    names = est.classes_
    return proba.map_blocks(lambda b: names[np.argmax(b, axis=1)], drop_axis=1,
                            dtype=names.dtype)


def _weights(sample_weight: Any, rows: tuple[int, ...]) -> Any:
    from ._inputs import as_weights

    da = dask_array()
    w = as_weights(sample_weight, rows)
    return da.ones(sum(rows), chunks=(rows,)) if w is None else w


def _predicted(est: Any, X: Any) -> tuple[Any, tuple[int, ...]]:
    """The predictions at ``X`` as a Dask array, and their row chunks."""
    pred = est.predict(X)
    pred = pred if is_dask(pred) else dask_array().from_array(pred)
    return pred, pred.chunks[0]


def score_regressor(est: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """``R^2`` of the predictions at ``X`` (lazy), as :func:`sklearn.metrics.r2_score`.

    The mean of the outputs' ``R^2``; an output whose targets are constant
    scores 1 when predicted exactly, else 0.
    """
    from ._inputs import as_targets

    da = dask_array()
    pred, rows = _predicted(est, X)
    Y = as_targets(y, rows)
    w = _weights(sample_weight, rows)
    P = pred.rechunk({0: rows})
    if Y.ndim == 1:
        Y, P = Y[:, None], P[:, None]
    mean = (w[:, None] * Y).sum(axis=0) / w.sum()
    num = (w[:, None] * (Y - P) ** 2).sum(axis=0)
    den = (w[:, None] * (Y - mean) ** 2).sum(axis=0)
    safe = da.where(den > 0, den, 1.0)
    r2 = da.where(den > 0, 1.0 - num / safe, da.where(num == 0, 1.0, 0.0))
    return r2.mean()


def score_classifier(est: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """Weighted accuracy of the predictions at ``X`` (lazy)."""
    pred, rows = _predicted(est, X)
    truth = labels(y, rows)
    w = _weights(sample_weight, rows)
    return (w * (pred == truth)).sum() / w.sum()
