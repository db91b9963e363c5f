"""Fitting a kernel smoother on Dask data: the driver on the client, the sums on the cluster.

The steps of :meth:`.._base.KernelSmoother._fit_smoother`, with the training
data left where they are:

* zero-weight rows are dropped blockwise (their count per block is computed
  once, so the arrays keep known chunks);
* the targets' and weights' power-of-two frames, the data's spread and
  range are Dask reductions (:mod:`._stats`);
* each criterion evaluation of a bandwidth search is one graph, the
  leave-one-out pass (:mod:`._pass`), computed to a few numbers; with more
  than twice :data:`.._bandwidth.SUBSAMPLE` rows the first phase of the
  search runs in memory on that many rows, gathered once;
* the fitted estimator holds the training data, the augmented values and the
  leave-one-out, in-sample and diagonal columns as lazy Dask arrays
  (persisted on the cluster with ``fit(..., persist=True)``, otherwise
  recomputed from their sources when used).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._errors import NadarayaError
from .. import _frame
from .._bandwidth import PLUGINS, RULES, search_bandwidth
from .._kernel import is_named_radial, make_spec
from .._loo import CRITERIA, LooFit, criterion_from
from . import _stats
from ._inputs import dask_array
from ._pass import Evaluation, Training, evaluate, loo_pass, patch

__all__ = ["fit_smoother"]


def _positive_rows(X: Any, Y: Any, w: Any) -> tuple[Any, Any, Any]:
    """The rows of positive weight, with known chunk sizes (one pass over ``w``)."""
    counts = np.asarray(w.map_blocks(lambda b: np.array([np.count_nonzero(b > 0)]),
                                     chunks=((1,) * w.numblocks[0],), dtype=np.int64).compute())
    rows = tuple(int(c) for c in counts)

    def keep(block: np.ndarray, wb: np.ndarray) -> np.ndarray:
        return block[wb[:, 0] > 0]

    out = []
    for a in (X, Y):
        out.append(a.map_blocks(keep, w[:, None], chunks=(rows, a.chunks[1]), dtype=a.dtype))
    out.append(w.map_blocks(lambda b: b[b > 0], chunks=(rows,), dtype=w.dtype))
    blocks = [i for i, r in enumerate(rows) if r > 0]
    if len(blocks) < len(rows):
        da = dask_array()
        out = [da.concatenate([a.blocks[i] for i in blocks]) for a in out]
    return out[0], out[1], out[2]


def _take(a: Any, rows: np.ndarray) -> np.ndarray:
    """The rows ``rows`` (sorted) of a Dask array, in memory: the only rows gathered."""
    return np.asarray(a[rows].compute())


def fit_smoother(est: Any, X: Any, Y: Any, w: Any, persist: bool = False) -> np.ndarray:
    """Fit ``est`` on Dask data; returns ``sigma^2`` per output in the targets' frame.

    Parameters
    ----------
    est : KernelSmoother
    X : dask array of shape (n, d), one chunk across the columns
    Y : dask array of shape (n, p), chunked like ``X``'s rows
    w : dask array of shape (n,) or None
        Sample weights (validated lazily).
    persist : bool
        Keep the training data in the cluster's memory.
    """
    da = dask_array()
    if est.mask is not None:
        raise NadarayaError(
            f"mask={est.mask!r} is not available when fitting on Dask data (the leave-one-out "
            "pass combines only the engine's own LeaveOneOut mask); pass mask=None, or "
            "compute the arrays into memory."
        )
    d = X.shape[1]
    h_param = est._check_params(d)
    est._weighted = w is not None
    plugin = isinstance(h_param, str) and h_param in PLUGINS
    if plugin or (est._weighted and est._analytic()):
        raise NadarayaError(
            f"{'bandwidth=' + repr(est.bandwidth) if plugin else 'weight_type=analytic'}"
            " is not available with Dask inputs; compute the arrays into memory (e.g. "
            "X.compute()), or use bandwidth='cv' and frequency weights."
        )
    if w is None:
        w = da.ones(X.shape[0], chunks=(X.chunks[0],))
    any_positive, all_positive, y_top, w_top = (
        np.asarray(v) for v in _dask().compute((w > 0).any(), (w > 0).all(), da.abs(Y).max(),
                                                da.abs(w).max()))
    if not any_positive:
        raise NadarayaError("sample_weight is zero for every sample; give some samples "
                            "positive weight.")
    if not all_positive:
        X, Y, w = _positive_rows(X, Y, w)
    n = X.shape[0]
    search = isinstance(h_param, str) and h_param in CRITERIA
    est._warn_scale(n, search)
    est._y_exp = int(np.frexp(float(y_top))[1]) if y_top > 0 else 0
    w_exp = int(np.frexp(float(w_top))[1]) if est._weighted else 0
    Y = _frame.to_frame(Y, est._y_exp)
    omega = _frame.to_frame(w, w_exp)
    est._w_unit = _frame.unit(w_exp)
    est._loo_unit = est._w_unit  # frequency weights: leaving a row out removes one sample
    if persist:
        X, Y, w, omega = _dask().persist(X, Y, w, omega)
    training = Training(X, Y, omega, est._weighted)
    lo, hi, first, e = _stats._range(X, omega)
    centre, spread = _stats.weighted_spread(X, omega, ranges=(lo, hi, first, e))
    top = np.maximum(np.abs(hi - centre), np.abs(lo - centre))

    def run(h: np.ndarray | None) -> tuple[Evaluation, Any, Any, Any]:
        spec = make_spec(est.kernel, h, d)
        frames = []

        def extent(frame: np.ndarray) -> float:
            frames.append(frame)
            return 0.0  # set by the evaluation, which computes it in the same graph

        design = est._design_from(centre, spread, top, h, extent)
        reach = None
        if frames:
            reach = ((((X - centre) / frames[0]) ** 2).sum(axis=1).max()).to_delayed()[()]
        wv = omega if est._weighted else None
        values = X.map_blocks(_values, Y, None if wv is None else wv[:, None], design=design,
                              chunks=(X.chunks[0], (design.n_values(Y.shape[1]),)),
                              dtype=np.float64)
        packed = loo_pass(spec, design, X, Y, omega, values, unit=est._w_unit,
                          weighted=est._weighted, engine=est.engine,
                          tolerance=est._tolerance(), extent=reach)
        result = evaluate(packed, Y, omega, spec=spec, design=design, training=training,
                          unit=est._w_unit, extent=reach)
        return result, design, values, packed

    est.cv_results_ = None
    kept: dict[str, Any] = {}
    if search:
        if n < 2:
            raise NadarayaError(
                f"bandwidth={h_param!r} needs at least 2 samples with positive weight; "
                f"got {n} sample. Give a numeric bandwidth or more data."
            )
        name = h_param

        def objective_for(rows: np.ndarray | None) -> Any:
            if rows is not None:
                return est._objective(name, _take(X, rows), _take(Y, rows), _take(omega, rows))

            def objective(h: np.ndarray) -> float:
                done = run(h)
                value = _criterion(name, done[0], est._w_unit)
                if not value >= kept.get("value", np.inf):
                    kept.update(value=value, h=h.copy(), run=done)
                return value

            return objective

        _, ys = _stats.weighted_spread(Y, w)
        scale = 1.0 if name == "aicc" else float(np.mean(ys**2))
        result = search_bandwidth(objective_for, X, w, scale=scale,
                                  summary=_stats.search_summary, take=_take)
        h = result.bandwidth
        est._record_search(result, name, d)
    elif isinstance(h_param, str) and h_param in RULES:
        h = _stats.rule_bandwidth(h_param, X, w)
    elif h_param is None:
        h = None if not is_named_radial(est.kernel) else np.ones(d)
    else:
        h = np.broadcast_to(h_param, (d,)).astype(float)
    if h is not None and "h" in kept and np.array_equal(kept["h"], h):
        done, design, values, packed = kept["run"]
    else:
        done, design, values, packed = run(h)
    done.complete()
    p = Y.shape[1]
    est.X_fit_ = X
    est._y_train = Y
    est.sample_weight_ = w if est._weighted else None
    est._omega = omega if est._weighted else None
    est._values = values
    est._design_ = design
    est._spec = make_spec(est.kernel, h, d)
    est._training = training
    est._loo_fit = LooFit(patch(packed[:, :p], done.fixed.get("loo")),
                          patch(packed[:, p:2 * p], done.fixed.get("fitted")),
                          patch(packed[:, 2 * p], done.fixed.get("diag")))
    scalar = h is not None and (d == 1 or (not isinstance(h_param, str)
                                            and np.ndim(h_param) == 0))
    est.bandwidth_ = None if h is None else (float(h[0]) if scalar else h.copy())
    est.effective_dof_ = float(done.trace)
    est.cv_score_ = float(est._out(_criterion("cv", done, est._w_unit), power=2))
    dof = done.wsum - est._w_unit * done.trace
    if not dof > 0:
        return np.full(p, np.nan)
    return done.rss / dof


def _values(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None, *, design: Any) -> np.ndarray:
    return design.values(X, Y, None if w is None else w[:, 0])


def _criterion(name: str, ev: Evaluation, unit: float) -> float:
    """The criterion ``name`` of an evaluated pass (see :func:`.._loo.criterion_from`)."""
    total = ev.wsum / unit
    if name == "cv":
        return criterion_from(name, ev.sse_loo / ev.wsum, None, total)
    ev.complete()
    p = ev.rss.shape[0]
    mse = float(ev.rss.sum()) / p / ev.wsum if ev.fit_finite else float("inf")
    return criterion_from(name, mse, ev.trace, total)


def _dask() -> Any:
    import dask

    return dask
