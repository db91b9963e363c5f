"""Kernels, written as scores ``s(q, k) = log K(q, k)``.

Accepted by name in :func:`nadaraya.smooth`: ``"gaussian"``, ``"laplacian"``,
``"matern32"``, ``"matern52"``, ``"epanechnikov"``, ``"tricube"``, ``"uniform"``,
``"cauchy"``, ``"softmax"``,
and the signed ``"linear"`` (``q^T M k``, summed in the weight domain).
The derivatives of the Gaussian density (:class:`GaussianDerivative`,
:class:`GaussianLaplacian`) are signed kernels for density functionals.
Kernels on different feature columns multiply into one kernel (``k1 * k2``),
continuous and categorical alike (:mod:`.discrete`: Aitchison-Aitken, Li-Racine,
Wang-van Ryzin).

One class per formula serves every face: each kernel is a
:class:`torch.nn.Module` (its scale can train, ``learnable=True``), follows
scikit-learn's ``get_params``/``set_params`` (so ``GridSearchCV`` tunes
``kernel__bandwidth``), binds 2-D points for :func:`nadaraya.smooth` and
prepares batched ``(..., L, E)`` points for attention
(:class:`PreparedKernel`). Attention's names (``"rbf"``, ``"softmax"``...)
with SDPA's ``scale`` are translated by :func:`get_attention_kernel`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._errors import NadarayaError
from ._attention import ATTENTION_NAMES, get_attention_kernel
from ._bound import BoundKernel
from ._composite import ProductKernel, SumKernel
from ._kernel import Kernel
from ._prepared import PreparedKernel
from .custom import CallableKernel
from .derivative import GaussianDerivative, GaussianLaplacian
from .discrete import AitchisonAitken, DiscreteKernel, LiRacine, LiRacineOrdered, WangVanRyzin
from .dot import ExpDot, Polynomial
from .linear import LinearKernel, SignedKernel
from .quadratic import QuadraticKernel
from .radial import (
    Cauchy,
    Epanechnikov,
    Gaussian,
    Laplacian,
    Matern32,
    Matern52,
    RadialKernel,
    Tricube,
    Uniform,
)
from .similarity import Cosine, Exponential

__all__ = [
    "ATTENTION_NAMES",
    "AitchisonAitken",
    "BoundKernel",
    "CallableKernel",
    "Cauchy",
    "Cosine",
    "DiscreteKernel",
    "Epanechnikov",
    "ExpDot",
    "Exponential",
    "Gaussian",
    "GaussianDerivative",
    "GaussianLaplacian",
    "Kernel",
    "Laplacian",
    "LiRacine",
    "LiRacineOrdered",
    "LinearKernel",
    "Matern32",
    "Matern52",
    "Polynomial",
    "PreparedKernel",
    "ProductKernel",
    "QuadraticKernel",
    "RadialKernel",
    "SignedKernel",
    "SumKernel",
    "Tricube",
    "Uniform",
    "WangVanRyzin",
    "get_attention_kernel",
    "get_kernel",
]

RADIAL: dict[str, type[RadialKernel]] = {
    "gaussian": Gaussian,
    "laplacian": Laplacian,
    "matern32": Matern32,
    "matern52": Matern52,
    "epanechnikov": Epanechnikov,
    "tricube": Tricube,
    "uniform": Uniform,
    "cauchy": Cauchy,
}
NAMES = (*RADIAL, "softmax", "linear")


def get_kernel(kernel: str | Kernel | Callable[..., Any], bandwidth: Any = None) -> Kernel:
    """Turn a name, kernel object or score function into a :class:`Kernel`.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A name from ``NAMES``, a kernel object, or ``fn(q, k) -> log K``.
    bandwidth : float, array or torch.Tensor, optional
        For a named radial kernel: the bandwidth (a scalar, one per feature)
        or, given as a 2-D matrix, the metric ``L``. Must be None for a kernel
        object (which carries its own) and for ``"softmax"``.

    Returns
    -------
    Kernel
    """
    if isinstance(kernel, Kernel):
        if bandwidth is not None:
            raise NadarayaError(
                "bandwidth was given together with a kernel object; the object carries its "
                "own bandwidth. Build it with the bandwidth, e.g. Gaussian(0.3)."
            )
        return kernel
    if isinstance(kernel, str):
        name = kernel.lower()
        if name in RADIAL:
            if bandwidth is None:
                bandwidth = 1.0
            if hasattr(bandwidth, "ndim") and bandwidth.ndim == 2:
                return RADIAL[name](None, metric=bandwidth)
            return RADIAL[name](bandwidth)
        if name in ("softmax", "exp-dot", "expdot"):
            if bandwidth is not None:
                raise NadarayaError(
                    "the softmax kernel takes no bandwidth; pass ExpDot(scale=...) to set "
                    "its scale (1/sqrt(d) by default)."
                )
            return ExpDot()
        if name == "linear":
            if bandwidth is not None:
                raise NadarayaError(
                    "the linear kernel takes no bandwidth; pass LinearKernel(metric=M) for "
                    "q^T M k (M = 'identity', 'whitened' or a matrix)."
                )
            return LinearKernel()
        raise NadarayaError(
            f"kernel {kernel!r} is not known; use one of {', '.join(NAMES)}, "
            "a nadaraya.kernels.Kernel, or a function fn(q, k) -> log-weights."
        )
    if callable(kernel):
        if bandwidth is not None:
            raise NadarayaError("bandwidth cannot be used with a kernel function; "
                                "scale the inputs inside the function instead.")
        return CallableKernel(kernel)
    raise NadarayaError(
        f"kernel must be a name, a Kernel or a callable; got {type(kernel).__name__}."
    )
