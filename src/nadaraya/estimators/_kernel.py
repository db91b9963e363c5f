"""The kernel an estimator hands to the engine, for one bandwidth.

Estimators speak of a kernel name and a bandwidth per feature; the engine
takes a kernel (name or object) and a bandwidth. :class:`KernelSpec` is the
bridge. It also gives what the estimators need beyond the smoothed values:
each point's own log-weight ``log K(x_i, x_i)`` (for the leave-one-out
algebra) and the squared kernel ``K^2`` (for the variance of a fit).

An infinite bandwidth for a feature means the kernel ignores that feature
(the feature is "smoothed out"); every feature infinite gives the constant
kernel, so Nadaraya-Watson becomes the weighted mean and local-linear
becomes global least squares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ..kernels import RADIAL, CallableKernel, Kernel, get_kernel

__all__ = ["KernelSpec", "is_named_radial", "make_spec", "self_scores"]


def is_named_radial(kernel: Any) -> bool:
    """Whether ``kernel`` is the name of a radial kernel (one that takes a bandwidth)."""
    return isinstance(kernel, str) and kernel.lower() in RADIAL


@dataclass
class KernelSpec:
    """What :func:`nadaraya.smooth` receives as ``kernel`` and ``bandwidth``.

    Attributes
    ----------
    kernel : str, Kernel or callable
        Passed as ``kernel``.
    bandwidth : ndarray of shape (n_features,) or None
        Passed as ``bandwidth`` (None for kernel objects).
    radial : bool
        Whether ``log K(x, x) = 0`` for every point (true for radial kernels).
    """

    kernel: Any
    bandwidth: np.ndarray | None
    radial: bool

    def self_scores(self, X: np.ndarray) -> np.ndarray:
        """``log K(x_i, x_i)`` for every row of ``X``, shape ``(n,)``."""
        if self.radial:
            return np.zeros(X.shape[0])
        return self_scores(get_kernel(self.kernel, self.bandwidth), X)

    def squared(self) -> KernelSpec:
        """The kernel ``K^2`` (log-weights doubled).

        The Gaussian and Laplacian stay in their family (bandwidth ``h / sqrt 2``
        and ``h / 2``), the uniform kernel is its own square; any other kernel
        becomes a kernel function returning twice its scores.
        """
        if isinstance(self.kernel, str):
            factor = _SQUARE_SCALE.get(self.kernel)
            if factor is not None:
                return KernelSpec(self.kernel, self.bandwidth * factor, self.radial)
        kern = get_kernel(self.kernel, self.bandwidth)

        def doubled(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            return 2.0 * kern.score(q, k)

        return KernelSpec(CallableKernel(doubled), None, self.radial)


# K(r)^2 = K(r / c) for these profiles: exp(-r^2/2)^2, exp(-r)^2, and the box
_SQUARE_SCALE = {"gaussian": 2.0**-0.5, "laplacian": 0.5, "uniform": 1.0}


def make_spec(kernel: Any, bandwidth: np.ndarray | None, n_features: int,
              mixed: Any = None) -> KernelSpec:
    """Build the spec for a kernel name and a per-feature bandwidth.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A radial kernel name takes ``bandwidth``; anything else must come with
        ``bandwidth=None``.
    bandwidth : ndarray of shape (n_features,) or None
        Positive; ``inf`` drops a feature from the kernel.
    n_features : int
    mixed : MixedTypes or None
        The features' types (:mod:`._mixed`): then ``bandwidth`` holds ``h`` for
        the continuous features and ``lambda`` for the categorical ones, and
        the kernel is their product.
    """
    if mixed is not None:
        return mixed.kernel_spec(kernel.lower(), bandwidth)
    if not is_named_radial(kernel):
        if bandwidth is not None:
            raise NadarayaError(
                f"bandwidth applies to a radial kernel given by name; got kernel={kernel!r} "
                "with a bandwidth. Put the bandwidth in the kernel object (e.g. "
                "Gaussian(0.3)) and pass bandwidth=None."
            )
        return KernelSpec(kernel, None, False)
    name = kernel.lower()
    h = np.broadcast_to(np.asarray(1.0 if bandwidth is None else bandwidth, float),
                        (n_features,)).copy()
    finite = np.isfinite(h)
    if finite.all():
        return KernelSpec(name, h, True)
    cols = [int(i) for i in np.flatnonzero(finite)]
    if not cols:
        # every feature smoothed out: the constant kernel, whatever the profile
        return KernelSpec(RADIAL["gaussian"](1.0).on([]), None, True)
    return KernelSpec(RADIAL[name](h[finite]).on(cols), None, True)


def check_kernel(kernel: Any) -> None:
    """Raise a clear error for a kernel argument the engine would refuse."""
    if isinstance(kernel, Kernel) or callable(kernel):
        return
    if isinstance(kernel, str):
        get_kernel(kernel, None if not is_named_radial(kernel) else 1.0)
        return
    raise NadarayaError(
        f"kernel must be a name, a nadaraya.kernels.Kernel or a callable; "
        f"got {type(kernel).__name__}."
    )


def self_scores(kernel: Kernel, X: np.ndarray) -> np.ndarray:
    """``log K(x_i, x_i)`` of ``kernel`` for every row of ``X``, shape ``(n,)``.

    The kernel's pair scores where it has them, else the diagonals of blocks
    of 256 rows.
    """
    t = torch.as_tensor(X, dtype=torch.float64)
    bound = kernel.bind(t, t)
    idx = torch.arange(X.shape[0])
    pairs = bound.pairs(idx, idx[:, None])
    if pairs is not None:
        return pairs[:, 0].detach().numpy().astype(float)
    out = np.empty(X.shape[0])
    step = 256
    for start in range(0, X.shape[0], step):
        rows = slice(start, min(start + step, X.shape[0]))
        out[rows] = torch.diagonal(bound.score(rows, rows)).detach().numpy()
    return out
