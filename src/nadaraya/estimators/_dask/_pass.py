"""The leave-one-out pass of a fit on Dask data: one graph per bandwidth, a few numbers back.

:func:`loo_pass` builds the graph: the engine's leave-one-out smoothing of the
augmented values (query chunks mapped, key chunks tree-reduced), then, per
row block, the algebra of :func:`.._loo.loo_fit` (adding each point back with
its share of the kernel weight, the moment solves of the leave-one-out and
in-sample fits, the smoother diagonal). Its rows stay on the cluster;
:func:`evaluate` reduces them to the weighted squared errors, ``trace(S)`` and
the total weight, and brings back only the rows the moment solve flags
(:meth:`.._design.LocalDesign.solve_checked`), to solve them again from
their kernel weights (:func:`.._direct.solve_rows`) as the in-memory fit does.

That direct solve needs every training point at hand: the training data are
gathered for it (once per fit) when they fit the working-memory budget
(:func:`nadaraya.config_context`); beyond it the fit stops with an error
that names the fixes. Degree 0 (Nadaraya-Watson, the classifier) never
needs it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import engine as _engine
from ..._config import get_config
from ..._errors import NadarayaError
from ...masks import LeaveOneOut
from .._design import LocalDesign
from .._direct import solve_rows
from .._kernel import KernelSpec
from .._loo import _local_rows, own_point_back

__all__ = ["Evaluation", "Training", "loo_pass", "patch"]


def _columns(p: int) -> dict[str, Any]:
    """Where each quantity sits in a row of the pass (``p`` outputs)."""
    return {"loo": slice(0, p), "fitted": slice(p, 2 * p), "diag": 2 * p, "flag_loo": 2 * p + 1,
            "flag_in": 2 * p + 2, "log_others": 2 * p + 3, "share": 2 * p + 4,
            "index": 2 * p + 5, "width": 2 * p + 6}


def _block(means: np.ndarray, lse: np.ndarray, X: np.ndarray, Y: np.ndarray, w: np.ndarray,
           A: np.ndarray, extent: Any, *, spec: KernelSpec, design: LocalDesign, unit: float,
           weighted: bool, block_info: Any = None) -> np.ndarray:
    """The per-row algebra of :func:`.._loo.loo_fit` on one block of rows.

    ``extent`` is the design's extent (computed in the same graph; None: as set).
    """
    if extent is not None:
        design = copy.copy(design)
        design.extent = float(extent)
    p = Y.shape[1]
    cols = _columns(p)
    lse, w = lse[:, 0], w[:, 0]
    own = spec.self_scores(X)
    share, in_sample, loo_means = own_point_back(means, lse, own, A, w if weighted else None,
                                                 unit)
    loo, _, _, flag_loo = design.solve_checked(loo_means, X, p)
    fitted, c, mu0, flag_in = design.solve_checked(in_sample, X, p, coef=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        diag = share * w * c[:, 0] / mu0
        log_others = lse - own
    out = np.empty((X.shape[0], cols["width"]))
    out[:, cols["loo"]], out[:, cols["fitted"]], out[:, cols["diag"]] = loo, fitted, diag
    out[:, cols["flag_loo"]], out[:, cols["flag_in"]] = flag_loo, flag_in
    out[:, cols["log_others"]], out[:, cols["share"]] = log_others, share
    start = block_info[0]["array-location"][0][0] if block_info else 0
    out[:, cols["index"]] = np.arange(start, start + X.shape[0])
    return out


def loo_pass(spec: KernelSpec, design: LocalDesign, X: Any, Y: Any, w: Any, values: Any, *,
             unit: float, weighted: bool, engine: str, tolerance: float | None,
             extent: Any = None) -> Any:
    """The lazy rows of a leave-one-out pass, shape ``(n, 2 p + 6)`` (see :func:`_columns`).

    Parameters
    ----------
    spec, design
        The kernel and the local polynomial design at one bandwidth.
    X : dask array of shape (n, d)
    Y : dask array of shape (n, p)
        Targets in their frame.
    w : dask array of shape (n,)
        Sample weights in their frame (ones without weights).
    values : dask array of shape (n, P)
        ``design.values(X, Y, w or None)``, chunked like ``X``.
    extent : Delayed, optional
        The design's extent, when it is computed in the same graph.
    """
    means, lse = _engine.smooth(X, X, values, spec.kernel, LeaveOneOut(),
                                bandwidth=spec.bandwidth, engine=engine, return_lse=True,
                                empty="nan", tolerance=tolerance)
    rows = X.chunks[0]
    means = means.rechunk({0: rows, 1: -1})
    lse = lse.rechunk({0: rows})[:, None]
    width = _columns(Y.shape[1])["width"]
    return means.map_blocks(_block, lse, X, Y, w[:, None], values, extent, spec=spec,
                            design=design,
                            unit=unit, weighted=weighted, chunks=(rows, (width,)),
                            dtype=np.float64)


class Training:
    """The training data of a Dask fit, gathered for direct solves if the budget allows.

    Parameters
    ----------
    X, Y, w : dask arrays
        Keys, targets (in their frame) and sample weights (in their frame).
    weighted : bool
        Whether the fit has sample weights.
    """

    def __init__(self, X: Any, Y: Any, w: Any, weighted: bool) -> None:
        self.lazy = (X, Y, w)
        self.weighted = weighted
        self._arrays: tuple[np.ndarray, ...] | None = None

    def fits(self) -> bool:
        """Whether the training data fit the working-memory budget."""
        X, Y, _ = self.lazy
        size = 8.0 * X.shape[0] * (X.shape[1] + Y.shape[1] + 1)
        return size <= get_config().working_memory * 2**20

    def arrays(self, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(X, Y, w or None)`` in memory, for ``rows`` rows to solve directly."""
        if self._arrays is None:
            X, Y, _ = self.lazy
            if not self.fits():
                size = 8.0 * X.shape[0] * (X.shape[1] + Y.shape[1] + 1) / 2**20
                raise NadarayaError(too_large(rows, size))
            import dask

            self._arrays = tuple(np.asarray(a) for a in dask.compute(*self.lazy))
        X, Y, w = self._arrays
        return X, Y, (w if self.weighted else None)


def too_large(rows: int, size: float) -> str:
    """The message for direct solves refused beyond the working-memory budget."""
    return (
        f"{rows} row(s) of this local polynomial fit cannot be fixed to rounding by its "
        "moments (a nearly singular local covariance) and need a least-squares solve from "
        f"their kernel weights, which needs all the training data in one place: "
        f"{size:.1f} MiB, over the working-memory budget of {get_config().working_memory:g} "
        "MiB. Raise it with nadaraya.config_context(working_memory=...), or give a larger "
        "bandwidth, ridge > 0, or degree=0."
    )


@dataclass
class Evaluation:
    """A leave-one-out pass reduced to what the criteria and the fitted attributes need.

    Attributes
    ----------
    sse_loo : float
        ``sum_i w_i mean_k (y_ik - loo_ik)^2``; ``inf`` when an error is not finite.
    wsum : float
        ``sum_i w_i`` (the weights' frame).
    rss : ndarray of shape (p,)
        ``sum_i w_i (y_ik - fitted_ik)^2`` (after :meth:`complete`).
    trace : float
        ``trace(S)`` (after :meth:`complete`).
    fixed : dict
        Rows solved directly: name -> (indices, values), for ``"loo"``, ``"fitted"``
        and ``"diag"``.
    """

    sse_loo: float
    wsum: float
    rss: np.ndarray
    trace: float
    fit_finite: bool
    fixed: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    _pending: Any = field(default=None, repr=False)

    def complete(self) -> Evaluation:
        """Solve the in-sample rows the moments cannot fix (needed for gcv, aicc, the fit)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending(self)
        return self


def evaluate(packed: Any, Y: Any, w: Any, *, spec: KernelSpec, design: LocalDesign,
             training: Training, unit: float, extent: Any = None) -> Evaluation:
    """Reduce a pass (:func:`loo_pass`) in one computation; solve its flagged rows.

    The leave-one-out rows the moments cannot fix are solved now; the
    in-sample ones when :meth:`Evaluation.complete` is called. ``extent`` (as
    given to :func:`loo_pass`) is computed too, and set on ``design``.
    """
    import dask

    p = Y.shape[1]
    cols = _columns(p)
    da = _da()
    loo, fitted, diag = packed[:, cols["loo"]], packed[:, cols["fitted"]], packed[:, cols["diag"]]
    flag_loo, flag_in = packed[:, cols["flag_loo"]] > 0, packed[:, cols["flag_in"]] > 0
    err = ((Y - loo) ** 2).mean(axis=1)
    sq = (Y - fitted) ** 2
    sse, loo_ok, wsum, rss, fit_ok, trace, flagged, ext = dask.compute(
        da.where(flag_loo, 0.0, w * err).sum(), (da.isfinite(err) | flag_loo).all(), w.sum(),
        da.where(flag_in[:, None], 0.0, w[:, None] * sq).sum(axis=0),
        (da.isfinite(sq).all(axis=1) | flag_in).all(), da.where(flag_in, 0.0, diag).sum(),
        packed[flag_loo | flag_in], extent)
    if ext is not None:
        design.extent = float(ext)
    flagged = np.asarray(flagged)
    result = Evaluation(float(sse) if loo_ok else float("inf"), float(wsum), np.asarray(rss),
                        float(trace), bool(fit_ok))
    if not flagged.shape[0]:
        return result
    index = flagged[:, cols["index"]].astype(np.int64)
    rows_loo = flagged[:, cols["flag_loo"]] > 0
    rows_in = flagged[:, cols["flag_in"]] > 0
    if rows_loo.any():
        Xt, Yt, wt = training.arrays(int(rows_loo.sum()))
        idx = index[rows_loo]
        log_others = np.full(Xt.shape[0], np.nan)
        log_others[idx] = flagged[rows_loo, cols["log_others"]]
        local = _local_rows(spec, Xt, Yt, wt, log_others, True, unit)
        values = flagged[rows_loo][:, cols["loo"]].copy()
        direct, f, _, _ = solve_rows(design, local, Xt, idx, p)
        values[np.searchsorted(idx, direct.index)] = f
        omega = np.ones(Xt.shape[0]) if wt is None else wt
        errs = ((Yt[idx] - values) ** 2).mean(axis=1)
        result.sse_loo += float(omega[idx] @ errs) if np.isfinite(errs).all() else np.inf
        result.fixed["loo"] = (idx, values)
    if rows_in.any():
        def pending(ev: Evaluation) -> None:
            Xt, Yt, wt = training.arrays(int(rows_in.sum()))
            idx = index[rows_in]
            local = _local_rows(spec, Xt, Yt, wt, None, False, unit)
            fitted_rows = flagged[rows_in][:, cols["fitted"]].copy()
            diag_rows = flagged[rows_in, cols["diag"]].copy()
            direct, f, c, m0 = solve_rows(design, local, Xt, idx, p)
            at = np.searchsorted(idx, direct.index)
            omega = np.ones(Xt.shape[0]) if wt is None else wt
            fitted_rows[at] = f
            with np.errstate(invalid="ignore", divide="ignore"):
                diag_rows[at] = (flagged[rows_in, cols["share"]][at] * omega[direct.index]
                                 * c[:, 0] / m0)
            sq_rows = (Yt[idx] - fitted_rows) ** 2
            ev.rss = ev.rss + omega[idx] @ sq_rows
            ev.fit_finite = ev.fit_finite and bool(np.isfinite(sq_rows).all())
            ev.trace += float(diag_rows.sum())
            ev.fixed["fitted"] = (idx, fitted_rows)
            ev.fixed["diag"] = (idx, diag_rows)

        result._pending = pending
    return result


def _da() -> Any:
    import dask.array as da

    return da


def patch(column: Any, fixed: tuple[np.ndarray, np.ndarray] | None) -> Any:
    """A lazy column ``(n,)`` or ``(n, p)`` with the rows ``fixed = (index, values)`` replaced."""
    if fixed is None:
        return column
    index, values = fixed

    def replace(block: np.ndarray, block_info: Any = None) -> np.ndarray:
        lo, hi = block_info[0]["array-location"][0]
        sel = (index >= lo) & (index < hi)
        if not sel.any():
            return block
        block = block.copy()
        block[index[sel] - lo] = values[sel]
        return block

    return column.map_blocks(replace, dtype=column.dtype)
