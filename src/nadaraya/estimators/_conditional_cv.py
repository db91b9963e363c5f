"""Least-squares cross-validation of a conditional density (Hall, Racine and Li 2004).

With the dependent variables ``y`` first and the conditioning ones ``x`` after
on ``z = [y, x]`` (see :mod:`._conditional`), the criterion of statsmodels'
``KDEMultivariateConditional.imse`` (``bw="cv_ls"``) and of np's
``npcdensbw(bwmethod="cv.ls")`` is

    CV_LS(h) = sum_i w_i [G_{-i}(x_i) / mu_{-i}(x_i)^2 - 2 f_{-i}(x_i, y_i) / mu_{-i}(x_i)] / W

an estimate, up to a constant, of ``int int (f(y | x) - f_true(y | x))^2 f(x) dx dy``:

* ``mu_{-i}(x_i)`` and ``f_{-i}(x_i, y_i)``: the marginal and joint estimates
  without observation ``i`` (log kernel sums through the engine's
  leave-one-out mask);
* ``G_{-i}(x_i) = sum_{j, l} a_ij a_il Kbar_y(y_j, y_l)`` with
  ``a_ij = w_j K_x(x_i, x_j)`` over the rows other than ``i``: the square of
  the conditional estimate at ``x_i`` integrated over ``y``. ``Kbar_y = K_y * K_y``
  is the convolution kernel of ``y``'s product kernel (a Gaussian of
  ``sqrt(2) h`` for a continuous ``y``, ``P P^T`` over the observed levels for a
  categorical one; :func:`._density_cv._convolution`).

The normalizing constants of ``K_x`` cancel in both ratios, and so does the
scale of the weights. ``G`` needs ``Kbar_y a_i`` for every ``i``: for a block of
rows ``i`` the normalized rows ``a_i / sum_j a_ij`` (the engine's
:func:`~nadaraya.weights` under the leave-one-out mask) are the value columns
of one engine sum of ``Kbar_y`` over the keys ``y_l``, so memory stays within
the working-memory budget, ``O(n b)`` for ``b`` rows, and the time is
``O(n^3)`` in all (as in statsmodels and np).

Sample weights count as frequencies: leaving observation ``i`` out removes one
unit of its weight (all of it when the weight is below one), so integer
weights give the criterion of the repeated rows. The sums are exact (the
engine's exact paths; a ``tolerance`` is not used by this criterion).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._config import get_config
from ..engine import smooth, weights
from ..masks import LeaveOneOut
from ._conditional import ConditionalModel
from ._density_cv import _convolution, check_cv_ls, log_kernel_sums
from ._density_kernel import DensityKernel
from ._kernel import self_scores

__all__ = ["conditional_cv_ls", "cv_ls_terms"]

#: ``(n,)`` float64 arrays held per row of a block of the quadratic forms.
_ARRAYS_PER_ROW = 6


def _rest_log_mass(model: DensityKernel, X: np.ndarray, logw: np.ndarray,
                   log_rest: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Log of ``sum_j u_j K(x_i, x_j)`` over what stays of the sample without observation ``i``.

    Returns the log mass of the other rows plus row ``i``'s remaining copies,
    shape ``(n,)``, and the log mass of those copies alone (None when no row
    has any left).
    """
    logu = logw
    extra = model.key_log_weights(X)
    if extra is not None:
        logu = logu + extra
    kernel = model.kernel()
    others = log_kernel_sums(X, X, kernel, logu, loo=True)
    if log_rest is None:
        return others, None
    own = log_rest + (logu - logw) + self_scores(kernel, X)
    return np.logaddexp(others, own), own


def _block_rows(n: int) -> int:
    """Rows ``i`` per block of ``(n, b)`` arrays within the working-memory budget."""
    per_row = 8.0 * _ARRAYS_PER_ROW * max(n, 1)
    return max(1, int(get_config().working_memory * 2**20 // per_row))


def _quadratic_forms(model: ConditionalModel, Z: np.ndarray, logw: np.ndarray,
                     marginal: np.ndarray, own: np.ndarray | None) -> np.ndarray:
    """``G_{-i}(x_i) / mu_{-i}(x_i)^2`` of each row, shape ``(n,)`` (NaN where ``mu_{-i} = 0``)."""
    k = model.k_dep
    joint = model.joint
    dep = DensityKernel(joint.name, joint.types[:k], joint.bandwidth[:k], joint.levels[:k],
                        joint.ukernel, joint.okernel)
    conv, log_norm = _convolution(dep)
    X, Y = Z[:, k:], Z[:, :k]
    xk = model.marginal.kernel()
    logu = logw
    extra = model.marginal.key_log_weights(X)
    if extra is not None:
        logu = logu + extra
    scale = np.exp(logu - logu.max())
    n = Z.shape[0]
    share = None if own is None else np.exp(own - marginal)
    out = np.empty(n)
    step = _block_rows(n)
    for start in range(0, n, step):
        rows = np.arange(start, min(n, start + step))
        P = np.asarray(weights(X[rows], X, xk, LeaveOneOut(rows), empty="nan"), dtype=float)
        A = P * scale[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            A /= A.sum(axis=1, keepdims=True)
        if share is not None:
            A *= (1.0 - share[rows])[:, None]
            A[np.arange(rows.size), rows] = share[rows]
        values = np.ascontiguousarray(A.T)
        sums, lse = smooth(Y, Y, values, conv, return_lse=True, empty="nan")
        sums = np.asarray(sums, dtype=float) * np.exp(np.asarray(lse, dtype=float))[:, None]
        out[rows] = np.einsum("ji,ji->i", values, sums)
    return out * math.exp(log_norm)


def cv_ls_terms(model: ConditionalModel, Z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Each row's term ``G_{-i} / mu_{-i}^2 - 2 f_{-i} / mu_{-i}`` of the criterion, shape ``(n,)``.

    Parameters
    ----------
    model : ConditionalModel
        The joint and marginal kernels at one bandwidth (Gaussian kernel).
    Z : ndarray of shape (n, k_dep + k_indep)
        ``[y, x]`` of the training rows.
    w : ndarray of shape (n,)
        Positive frequency weights.

    Returns
    -------
    ndarray of shape (n,)
        NaN or infinite where ``x_i`` has no other row with weight.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators._conditional import ConditionalModel
    >>> from nadaraya.estimators._density_kernel import DensityKernel
    >>> Z = np.random.default_rng(0).normal(size=(30, 2))
    >>> joint = DensityKernel("gaussian", "cc", np.array([0.5, 0.4]), [None, None])
    >>> cv_ls_terms(ConditionalModel(joint, 1), Z, np.ones(30)).shape
    (30,)
    """
    check_cv_ls(model.joint.name)
    k = model.k_dep
    logw = np.log(w)
    rest = np.maximum(w - 1.0, 0.0)
    log_rest = None
    if (rest > 0).any():
        with np.errstate(divide="ignore"):
            log_rest = np.log(rest)
    joint, _ = _rest_log_mass(model.joint, Z, logw, log_rest)
    marginal, own = _rest_log_mass(model.marginal, Z[:, k:], logw, log_rest)
    log_ratio = joint - marginal + model.joint.log_norm() - model.marginal.log_norm()
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = np.exp(log_ratio)
    square = _quadratic_forms(model, Z, logw, marginal, own)
    return square - 2.0 * ratio


def conditional_cv_ls(make: Callable[[np.ndarray], DensityKernel], k_dep: int, Z: np.ndarray,
                      w: np.ndarray) -> Callable[[np.ndarray], float]:
    """``h -> CV_LS(h)``, the least-squares criterion (``inf`` where a term is not finite).

    Parameters
    ----------
    make : callable
        ``h -> DensityKernel`` on all columns of ``Z`` (Gaussian kernel).
    k_dep : int
        Number of dependent variables (the first columns of ``Z``).
    Z : ndarray of shape (n, k_dep + k_indep)
    w : ndarray of shape (n,)
        Positive frequency weights.

    Returns
    -------
    callable
        ``objective(h)`` with ``h`` of shape ``(k_dep + k_indep,)``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators._density_fit import density_model
    >>> Z = np.random.default_rng(0).normal(size=(30, 2))
    >>> make = density_model("gaussian", "cc", [None, None], "aitchison-aitken", "wang-van-ryzin")
    >>> value = conditional_cv_ls(make, 1, Z, np.ones(30))(np.array([0.5, 0.4]))
    """
    total = float(w.sum())

    def objective(h: np.ndarray) -> float:
        terms = cv_ls_terms(ConditionalModel(make(h), k_dep), Z, w)
        if not np.isfinite(terms).all():
            return math.inf
        return float(w @ terms / total)

    return objective
