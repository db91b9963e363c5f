"""Any kernel of the Gaussian family, read as the quadratic form the grid engine computes.

The grid engine filters with ``K(t_i, t_j) = exp(-(t_i - t_j)^T Q (t_i - t_j))`` over
``t = [position; channels]`` (:class:`~nadaraya.kernels.quadratic.QuadraticKernel`). A
Gaussian on some of those columns, with a bandwidth per column or a metric ``L``,
is that form with ``Q = L^T L / 2``; a product of Gaussians on column groups adds
their forms. :func:`quadratic_form` reads ``Q`` from the kernel's own scores (by
polarization: ``s(e_i, 0) = -Q_ii``, ``s(e_i + e_j, 0) = -(Q_ii + Q_jj + 2 Q_ij)``)
and checks at random points that the scores are that form, so every kernel object
whose scores are a quadratic form of the difference is accepted (a learned
bandwidth included, at its current value), and any other is refused by name.
"""

from __future__ import annotations

import torch

from .._errors import NadarayaError
from ..kernels import Kernel
from ..kernels.quadratic import QuadraticKernel

__all__ = ["quadratic_form"]

# How far (relative to the largest score of the check) the kernel's scores may be
# from the quadratic form read off them: rounding of float64 scores, with a margin.
_FORM_TOLERANCE = 1e-9


def _scores(kernel: Kernel, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The kernel's scores of each query against the key in the same row, ``(m,)``."""
    with torch.no_grad():  # a few dozen rows at most: the whole block, then its diagonal
        return torch.diagonal(kernel.score(queries, keys))


def _matrix(kernel: Kernel, width: int) -> torch.Tensor:
    """``Q`` ``(width, width)`` with ``s(t, t') = -(t - t')^T Q (t - t')``, if it is one."""
    eye = torch.eye(width, dtype=torch.float64)
    zero = torch.zeros(1, width, dtype=torch.float64)
    diag = -_scores(kernel, eye, zero.expand(width, -1))
    q = torch.diag(diag)
    pairs = [(i, j) for i in range(width) for j in range(i + 1, width)]
    if pairs:
        points = torch.stack([eye[i] + eye[j] for i, j in pairs])
        both = -_scores(kernel, points, zero.expand(len(pairs), -1))
        for (i, j), s in zip(pairs, both, strict=True):
            q[i, j] = q[j, i] = (s - diag[i] - diag[j]) / 2
    return q


def _check_form(kernel: Kernel, q: torch.Tensor) -> None:
    """Refuse a kernel whose scores are not ``-(t - t')^T Q (t - t')``."""
    width = q.shape[0]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(8, width, generator=gen, dtype=torch.float64)
    b = torch.randn(8, width, generator=gen, dtype=torch.float64) * 3.0
    got = _scores(kernel, a, b)
    d = a - b
    want = -torch.einsum("ni,ij,nj->n", d, q, d)
    scale = float(want.abs().max()) + float(q.abs().max()) + 1e-300
    same = _scores(kernel, a, a)
    if (not bool(torch.isfinite(got).all()) or float((got - want).abs().max()) > _FORM_TOLERANCE
            * scale or float(same.abs().max()) > _FORM_TOLERANCE * scale
            or bool((torch.linalg.eigvalsh(q) < -_FORM_TOLERANCE * scale).any())):
        raise NadarayaError(
            f"kernel {kernel!r} is not a Gaussian quadratic form exp(-dt^T Q dt) of "
            "t = [row, column, channels...], which the image filters compute on the grid. "
            "Use Gaussian kernels on column groups (e.g. Gaussian(2.0).on([0, 1]) * "
            "Gaussian(0.1).on([2]) for a gray bilateral filter), or nadaraya.smooth on "
            "explicit vectors t for other kernels."
        )


def quadratic_form(kernel: Kernel | QuadraticKernel, channels: int,
                   ndim: int = 2) -> QuadraticKernel:
    """The grid engine's kernel for ``kernel`` on ``t = [position (ndim); channels]``.

    Parameters
    ----------
    kernel : Kernel
        A :class:`~nadaraya.kernels.quadratic.QuadraticKernel` (returned as it
        is), or a kernel whose scores are ``-(t - t')^T Q (t - t')``: a
        Gaussian (bandwidth per column or metric), or a product of Gaussians
        on column groups (``.on(columns)``).
    channels : int
        The image's channels (columns ``ndim`` to ``ndim + channels - 1``).
    ndim : int, default 2
        The position's coordinates (row, column).

    Returns
    -------
    QuadraticKernel
        With ``Q_x`` the position block and ``Q_value`` the channels' block.

    Raises
    ------
    NadarayaError
        If the kernel's scores are not such a form, or if the form couples a
        position column with a channel column (the grid engine keeps them
        apart: ``Q = blockdiag(Q_x, Q_value)``).
    """
    if isinstance(kernel, QuadraticKernel):
        return kernel
    if not isinstance(kernel, Kernel):
        raise NadarayaError(
            f"kernel must be a nadaraya.kernels.Kernel; got {type(kernel).__name__}. Build "
            "one, e.g. Gaussian(2.0).on([0, 1]) * Gaussian(0.1).on([2])."
        )
    width = ndim + channels
    try:
        q = _matrix(kernel, width)
    except (NadarayaError, IndexError, RuntimeError) as err:
        raise NadarayaError(
            f"kernel {kernel!r} cannot score t = [row, column, {channels} channel(s)] "
            f"({width} columns): {str(err).rstrip('.')}. Its columns (.on(...)) must lie "
            "within them."
        ) from None
    _check_form(kernel, q)
    cross = q[:ndim, ndim:]
    if bool((cross.abs() > _FORM_TOLERANCE * (float(q.abs().max()) + 1e-300)).any()):
        raise NadarayaError(
            f"kernel {kernel!r} couples position and channel columns (a metric across both); "
            "the image filters need Q = blockdiag(Q_position, Q_channels): give the position "
            "and the channels kernels of their own, multiplied."
        )
    value = q[ndim:, ndim:]
    return QuadraticKernel(position=q[:ndim, :ndim],
                           value=value if bool(value.any()) else None, ndim=ndim)
