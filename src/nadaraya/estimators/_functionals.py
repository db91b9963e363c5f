"""Density functionals: double sums of a signed kernel over the sample, through the engine.

The plug-in bandwidth selectors estimate integrals of products of density
derivatives by

    sum_kl w_k w_l K(x_k, x_l),

``K`` a derivative of the Gaussian density (:mod:`nadaraya.kernels.derivative`).
That is ``w @ nadaraya.smooth(X, X, w, K, normalize=False)``: the engine sums
each row in the weight domain, in blocks (bounded memory).
"""

from __future__ import annotations

import numpy as np

from ..engine import smooth
from ..kernels import Kernel

__all__ = ["pair_sum"]


def pair_sum(X: np.ndarray, w: np.ndarray, kernel: Kernel) -> float:
    """``sum_kl w_k w_l K(x_k, x_l)`` over all ordered pairs (``k = l`` included).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    w : ndarray of shape (n_samples,)
        Frequency weights.
    kernel : Kernel
        A signed kernel such as :class:`~nadaraya.kernels.GaussianDerivative`.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import GaussianDerivative
    >>> X = np.zeros((3, 1)); w = np.ones(3)
    >>> round(pair_sum(X, w, GaussianDerivative(0, 1.0)) * (2 * np.pi) ** 0.5, 12)
    9.0
    """
    rows = smooth(X, X, w, kernel, normalize=False)
    return float(w @ rows)
