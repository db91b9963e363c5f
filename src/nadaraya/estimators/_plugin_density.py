"""Sheather and Jones' solve-the-equation plug-in bandwidth for a 1-D density.

The bandwidth ``h`` solves ``h = (c1 / S(alpha2 h^(5/7)))^(1/5)``
(Sheather and Jones 1991), with the density functionals

    S(g) = sum_ij w_i w_j phi4((x_i - x_j) / g) / (W (W - 1) g^5)
         = sum_ij w_i w_j phi_g^(4)(x_i - x_j) / (W (W - 1))
    T(g) = sum_ij w_i w_j phi6((x_i - x_j) / g) / (W (W - 1) g^7)

(``phi4``, ``phi6`` the fourth and sixth derivatives of the standard normal
density; the sums include ``i = j``, as R's ``bw.SJ`` does), ``c1 = 1 / (2
sqrt(pi) W)``, ``alpha2 = 1.357 (S(a) / -T(b))^(1/7)``, ``a = 1.24 s W^(-1/7)``,
``b = 1.23 s W^(-1/9)`` and the scale ``s = min(sd, IQR / 1.349)``. The
root is bracketed in ``[0.1, 1] * 1.144 s W^(-1/5)``, widened as R widens it,
and found by Brent's method to a relative ``1e-12``. This is R's
``bw.SJ(x, method = "ste")`` with the functionals summed exactly over all
pairs (R bins the pairwise distances into ``nb`` bins): the engine's
unnormalized sums of the signed kernel
:class:`~nadaraya.kernels.GaussianDerivative` (``phi_g^(r)``, the ``r``-th
derivative of the normal density of standard deviation ``g``), ``O(n^2)``
time per functional, bounded memory. Sample weights count as
frequencies (integer weights give the bandwidth of the repeated rows).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .._errors import NadarayaError
from ..kernels import GaussianDerivative
from ._functionals import pair_sum

__all__ = ["sheather_jones", "weighted_quantile"]


def weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """Quantile ``q`` of ``x`` with frequency weights ``w`` (R's type 7 on repeated rows)."""
    order = np.argsort(x, kind="stable")
    xs, cum = x[order], np.cumsum(w[order])
    pos = (cum[-1] - 1.0) * q
    lo = math.floor(pos)

    def at(k: float) -> float:
        return float(xs[min(int(np.searchsorted(cum, k, side="right")), xs.size - 1)])

    return at(lo) + (pos - lo) * (at(lo + 1) - at(lo))


def sheather_jones(x: np.ndarray, w: np.ndarray | None = None) -> float:
    """The Sheather-Jones solve-the-equation bandwidth of 1-D data.

    Parameters
    ----------
    x : ndarray of shape (n,)
    w : ndarray of shape (n,), optional
        Frequency weights (default one per row).

    Returns
    -------
    float
        The Gaussian kernel's standard deviation ``h``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=200)
    >>> h = sheather_jones(x)
    >>> 0.1 < h < 1.0
    True
    """
    x = np.asarray(x, dtype=float)
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float)
    n = float(w.sum())
    if x.size < 2 or not n > 1.0:
        raise NadarayaError(
            f"bandwidth='sheather-jones' needs at least 2 samples (total weight above 1); got "
            f"{x.size} sample(s) of total weight {n:.3g}. Give bandwidth as a number instead."
        )
    mean = float(w @ x / n)
    sd = math.sqrt(float(w @ (x - mean) ** 2) / (n - 1.0))
    iqr = weighted_quantile(x, w, 0.75) - weighted_quantile(x, w, 0.25)
    scale = min(sd, iqr / 1.349)
    if not scale > 0:
        raise NadarayaError(
            "bandwidth='sheather-jones' needs spread in the data: its standard deviation and "
            f"interquartile range are {sd:.3g} and {iqr:.3g}. Give bandwidth as a number, or "
            "'scott', which reads the standard deviation alone."
        )
    pairs = n * (n - 1.0)

    def S(g: float) -> float:
        return pair_sum(x[:, None], w, GaussianDerivative(4, g)) / pairs

    def T(g: float) -> float:
        return pair_sum(x[:, None], w, GaussianDerivative(6, g)) / pairs

    a = 1.24 * scale * n ** (-1.0 / 7.0)
    b = 1.23 * scale * n ** (-1.0 / 9.0)
    c1 = 1.0 / (2.0 * math.sqrt(math.pi) * n)
    td = -T(b)
    if not (math.isfinite(td) and td > 0):
        raise NadarayaError(
            "bandwidth='sheather-jones': the sample is too sparse to estimate the sixth "
            "derivative functional (T(b) >= 0). Give bandwidth as a number or 'scott'."
        )
    alph2 = 1.357 * (S(a) / td) ** (1.0 / 7.0)

    def f(h: float) -> float:
        return (c1 / S(alph2 * h ** (5.0 / 7.0))) ** 0.2 - h

    hmax = 1.144 * scale * n ** (-0.2)
    lower, upper = 0.1 * hmax, hmax
    tries = 1
    while f(lower) * f(upper) > 0:
        if tries > 99:
            raise NadarayaError(
                "bandwidth='sheather-jones' found no solution of its equation in "
                f"[{lower:.3g}, {upper:.3g}]; give bandwidth as a number or 'scott'."
            )
        if tries % 2:
            upper *= 1.2
        else:
            lower /= 1.2
        tries += 1
    return float(brentq(f, lower, upper, xtol=1e-14 * hmax, rtol=1e-12, maxiter=200))
