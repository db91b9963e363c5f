"""Linear regression, Nadaraya-Watson and attention as one form ``X M X^T``.

Seed 003 colour-codes ``Y_hat = X S^-1 X^T Y`` (linear regression, ``S =
X^T X`` of centred ``X``) against ``softmax(X W_q W_k^T X^T / sqrt(d_k)) V``
(self-attention). Each is a smoother whose weight matrix is the smoothing of
the identity matrix; :func:`weight_matrices` computes the three with the
engine and :func:`plot_weight_matrices` draws them side by side.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import NadarayaError
from ..engine import smooth
from ..kernels import Gaussian
from ..kernels.linear import LinearKernel
from ..kernels.similarity import Exponential

__all__ = ["plot_weight_matrices", "weight_matrices"]


def weight_matrices(
    X: Any,
    *,
    bandwidth: float | None = None,
    W_q: Any = None,
    W_k: Any = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """The ``(n, n)`` weight matrices of three smoothers of the rows of ``X``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        One data set (centred here: the seed's zero-mean assumption).
    bandwidth : float, optional
        Of the Gaussian; Scott's rule ``n^(-1 / (d + 4))`` times the mean
        feature standard deviation by default.
    W_q, W_k : array-like of shape (n_features, d_k), optional
        Attention's projections; standard normal ``/ sqrt(n_features)`` with
        ``d_k = n_features`` by default (seeded).
    seed : int, default 0
        Seed of the default projections.

    Returns
    -------
    dict of str to ndarray of shape (n_samples, n_samples)
        ``"linear regression"``: ``X S^-1 X^T`` (signed; rows of the hat
        matrix), ``"Nadaraya-Watson"``: the Gaussian smoother, ``"attention"``:
        ``softmax(X W_q W_k^T X^T / sqrt(d_k))``. Row ``i`` holds the weights
        of every training point in the prediction at ``x_i``.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise NadarayaError(f"X must be 2-D with at least 2 rows; got shape {X.shape}.")
    n, d = X.shape
    Xc = X - X.mean(axis=0)
    eye = np.eye(n)
    rng = np.random.default_rng(seed)
    if W_q is None:
        W_q = rng.standard_normal((d, d)) / math.sqrt(d)
    if W_k is None:
        W_k = rng.standard_normal((d, np.shape(W_q)[1])) / math.sqrt(d)
    W_q, W_k = np.asarray(W_q, float), np.asarray(W_k, float)
    if W_q.shape[0] != d or W_k.shape != W_q.shape:
        raise NadarayaError(
            f"W_q and W_k must both have shape ({d}, d_k); got {W_q.shape} and {W_k.shape}."
        )
    if bandwidth is None:
        bandwidth = float(Xc.std(axis=0).mean()) * n ** (-1.0 / (d + 4))
    M = W_q @ W_k.T / math.sqrt(W_q.shape[1])
    return {
        "linear regression": smooth(Xc, Xc, eye, LinearKernel("whitened"), normalize=False),
        "Nadaraya-Watson": smooth(Xc, Xc, eye, Gaussian(bandwidth)),
        "attention": smooth(Xc, Xc, eye, Exponential(LinearKernel(M), 1.0)),
    }


def plot_weight_matrices(X: Any, *, axes: Any = None, **kwargs: Any) -> Any:
    """Draw :func:`weight_matrices` as three heatmaps, one colour scale each.

    Signed matrices use a diverging map centred on zero; each scale is clipped
    at the 99th percentile of ``|W|`` so that a few isolated points do not hide
    the structure.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The data set; order its rows (e.g. by class) to make structure visible.
    axes : sequence of three matplotlib Axes, optional
        Where to draw; a new figure by default.
    **kwargs
        Passed to :func:`weight_matrices`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a dependency
        raise NadarayaError("plot_weight_matrices needs matplotlib: pip install matplotlib") \
            from exc
    mats = weight_matrices(X, **kwargs)
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    else:
        fig = axes[0].figure
    titles = {
        "linear regression": r"linear regression  $X\,S^{-1}X^\top$",
        "Nadaraya-Watson": r"Gaussian Nadaraya-Watson  $K_h(x_i, x_j) / \sum_k K_h(x_i, x_k)$",
        "attention": r"attention  softmax$(X\,W_qW_k^\top X^\top/\sqrt{d_k})$",
    }
    for ax, (name, W) in zip(axes, mats.items(), strict=True):
        signed = bool((W < 0).any())
        top = float(np.percentile(np.abs(W), 99)) or float(np.abs(W).max()) or 1.0
        im = ax.imshow(W, cmap="RdBu_r" if signed else "viridis",
                       vmin=-top if signed else 0.0, vmax=top, interpolation="nearest")
        ax.set_title(titles[name], fontsize=10)
        ax.set_xlabel("training point j")
        ax.set_ylabel("query point i")
        fig.colorbar(im, ax=ax, shrink=0.8, extend="both" if signed else "max")
    return fig
