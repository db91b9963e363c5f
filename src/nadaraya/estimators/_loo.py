"""Leave-one-out fits, the in-sample fit and the smoother diagonal in one engine pass.

The engine smooths the augmented values at the training points with the
:class:`~nadaraya.masks.LeaveOneOut` mask and returns the log-sum of the
visible weights, ``lse_{-i} = log sum_{j != i} K_ij``. Then, exactly and
without an ``n x n`` matrix:

* the leave-one-out means are what the pass returns;
* adding back point ``i`` with its share ``pi_i = K_ii / sum_j K_ij =
  sigmoid(log K_ii - lse_{-i})`` gives the in-sample means;
* the smoother diagonal is ``S_ii = pi_i w_i c_i0 / E[w]`` (``pi_i`` for
  Nadaraya-Watson without weights).

With sample weights, leaving a point out removes one unit of its weight (all
of it when its weight is below one), so integer weights act as repeated rows.
The weights may come in a power-of-two frame (see :mod:`._frame`): ``unit``
is then the caller's weight one in it.

Rows the moment solve cannot fix to rounding (an ill-conditioned or nearly
rank-deficient local covariance, or moments that cancel about the global
centre; see :func:`._direct.solve_exact`) are solved again from their kernel
weights, the leave-one-out ones with point ``i``'s weight reduced the same way
(not with a user ``mask``: an index-based mask would change meaning for a
subset of the queries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..engine import smooth, weights
from ..masks import LeaveOneOut, MatrixMask, Problem, get_mask
from ._design import LocalDesign
from ._direct import LocalRows, solve_exact
from ._kernel import KernelSpec

__all__ = ["LooFit", "criterion_from", "criterion_value", "loo_fit"]

CRITERIA = ("cv", "gcv", "aicc")


@dataclass
class LooFit:
    """Results of one leave-one-out pass at the training points.

    Attributes
    ----------
    loo : ndarray of shape (n, p)
        Leave-one-out predictions (NaN where a point has no visible neighbour).
    fitted : ndarray of shape (n, p)
        In-sample fitted values.
    diag : ndarray of shape (n,)
        Diagonal of the smoother matrix.
    """

    loo: np.ndarray
    fitted: np.ndarray | None = None
    diag: np.ndarray | None = None
    _rest: Any = field(default=None, repr=False)

    def complete(self) -> LooFit:
        """Compute :attr:`fitted` and :attr:`diag` if the pass left them out; returns self."""
        if self.fitted is None:
            self.fitted, self.diag = _in_sample(*self._rest)
            self._rest = None
        return self


def _own_visible(mask: Any, X: np.ndarray) -> np.ndarray:
    """Whether each training point is in its own visible set under the user's mask."""
    m = get_mask(mask)
    if m is None:
        return np.ones(X.shape[0], bool)
    t = torch.as_tensor(X, dtype=torch.float64)
    bound = m.bind(Problem(X.shape[0], X.shape[0], t, t))
    idx = torch.arange(X.shape[0])
    return bound.pairs(idx, idx[:, None])[:, 0].numpy().astype(bool)


def loo_fit(spec: KernelSpec, design: LocalDesign, X: np.ndarray, Y: np.ndarray,
            w: np.ndarray | None, *, values: np.ndarray | None = None, mask: Any = None,
            engine: str = "auto", full: bool = True, unit: float = 1.0,
            tolerance: float | None = None) -> LooFit:
    """Leave-one-out and in-sample fits at the training points, one engine pass.

    Parameters
    ----------
    spec : KernelSpec
    design : LocalDesign
    X : ndarray of shape (n, n_features)
    Y : ndarray of shape (n, p)
    w : ndarray of shape (n,) or None
        Sample weights (positive), in any power-of-two frame.
    values : ndarray of shape (n, P), optional
        ``design.values(X, Y, w)`` when already computed.
    mask : optional
        The caller's mask; leave-one-out is combined with it.
    engine : str
    full : bool, default True
        Also compute the in-sample fit and the smoother diagonal now (else
        :meth:`LooFit.complete` computes them when needed, without another
        engine pass: the leave-one-out criterion does not need them).
    unit : float, default 1.0
        The weight one in the frame of ``w``: leaving a point out removes that
        much of its weight (``inf``: all of every weight).
    tolerance : float or None
        As in :func:`nadaraya.smooth`.
    """
    p = Y.shape[1]
    A = design.values(X, Y, w) if values is None else values
    user = get_mask(mask)
    loo_mask = LeaveOneOut() if user is None else user & LeaveOneOut()
    means, lse = smooth(X, X, A, spec.kernel, loo_mask, bandwidth=spec.bandwidth,
                        engine=engine, return_lse=True, empty="nan", tolerance=tolerance)
    own = spec.self_scores(X)
    share, in_sample, loo_means = own_point_back(means, lse, own, A, w, unit,
                                                 _own_visible(mask, X))
    direct = mask is None and design.degree >= 1
    loo = solve_exact(design, loo_means, X, p,
                      _local_rows(spec, X, Y, w, lse - own, True, unit) if direct else None)[0]
    in_rows = _local_rows(spec, X, Y, w, None, False, unit) if direct else None
    fit = LooFit(loo, _rest=(design, in_sample, X, p, w, share, in_rows))
    return fit.complete() if full else fit


def _local_rows(spec: KernelSpec, X: np.ndarray, Y: np.ndarray, w: np.ndarray | None,
                log_others: np.ndarray | None, leave_out: bool, unit: float = 1.0
                ) -> LocalRows:
    """Weight rows of the training points for a direct solve (see :func:`solve_exact`).

    With ``leave_out`` point ``i`` is hidden from row ``i`` and comes back with
    one ``unit`` of weight less, as in the leave-one-out means; ``log_others`` is
    ``lse_{-i} - log K_ii``, the log of the others' kernel sum relative to
    point ``i``'s own kernel weight.
    """
    omega = np.ones(X.shape[0]) if w is None else w

    def rows(idx: np.ndarray) -> np.ndarray:
        if not leave_out:
            return weights(X[idx], X, spec.kernel, bandwidth=spec.bandwidth,
                           empty="nan") * omega
        cols = np.arange(X.shape[0])
        hide = MatrixMask(cols[None, :] != idx[:, None])
        W = weights(X[idx], X, spec.kernel, hide, bandwidth=spec.bandwidth, empty="nan")
        P = np.nan_to_num(W) * omega
        extra = np.clip(omega[idx] - unit, 0.0, None)
        if w is None or not extra.any():
            return np.where(np.isnan(W).all(axis=1, keepdims=True), np.nan, P)
        # the others' weights are relative to their own sum, exp(lse_{-i}); point i's
        # is exp(-log_others) times its remaining weight: the larger side is scaled to one
        rel = log_others[idx]
        own_larger = (extra > 0) & (rel < 0)
        with np.errstate(over="ignore"):
            others = np.where(own_larger, np.exp(np.where(own_larger, rel, 0.0)), 1.0)
            own = np.where(extra > 0, extra * np.exp(np.minimum(-rel, 0.0)), 0.0)
        P *= others[:, None]
        P[np.arange(idx.size), idx] = own
        return P

    return LocalRows(X, Y, rows, w)


def _in_sample(design: LocalDesign, in_sample: np.ndarray, X: np.ndarray, p: int,
               w: np.ndarray | None, share: np.ndarray, in_rows: LocalRows | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """In-sample fitted values and the smoother diagonal from the in-sample means."""
    fitted, c, mu0, _ = solve_exact(design, in_sample, X, p, in_rows, coef=True)
    omega = np.ones(X.shape[0]) if w is None else w
    with np.errstate(invalid="ignore", divide="ignore"):
        diag = share * omega * c[:, 0] / mu0
    return fitted, diag


def own_point_back(means: np.ndarray, lse: np.ndarray, own: np.ndarray, A: np.ndarray,
                   w: np.ndarray | None, unit: float, visible: Any = True
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each point's own term added back to its leave-one-out means.

    Parameters
    ----------
    means : ndarray of shape (n, q)
        Leave-one-out means of the augmented values ``A``.
    lse, own : ndarray of shape (n,)
        Log-sum of the other points' weights, and each point's own score.
    A : ndarray of shape (n, q)
    w : ndarray of shape (n,) or None
        Sample weights in their frame (None: unweighted).
    unit : float
        The weight one in the frame of ``w``.
    visible : bool or ndarray of shape (n,)
        Whether the mask lets each point see itself.

    Returns
    -------
    share : ndarray of shape (n,)
        The own point's share of its row's weight.
    in_sample : ndarray of shape (n, q)
        The in-sample means (the own point back whole).
    loo_means : ndarray of shape (n, q)
        The leave-one-out means: with sample weights, the own point back less one unit.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        share = 1.0 / (1.0 + np.exp(lse - own))
    share = np.where(visible, share, 0.0)
    in_sample = _add_back(means, A, share)
    if w is None:
        return share, in_sample, means
    keep = np.clip(w - unit, 0.0, None) / w
    return share, in_sample, _add_back(means, A * keep[:, None], np.where(keep > 0, share, 0.0))


def _add_back(means: np.ndarray, own: np.ndarray, share: np.ndarray) -> np.ndarray:
    """``(1 - share) means + share own``, exact where ``share`` is 1 (means may be NaN)."""
    out = (1.0 - share)[:, None] * np.nan_to_num(means) + share[:, None] * own
    empty = ~np.isfinite(means).all(axis=1) & (share < 1.0)
    out[empty] = np.nan
    return out


def criterion_value(name: str, fit: LooFit, Y: np.ndarray, w: np.ndarray | None,
                    unit: float = 1.0) -> float:
    """Value of a bandwidth criterion (smaller is better); ``inf`` when undefined.

    ``cv``: leave-one-out mean squared error. ``gcv``: ``MSE / (1 - tr S / n)^2``.
    ``aicc``: ``log MSE + (1 + tr S / n) / (1 - (tr S + 2) / n)`` (Hurvich,
    Simonoff and Tsai 1998). Weighted means use the sample weights, and ``n``
    is their sum in units of ``unit`` (the weight one in the frame of ``w``).
    """
    omega = np.ones(Y.shape[0]) if w is None else w
    total = float(omega.sum()) / unit
    if name == "cv":
        err = (Y - fit.loo) ** 2
    else:
        err = (Y - fit.complete().fitted) ** 2
    if not np.isfinite(err).all():
        return float("inf")
    mse = float(omega @ err.mean(axis=1)) / float(omega.sum())
    return criterion_from(name, mse, None if name == "cv" else float(np.sum(fit.diag)), total)


def criterion_from(name: str, mse: float, trace: float | None, total: float) -> float:
    """:func:`criterion_value` from the weighted mean squared error, ``tr S`` and ``n``.

    ``mse`` is that of the leave-one-out fit for ``cv``, of the in-sample fit
    otherwise (``inf`` when some error is not finite); ``trace`` is unused for
    ``cv``; ``total`` is the total weight in units of one sample.
    """
    if not np.isfinite(mse):
        return float("inf")
    if name == "cv":
        return mse
    if trace is None or not np.isfinite(trace):
        return float("inf")
    if name == "gcv":
        denom = (1.0 - trace / total) ** 2
        return mse / denom if trace < total else float("inf")
    if trace + 2.0 >= total or mse <= 0:
        return float("inf") if mse > 0 else float("-inf")
    return float(np.log(mse) + (1.0 + trace / total) / (1.0 - (trace + 2.0) / total))
