"""Direct plug-in bandwidth for 1-D local linear regression (Ruppert, Sheather and Wand 1995).

The selector of R's ``KernSmooth::dpill``, step for step, on its binned
approximations:

1. sort, drop the ``trim`` fraction of points at each end in ``x``; the
   grid spans the remaining ``x`` (``gridsize`` points), on which ``x`` and
   ``y`` are linearly binned;
2. quartic fits on ``N`` blocks of consecutive points, ``N`` chosen by
   Mallows' ``C_p`` among ``1 .. max(min(n // divisor, blockmax), 1)``, give
   the pilot ``sigma^2`` and ``theta_24`` (mean of ``m'' m''''``);
3. a binned local cubic fit at the pilot bandwidth ``g`` estimates ``m''``
   and ``theta_22 = mean m''^2`` (the ``proptrun`` fraction of the grid at
   each end left out);
4. a binned local linear fit at ``lambda`` estimates ``sigma^2`` (residual
   sum of squares over ``n - 2 tr S + tr S S^T``, binned);
5. ``h = (sigma^2 (b - a) / (2 sqrt(pi) theta_22 n))^(1/5)``.

The kernel is the Gaussian, truncated at four bandwidths, as in KernSmooth.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import NadarayaError

__all__ = ["dpill"]

_TAU = 4.0  # kernel support of KernSmooth's binned fits, in bandwidths


def _linear_bins(x: np.ndarray, y: np.ndarray, a: float, b: float, m: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Linear binning of ``(x, y)`` on ``m`` points from ``a`` to ``b`` (KernSmooth ``rlbin``).

    Points outside ``[a, b]`` are dropped (``truncate=TRUE``).
    """
    delta = (b - a) / (m - 1)
    pos = (x - a) / delta + 1.0
    li = np.trunc(pos).astype(np.int64)
    rem = pos - li
    right = x == b
    li = np.where(right, m - 1, li)
    rem = np.where(right, 1.0, rem)
    keep = (li >= 1) & (li < m)
    li, rem, yk = li[keep] - 1, rem[keep], y[keep]
    xc = np.bincount(li, 1.0 - rem, m) + np.bincount(li + 1, rem, m)
    yc = np.bincount(li, (1.0 - rem) * yk, m) + np.bincount(li + 1, rem * yk, m)
    return xc, yc


def _block_fits(x: np.ndarray, y: np.ndarray, blocks: int, q: int = 4
                ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Degree-``q`` least-squares fits on ``blocks`` runs of consecutive sorted points.

    Returns each block's ``x``, residuals and coefficients (lowest power first).
    """
    n = x.size
    size = n // blocks
    xs, res, coefs = [], [], []
    for j in range(blocks):
        lo, hi = j * size, (n if j == blocks - 1 else (j + 1) * size)
        xj, yj = x[lo:hi], y[lo:hi]
        V = xj[:, None] ** np.arange(q + 1)
        c = np.linalg.lstsq(V, yj, rcond=None)[0]
        xs.append(xj)
        res.append(yj - V @ c)
        coefs.append(c)
    return xs, res, coefs


def _cp_blocks(x: np.ndarray, y: np.ndarray, nmax: int, q: int = 4) -> int:
    """The number of blocks minimising Mallows' ``C_p`` (KernSmooth ``cpblock``)."""
    n, qq = x.size, q + 1
    rss = np.array([sum(float(r @ r) for r in _block_fits(x, y, k, q)[1])
                    for k in range(1, nmax + 1)])
    cp = (n - qq * nmax) * rss / rss[-1] + 2 * qq * np.arange(1, nmax + 1) - n
    return int(np.argmin(cp)) + 1


def _block_estimates(x: np.ndarray, y: np.ndarray, blocks: int) -> tuple[float, float]:
    """Pilot ``sigma^2`` and ``theta_24`` from blocked quartic fits (KernSmooth ``blkest``)."""
    n = x.size
    xs, res, coefs = _block_fits(x, y, blocks)
    rss = th24 = 0.0
    for xj, r, c in zip(xs, res, coefs, strict=True):
        second = 2.0 * c[2] + 6.0 * c[3] * xj + 12.0 * c[4] * xj**2
        th24 += float(np.sum(second * 24.0 * c[4]))
        rss += float(r @ r)
    return rss / (n - 5 * blocks), th24 / n


def _moments(counts: np.ndarray, delta: float, h: float, powers: int, square: bool = False
             ) -> np.ndarray:
    """``sum_k counts_k K((k - j) delta / h)^(1 or 2) ((k - j) delta)^p`` at every grid point ``j``.

    Shape ``(m, powers)``; the Gaussian is truncated at ``4 h`` (KernSmooth).
    """
    m = counts.size
    reach = min(math.floor(_TAU * h / delta), m - 1)
    offsets = np.arange(-reach, reach + 1)
    kern = np.exp(-((delta * offsets / h) ** 2) / 2.0)
    if square:
        kern = kern**2
    out = np.zeros((m, powers))
    dist = delta * offsets
    for i, off in enumerate(offsets):
        lo, hi = max(0, -off), min(m, m - off)  # grid points j with j + off on the grid
        weight = counts[lo + off:hi + off] * kern[i]
        out[lo:hi] += weight[:, None] * dist[i] ** np.arange(powers)
    return out


def _local_poly(xc: np.ndarray, yc: np.ndarray, delta: float, h: float, degree: int,
                drv: int) -> np.ndarray:
    """Binned local polynomial estimate of the ``drv``-th derivative (KernSmooth ``locpoly``)."""
    if math.floor(_TAU * h / delta) == 0:
        raise NadarayaError(
            f"bandwidth='dpi': the pilot bandwidth {h:.3g} is below a quarter of the binning "
            f"grid's spacing {delta:.3g}: the target is (nearly) a polynomial, or the data "
            "too few, for a plug-in estimate. Use bandwidth='cv'."
        )
    p = degree + 1
    s = _moments(xc, delta, h, 2 * p - 1)
    t = _moments(yc, delta, h, p)
    idx = np.arange(p)[:, None] + np.arange(p)[None, :]
    coef = np.linalg.solve(s[:, idx], t[:, :, None])[:, :, 0]
    return math.gamma(drv + 1) * coef[:, drv]


def _smoother_diagonals(xc: np.ndarray, delta: float, h: float
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Binned diagonals of ``S`` and ``S S^T`` of local linear fits (``sdiag``, ``sstdiag``)."""
    idx = np.arange(2)[:, None] + np.arange(2)[None, :]
    s = _moments(xc, delta, h, 3)[:, idx]
    u = _moments(xc, delta, h, 3, square=True)[:, idx]
    inv = np.linalg.inv(s)
    first = inv[:, 0, :]
    return inv[:, 0, 0], np.einsum("ki,kij,kj->k", first, u, first)


def dpill(x: np.ndarray, y: np.ndarray, *, blockmax: int = 5, divisor: int = 20,
          trim: float = 0.01, proptrun: float = 0.05, gridsize: int = 401) -> float:
    """Ruppert, Sheather and Wand's direct plug-in bandwidth for local linear regression.

    The value of R's ``KernSmooth::dpill(x, y)`` with the same arguments
    (``range.x`` its default, ``truncate=TRUE``): the Gaussian kernel's
    standard deviation.

    Parameters
    ----------
    x, y : ndarray of shape (n,)
        Finite values, ``x`` with at least two distinct values once trimmed.
    blockmax, divisor : int
        At most ``max(min(n // divisor, blockmax), 1)`` blocks for the pilot fits.
    trim : float
        Fraction of points dropped at each end in ``x``.
    proptrun : float
        Fraction of the grid left out at each end in ``theta_22``.
    gridsize : int
        Number of binning grid points.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, 200); y = np.sin(6 * x) + rng.normal(0, 0.3, 200)
    >>> 0.02 < dpill(x, y) < 0.2
    True
    """
    order = np.argsort(x, kind="stable")
    x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
    cut = math.floor(trim * x.size)
    x, y = x[cut:x.size - cut], y[cut:y.size - cut]
    n = x.size
    a, b = (float(x[0]), float(x[-1])) if n else (0.0, 0.0)
    nmax = max(min(n // divisor, blockmax), 1)
    if n < 5 * nmax + 1 or not b > a:
        raise NadarayaError(
            f"bandwidth='dpi' needs at least {5 * nmax + 1} points with distinct x after "
            f"trimming (quartic pilot fits); got {n} point(s) spanning {b - a:.3g}. Use more "
            "data or bandwidth='cv'."
        )
    xc, yc = _linear_bins(x, y, a, b, gridsize)
    sigma2_q, th24 = _block_estimates(x, y, _cp_blocks(x, y, nmax))
    if th24 == 0 or not sigma2_q > 0:
        raise NadarayaError(
            "bandwidth='dpi': the pilot quartic fits are exact or have no curvature, so the "
            "plug-in estimate is undefined; use bandwidth='cv'."
        )
    gamma = sigma2_q * (b - a) / (abs(th24) * n)
    gamma = ((3.0 if th24 < 0 else 15.0 / 2.0) * gamma / (8.0 * math.sqrt(math.pi))) ** (1 / 7)
    delta = (b - a) / (gridsize - 1)
    second = _local_poly(xc, yc, delta, gamma, 3, 2)
    low = math.floor(proptrun * gridsize)
    upp = gridsize - low
    th22 = float(np.sum(second[low:upp] ** 2 * xc[low:upp])) / n
    c3k = 0.5 + 2.0 * math.sqrt(2.0) - (4.0 / 3.0) * math.sqrt(3.0)
    c3k = (4.0 * c3k / math.sqrt(2.0 * math.pi)) ** (1 / 9)
    lam = c3k * (sigma2_q**2 * (b - a) / (th22 * n) ** 2) ** (1 / 9)
    fit = _local_poly(xc, yc, delta, lam, 1, 0)
    sdg, sstdg = _smoother_diagonals(xc, delta, lam)
    rss = float(y @ y) - 2.0 * float(fit @ yc) + float(fit**2 @ xc)
    dof = n - 2.0 * float(sdg @ xc) + float(sstdg @ xc)
    sigma2 = rss / dof
    return float((sigma2 * (b - a) / (2.0 * math.sqrt(math.pi) * th22 * n)) ** 0.2)


def dpi_bandwidth(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None, *, degree: int,
                  kernel: object, categorical: bool, analytic: bool) -> np.ndarray:
    """``bandwidth="dpi"`` of an estimator: :func:`dpill` on its training data, shape ``(1,)``.

    Only for one continuous feature, one output, a local linear fit and the
    Gaussian kernel (the setting the selector is derived for). Integer
    frequency weights are the rows repeated; other weights are refused.

    Parameters
    ----------
    X : ndarray of shape (n, 1)
    Y : ndarray of shape (n, 1)
    w : ndarray of shape (n,) or None
        The caller's sample weights (positive).
    degree : int
    kernel : object
        The estimator's ``kernel``.
    categorical : bool
        Whether the feature is categorical.
    analytic : bool
        Whether the weights are analytic (``weight_type="analytic"``).
    """
    if degree != 1 or X.shape[1] != 1 or categorical or Y.shape[1] != 1:
        raise NadarayaError(
            f"bandwidth='dpi' (Ruppert, Sheather and Wand's plug-in) is for a local linear fit "
            f"of one output on one continuous feature; got degree {degree}, "
            f"{X.shape[1]} feature(s){' (categorical)' if categorical else ''} and "
            f"{Y.shape[1]} output(s). Use LocalPolynomialRegressor(degree=1) on one feature, "
            "or bandwidth='cv'."
        )
    if not (isinstance(kernel, str) and kernel.lower() == "gaussian"):
        raise NadarayaError(
            f"bandwidth='dpi' is derived for the Gaussian kernel; got kernel={kernel!r}. "
            "Pass kernel='gaussian', or bandwidth='cv'."
        )
    x, y = X[:, 0], Y[:, 0]
    if w is not None:
        counts = np.rint(w)
        if analytic or not np.array_equal(counts, w) or counts.sum() > 1e8:
            raise NadarayaError(
                "bandwidth='dpi' takes sample weights only as integer frequencies (each row "
                "repeated that many times); got "
                f"{'analytic weights' if analytic else 'non-integer or huge weights'}. Use "
                "bandwidth='cv', or fit without sample_weight."
            )
        reps = counts.astype(np.int64)
        x, y = np.repeat(x, reps), np.repeat(y, reps)
    return np.array([dpill(x, y)])
