"""Attention's kernel names, translated once into the kernel classes.

``kernel_attention(q, k, v, name, scale=s)`` and ``KernelAttention(kernel=name,
scale=s)`` keep ``scaled_dot_product_attention``'s convention: ``s`` is the
scale, ``1 / sqrt(E)`` by default for ``E`` features per head. Each name is a
kernel of this package with that scale (Tsai et al. 2019, *Transformer
Dissection*):

============  =====================================  ======================================
name          K(q, k)                                 kernel
============  =====================================  ======================================
softmax       exp(s q.k)                              ``ExpDot(scale=s)``
rbf           exp(-s ||q - k||^2 / 2)                 ``Gaussian(bandwidth=s ** -0.5)``
laplacian     exp(-sqrt(s) ||q - k||)                 ``Laplacian(bandwidth=s ** -0.5)``
cosine        exp(s cos(q, k)), s = sqrt(E) default   ``Exponential(Cosine(), beta=s)``
polynomial    (s q.k + c) ** degree                   ``Polynomial(scale=s)`` (degree 2)
linear        s q.k (signed)                          ``LinearKernel(scale=s)``
============  =====================================  ======================================

Without ``scale`` the radial kernels get ``bandwidth=None`` (``h = E ** 0.25``,
the scale ``1 / sqrt(E)``), not the statistician's default ``bandwidth=1.0``
of ``Gaussian()``; the linear kernel's scale cancels in the normalisation.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ._kernel import Kernel
from .dot import ExpDot, Polynomial
from .linear import LinearKernel
from .radial import Gaussian, Laplacian
from .similarity import Cosine, Exponential

__all__ = ["ATTENTION_NAMES", "get_attention_kernel"]

ATTENTION_NAMES = ("softmax", "rbf", "laplacian", "polynomial", "linear", "cosine")
_ALIASES = {"exp": "softmax", "exp-dot": "softmax", "expdot": "softmax",
            "exponential": "softmax", "gaussian": "rbf", "poly": "polynomial"}


def _bandwidth(scale: float | None) -> float | None:
    return None if scale is None else scale ** -0.5


def get_attention_kernel(kernel: str | Kernel, *, scale: float | None = None,
                         learnable: bool = False, heads: int | None = None) -> Kernel:
    """Turn an attention kernel name into a kernel (kernel objects pass through).

    Parameters
    ----------
    kernel : str or Kernel
        One of ``softmax``, ``rbf``, ``laplacian``, ``polynomial``, ``linear``,
        ``cosine`` (aliases ``exp``, ``gaussian``, ``poly``), or a kernel.
    scale : float, optional
        SDPA's scale ``s`` (see the table above); only with a name.
    learnable : bool, default False
        Train the scale (a factor ``softplus(raw_scale)``); only with a name.
    heads : int, optional
        With ``learnable``, one factor per head.

    Returns
    -------
    Kernel

    Examples
    --------
    >>> from nadaraya.kernels import get_attention_kernel
    >>> get_attention_kernel("rbf", scale=0.25)
    Gaussian(bandwidth=2.0)
    """
    if isinstance(kernel, Kernel):
        if scale is not None or learnable:
            raise NadarayaError(
                "scale/learnable were given together with a kernel object, which carries its "
                "own; build the object with them, e.g. Gaussian(0.5, learnable=True)."
            )
        return kernel
    if scale is not None and (isinstance(scale, bool | torch.Tensor) or not (
            isinstance(scale, int | float) and math.isfinite(scale) and scale > 0)):
        raise NadarayaError(
            f"scale must be a positive finite number; got {scale!r}. For a trainable scale "
            "pass learnable=True (it is stored behind a positive transform)."
        )
    if isinstance(kernel, str):
        name = _ALIASES.get(kernel.lower(), kernel.lower())
        kw: dict[str, Any] = {"learnable": learnable, "heads": heads}
        if name == "softmax":
            return ExpDot(scale, **kw)
        if name == "rbf":
            return Gaussian(_bandwidth(scale), **kw)
        if name == "laplacian":
            return Laplacian(_bandwidth(scale), **kw)
        if name == "cosine":
            return Exponential(Cosine(), scale, **kw)
        if name == "polynomial":
            return Polynomial(scale=scale, **kw)
        if name == "linear":
            return LinearKernel(scale=scale, **kw)
        raise NadarayaError(
            f"kernel {kernel!r} is not known; use one of {', '.join(ATTENTION_NAMES)} "
            "or a nadaraya.kernels.Kernel object."
        )
    hint = (" A tensor here is probably a mask: pass it as mask= or attn_mask= (the fourth "
            "argument is the kernel)." if isinstance(kernel, torch.Tensor) else "")
    raise NadarayaError(
        f"kernel must be a name or a nadaraya.kernels.Kernel; got {type(kernel).__name__}.{hint}"
    )
