"""Diagonal direct plug-in bandwidths of a Gaussian density estimate in 2 to 6 dimensions.

Wand and Jones (1994) choose the diagonal bandwidth matrix ``H = diag(h_1^2,
..., h_d^2)`` that minimizes the asymptotic mean integrated squared error of
the Gaussian kernel estimate,

    AMISE(h) = (4 pi)^(-d/2) / (n prod_k h_k) + 1/4 sum_ij h_i^2 h_j^2 psi_ij,

with ``psi_ij = int (d^2 f / d x_i^2)(d^2 f / d x_j^2) = int f
d^4 f / (d x_i^2 d x_j^2)`` (by parts), estimated by the kernel functional

    psi_ij(g) = sum_kl w_k w_l d^4 phi_g(x_k - x_l) / (d x_i^2 d x_j^2) / W^2

(``phi_g`` the product of ``d`` normal densities of standard deviation
``g``; the sums include ``k = l``). This is R's ``ks::Hpi.diag(x,
binned=FALSE)`` with the pilot of its default for ``d > 2`` (``pilot =
"dscalar"``, Chacon and Duong 2010: two stages from a normal reference), used
here for every ``d`` (ks' default for ``d = 2``, ``pilot = "samse"``, reads its
sixth-order functionals in ks 1.14.0 at the positions of the distinct
multi-indices from the vector of all ordered ones). In steps:

1. each column is divided by its standard deviation (``pre = "scale"``), so
   that the sample covariance ``S`` is the correlation matrix;
2. a normal-reference pilot ``g6 = (2 B1 / (-B2 + sqrt(B2^2 + 4 B1 B3)))^(1 /
   (d + 8)) n^(-1 / (d + 8))`` for the sixth-order functional, with ``B1 = 2
   (2 pi)^-d 15 d (d + 2) (d + 4) (d + 6)``, ``B2 = -(d + 4) 2^(2 - d/2) (2
   pi)^-d |S|^(-1/2) 15 nu_4(S^-1)`` and ``B3 = ||tr_12 psi8(S)||^2`` (the
   eighth-derivative tensor of the normal density of covariance ``2 S`` at 0,
   traced over two indices; ``nu_r`` the moment functional of ks);
3. ``eta6 = sum_kl w_k w_l Laplacian^3 phi_g6(x_k - x_l) / W^2`` and the
   pilot ``g4 = (2 A1 / ((-A2 + sqrt(A2^2 + 4 A1 A3)) n))^(1 / (d + 6))`` of
   the fourth-order functionals, ``A1 = (2 d + 8) L0^2 3 d (d + 2)``, ``A2 =
   (d + 2) L0 3 eta6``, ``A3 = eta6^2``, ``L0 = (2 pi)^(-d/2)``;
4. ``psi_ij(g4)`` plugged into AMISE, minimized over ``log h`` (Newton's
   method with the exact Hessian, to rounding; ks stops its BFGS search at a
   relative change ``1e-8`` of the criterion), and ``h`` multiplied back by the
   standard deviations.

The pair sums are exact: the engine's unnormalized sums of the signed kernels
:class:`~nadaraya.kernels.GaussianDerivative` (one per functional ``psi_ij``,
``i <= j``) and :class:`~nadaraya.kernels.GaussianLaplacian` (``eta6``), each
``O(n^2 d)`` in blocks (bounded memory).
Sample weights count as frequencies.

References
----------
Wand, M. P. and Jones, M. C. (1994). Multivariate plug-in bandwidth selection.
Computational Statistics 9, 97-116. Chacon, J. E. and Duong, T. (2010).
Multivariate plug-in bandwidth selection with unconstrained pilot bandwidth
matrices. Test 19, 375-398. Duong, T. (2007). ks: Kernel density estimation
and kernel discriminant analysis for multivariate data in R. Journal of
Statistical Software 21(7).
"""

from __future__ import annotations

import math
import string

import numpy as np

from .._errors import NadarayaError
from ..kernels import GaussianDerivative, GaussianLaplacian
from ._bandwidth import weighted_spread
from ._functionals import pair_sum

__all__ = ["MAX_DIM", "plugin_diagonal"]

#: Largest number of continuous features the selector takes.
MAX_DIM = 6


def _pairings(items: tuple[int, ...]) -> list[list[tuple[int, int]]]:
    """Every partition of ``items`` (an even number) into pairs."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for i, other in enumerate(rest):
        for tail in _pairings(rest[:i] + rest[i + 1:]):
            out.append([(first, other), *tail])
    return out


def _moment(r: int, A: np.ndarray) -> float:
    """ks' ``nu(r, A)``: ``r! 2^r`` times the ``r``-th coefficient of ``det(I - t A)^(-1/2)``."""
    eig = np.linalg.eigvalsh(A)
    traces = [float(np.sum(eig**p)) for p in range(1, r + 1)]
    coef = [1.0]
    for p in range(1, r + 1):
        coef.append(sum(traces[k] * coef[p - 1 - k] for k in range(p)) / (2 * p))
    return math.factorial(r) * 2**r * coef[r]


def _eighth_trace_norm(S: np.ndarray) -> float:
    """``||sum_j psi8_jj...||^2``: the eighth derivative of ``phi_2S`` at 0, traced once.

    ``D^8 phi_Sigma(0) = phi_Sigma(0) sum over the 105 pairings of the eight
    indices of products of entries of ``Sigma^-1`` (Isserlis); the first two
    indices share a summed letter.
    """
    d = S.shape[0]
    Q = np.linalg.inv(2.0 * S)
    phi0 = (2.0 * math.pi) ** (-d / 2) / math.sqrt(np.linalg.det(2.0 * S))
    letters = "z" + "z" + string.ascii_lowercase[:6]
    T = np.zeros((d,) * 6)
    for pairing in _pairings(tuple(range(8))):
        subs = ",".join(letters[a] + letters[b] for a, b in pairing)
        T += np.einsum(f"{subs}->{letters[2:]}", *([Q] * 4))
    return float(np.sum((phi0 * T) ** 2))


def _psi4(Z: np.ndarray, w: np.ndarray, g: float) -> np.ndarray:
    """The functionals ``psi_ij(g)``, shape ``(d, d)``: one engine sum per pair ``i <= j``."""
    d = Z.shape[1]
    out = np.zeros((d, d))
    W2 = float(w.sum()) ** 2
    for i in range(d):
        for j in range(i, d):
            order = [0] * d
            order[i] += 2
            order[j] += 2
            out[i, j] = out[j, i] = pair_sum(Z, w, GaussianDerivative(tuple(order), g)) / W2
    return out


def _eta6(Z: np.ndarray, w: np.ndarray, g: float) -> float:
    """``sum_kl w_k w_l Laplacian^3 phi_g(x_k - x_l) / W^2``."""
    return pair_sum(Z, w, GaussianLaplacian(3, g)) / float(w.sum()) ** 2


def _pilots(Z: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """The pilot bandwidths ``g6`` and ``g4`` of the scaled data ``Z``."""
    d = Z.shape[1]
    W = float(w.sum())
    mean = w @ Z / W
    dev = Z - mean
    S = (dev * w[:, None]).T @ dev / (W - 1.0)
    Sinv = np.linalg.inv(S)
    two_pi_d = (2.0 * math.pi) ** (-d)
    B1 = 2.0 * two_pi_d * 15.0 * d * (d + 2) * (d + 4) * (d + 6)
    B2 = (-(d + 4) * 2.0 ** (2.0 - d / 2) * two_pi_d / math.sqrt(np.linalg.det(S)) * 15.0
          * _moment(4, Sinv))
    B3 = _eighth_trace_norm(S)
    g6 = (2.0 * B1 / (-B2 + math.sqrt(B2 * B2 + 4.0 * B1 * B3))) ** (1.0 / (d + 8)) \
        * W ** (-1.0 / (d + 8))
    eta6 = _eta6(Z, w, g6)
    L0 = (2.0 * math.pi) ** (-d / 2)
    A1 = (2 * d + 8) * L0**2 * 3.0 * d * (d + 2)
    A2 = (d + 2) * L0 * 3.0 * eta6
    A3 = eta6**2
    g4 = (2.0 * A1 / ((-A2 + math.sqrt(A2 * A2 + 4.0 * A1 * A3)) * W)) ** (1.0 / (d + 6))
    return g6, g4


def _minimize(psi: np.ndarray, W: float) -> np.ndarray:
    """``h`` minimizing AMISE for the functionals ``psi``, by Newton's method on ``log h``."""
    d = psi.shape[0]
    c = (4.0 * math.pi) ** (-d / 2) / W
    s0 = np.full(d, math.log(4.0 / (W * (d + 2))) / (d + 4))  # the normal scale rule
    scale = c * math.exp(-s0.sum())

    def parts(s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        u = np.exp(2.0 * s)
        E = c * math.exp(-s.sum())
        pu = psi @ u
        value = E + 0.25 * float(u @ pu)
        grad = -E + u * pu
        hess = E + 2.0 * np.diag(u * pu) + 2.0 * np.outer(u, u) * psi
        return value / scale, grad / scale, hess / scale

    s = s0
    for _ in range(200):
        value, grad, hess = parts(s)
        try:
            step = -np.linalg.solve(np.linalg.cholesky(hess).T,
                                    np.linalg.solve(np.linalg.cholesky(hess), grad))
        except np.linalg.LinAlgError:
            step = -grad  # not convex here: downhill first
        t = 1.0
        while t > 1e-12 and not parts(s + t * step)[0] <= value + 1e-14 * abs(value):
            t /= 2.0
        s = s + t * step
        if np.max(np.abs(t * step)) < 1e-13:
            break
    _, grad, hess = parts(s)
    if not (np.all(np.isfinite(s)) and np.linalg.norm(grad) < 1e-8
            and np.all(np.linalg.eigvalsh(hess) > 0)):
        raise NadarayaError(
            "bandwidth='sheather-jones': the plug-in estimate of the error has no minimum "
            "for these data (its curvature functionals are not positive). Give bandwidth "
            "as numbers, 'scott' or 'cv_ml'."
        )
    return np.exp(s)


def plugin_diagonal(X: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Diagonal plug-in bandwidths (standard deviations) of a Gaussian density estimate.

    Parameters
    ----------
    X : ndarray of shape (n_samples, d)
        Continuous data, ``2 <= d <= 6``.
    w : ndarray of shape (n_samples,), optional
        Frequency weights (default one per row).

    Returns
    -------
    ndarray of shape (d,)
        ``h_k = sqrt(H_kk)`` of ks' ``Hpi.diag(X, binned=FALSE)`` (see the module).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(300, 2)) * [1.0, 3.0]
    >>> h = plugin_diagonal(X)
    >>> bool(2.0 < h[1] / h[0] < 4.5)
    True
    """
    X = np.asarray(X, dtype=float)
    w = np.ones(X.shape[0]) if w is None else np.asarray(w, dtype=float)
    n, d = X.shape
    W = float(w.sum())
    if not 2 <= d <= MAX_DIM:
        raise NadarayaError(
            f"bandwidth='sheather-jones' takes 1 to {MAX_DIM} continuous features; got {d}. "
            "Use bandwidth='scott' or 'cv_ml', or give one bandwidth per feature."
        )
    if n < 2 or not W > 1.0:
        raise NadarayaError(
            f"bandwidth='sheather-jones' needs at least 2 samples (total weight above 1); got "
            f"{n} sample(s) of total weight {W:.3g}. Give bandwidth as a number instead."
        )
    sd = weighted_spread(X, w, ddof=1.0)[1]
    if not np.all(sd > 0):
        raise NadarayaError(
            f"bandwidth='sheather-jones' needs spread in every continuous feature; feature(s) "
            f"{np.flatnonzero(~(sd > 0)).tolist()} are constant. Give bandwidth as numbers."
        )
    Z = X / sd
    dev = Z - w @ Z / W
    corr = (dev * w[:, None]).T @ dev / (W - 1.0)
    if not np.linalg.eigvalsh(corr)[0] > 1e-10:
        raise NadarayaError(
            "bandwidth='sheather-jones' needs continuous features that are not collinear; "
            f"the correlation matrix of these {d} is singular (smallest eigenvalue "
            f"{np.linalg.eigvalsh(corr)[0]:.3g}). Drop the redundant columns, or give "
            "bandwidth as numbers."
        )
    _, g4 = _pilots(Z, w)
    return sd * _minimize(_psi4(Z, w, g4), W)
