"""Steering kernel regression on 3-D volumes (microscopy stacks, MRI).

The 2-D method of :mod:`nadaraya.image.steering` with three position axes.
The structure tensor of the gradients ``g = (d/dz, d/drow, d/dcol)`` summed
over a cubic window of ``M`` voxels is ``G^T G = V diag(s1^2, s2^2, s3^2)
V^T`` (a batched ``torch.linalg.eigh`` of one 3 x 3 matrix per voxel), and
the steering matrix is the 3-D form of Takeda, Milanfar, Protter and Elad
(2009), which reduces to the 2-D one of Takeda, Farsiu and Milanfar (2007)
with two axes:

    elongation  theta_i = (s_i + lambda') / (sqrt(s_j s_k) + lambda')     ({i, j, k} = {1, 2, 3})
    scaling     gamma   = ((s1 s2 s3 + lambda'') / M)^alpha
    C = gamma sum_i theta_i v_i v_i^T

The grid engine takes ``Q_x = C_j / (2 h^2)`` as a per-key 3 x 3 field with
the log-weight ``log sqrt(det C_j)``, and the whole pipeline (pilot, first
second-order fit, steering matrices, steering fits) runs block by block over
the volume, each block read with the sum of the stages' reaches as halo
(:func:`nadaraya.engine.grid.run_blocks` with three axes): the working-memory
budget bounds the temporaries and the result is the uncut one. Gradients are
measured on the 0-255 scale (bounded by the data range), so ``C`` is formed
in float64 without rescaling and every block computes the same bits.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import Block, pad, run_blocks, window_offsets
from ..kernels.quadratic import classic_kernel, gaussian_patch, nlm_kernel
from ._layout import VolumeImage
from ._poly import fit_numbers, local_fit
from ._progress import tracked
from ._steer import steer
from .regression import default_radius

__all__ = ["skr_volume", "steering_field_3d", "steering_matrices_3d"]

# Float64 numbers per voxel of a region that the steering matrices' computation holds
# (gradient products, the 3 x 3 tensors, eigenvalues and eigenvectors, logarithms).
_STRUCTURE = 40
# The non-local means pilot of a volume: a 3 x 3 x 3 patch over a search radius of 2 (the
# 2-D recipe's 7 x 7 patch and radius 7 would compare 3375 patches per voxel).
_PILOT_PATCH, _PILOT_RADIUS = 3, 2


def _box_sum3(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Sum over the ``(2 radius + 1)^3`` window of each voxel of ``x`` ``(..., D, H, W)``,
    the border mirrored; the same additions in the same order at every voxel."""
    if radius == 0:
        return x.clone()
    p = pad(x, (radius, radius, radius), "reflect")
    for axis in (-3, -2, -1):
        n = p.shape[axis] - 2 * radius
        acc = p.narrow(axis, 0, n).clone()
        for u in range(1, 2 * radius + 1):
            acc.add_(p.narrow(axis, u, n))
        p = acc
    return p


def _eigen(gradient: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues ``s_i^2`` ``(D, H, W, 3)`` and eigenvectors ``(D, H, W, 3, 3)`` (in
    columns) of the windowed structure tensor of ``gradient`` ``(3, c, D, H, W)``."""
    g = gradient.to(torch.float64)
    tensor = torch.empty(*g.shape[2:], 3, 3, dtype=torch.float64, device=g.device)
    for a in range(3):
        for b in range(a, 3):
            tensor[..., a, b] = _box_sum3((g[a] * g[b]).sum(0), window)
            if b != a:
                tensor[..., b, a] = tensor[..., a, b]
    del g
    values, vectors = torch.linalg.eigh(tensor)
    return values.clamp_(min=0.0), vectors


def _log_eigenvalues(s2: torch.Tensor, m: float, lambda_elongation: float,
                     lambda_scale: float, alpha: float) -> torch.Tensor:
    """``log(gamma theta_i)``, ``(..., 3)``, from the eigenvalues ``s_i^2`` ``(..., 3)``."""
    s = s2.sqrt()
    lam = lambda_elongation
    others = torch.stack([s[..., 1] * s[..., 2], s[..., 0] * s[..., 2],
                          s[..., 0] * s[..., 1]], -1).sqrt_()
    log_theta = torch.log(s + lam) - torch.log(others + lam)
    log_theta.nan_to_num_(nan=0.0)  # lambda' = inf, or s = lambda' = 0: round
    log_gamma = alpha * (torch.log(s.prod(-1) + lambda_scale) - math.log(m))
    return log_theta.add_(log_gamma[..., None])


def steering_matrices_3d(gradient: torch.Tensor, window: int = 1, *,
                         lambda_elongation: float = 1.0, lambda_scale: float = 0.01,
                         alpha: float = 0.5) -> torch.Tensor:
    """The 3-D steering matrices ``C`` from gradients, shape ``(D, H, W, 3, 3)``.

    Parameters
    ----------
    gradient : torch.Tensor of shape (3, D, H, W) or (3, channels, D, H, W)
        ``d/d depth``, ``d/d row`` and ``d/d column``; channels are pooled.
    window : int, default 1
        Radius of the cubic window of gradients (``M = (2 window + 1)^3`` voxels
        times the channels).
    lambda_elongation, lambda_scale, alpha : float
        ``lambda'``, ``lambda''`` and the structure sensitivity, as in
        :func:`~nadaraya.image.steering.steering_matrices`.

    Returns
    -------
    torch.Tensor of shape (D, H, W, 3, 3), float64
        Symmetric positive definite, ``det C = gamma^3 prod theta_i``.

    Examples
    --------
    >>> import torch
    >>> g = torch.zeros(3, 4, 5, 6, dtype=torch.float64)
    >>> g[2] = 10.0  # a ramp along the columns: narrow across it, long along it
    >>> c = steering_matrices_3d(g)[2, 2, 3]
    >>> bool(c[2, 2] > c[0, 0]), bool(torch.allclose(c[0, 0], c[1, 1]))
    (True, True)
    """
    if gradient.ndim == 4:
        gradient = gradient[:, None]
    values, vectors = _eigen(gradient, window)
    m = float((2 * window + 1) ** 3 * gradient.shape[1])
    logs = _log_eigenvalues(values, m, lambda_elongation, lambda_scale, alpha)
    return (vectors * logs.exp()[..., None, :]) @ vectors.mT


def steering_field_3d(gradient: torch.Tensor, h: float, window: int = 1, *,
                      lambda_elongation: float = 1.0, lambda_scale: float = 0.01,
                      alpha: float = 0.5, dtype: torch.dtype = torch.float64
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``Q_x = C / (2 h^2)`` per key, ``(D, H, W, 3, 3)``, and ``log sqrt(det C)``,
    ``(D, H, W)``, float64; the eigenvalues of ``C`` capped at ``sqrt`` of the
    largest number of ``dtype`` (as in 2-D)."""
    if gradient.ndim == 4:
        gradient = gradient[:, None]
    values, vectors = _eigen(gradient, window)
    m = float((2 * window + 1) ** 3 * gradient.shape[1])
    logs = _log_eigenvalues(values, m, lambda_elongation, lambda_scale, alpha)
    del values
    logs.clamp_(max=0.5 * math.log(torch.finfo(dtype).max))
    log_weight = 0.5 * logs.sum(-1)
    scale = logs.exp_().mul_(1.0 / (2.0 * h * h))
    return (vectors * scale[..., None, :]) @ vectors.mT, log_weight


def _numbers(channels: int) -> int:
    """Temporary numbers per voxel of a block's region at the pipeline's peak: the pilot,
    the gradients, the field and its log-weight (10 float64 numbers) beside the steering
    fit's arrays or beside the field's computation."""
    kept = 4 * channels + 20
    return kept + max(fit_numbers(channels, 2, 20, ndim=3), 2 * _STRUCTURE)


def skr_volume(vol: VolumeImage, *, h: float, iterations: int, sigma: float | None,
               order: int, radius: int, window: int, structure: dict[str, float],
               initial_h: float, pilot: Any, photometric: float | None,
               to255: float) -> Any:
    """Steering kernel regression of a checked volume ``(c, D, H, W)`` (see
    :func:`~nadaraya.image.steering_kernel_regression`); the volume's shape, dtype
    and range.

    ``pilot``: ``"image"``, ``"nlm"`` (non-local means with a 3 x 3 x 3 patch over
    a search radius of 2, ``h = 0.75 sigma``, noise ``1.15 sigma``) or a checked
    tensor of the volume's shape ``(c, D, H, W)``; ``structure``: ``lambda_elongation``,
    ``lambda_scale`` and ``alpha``; ``photometric``: ``1 / (2 range_sigma^2)`` or None.
    """
    data = vol.data
    device = data.device
    given = pilot if isinstance(pilot, torch.Tensor) else None
    if given is not None and tuple(given.shape) != tuple(data.shape):
        raise NadarayaError(f"pilot must have the volume's shape {tuple(data.shape)} "
                            f"(channels, depth, height, width); got {tuple(given.shape)}.")
    pilot_halo = 0
    if isinstance(pilot, str) and pilot == "nlm":
        assert sigma is not None
        kernel_nlm = nlm_kernel(0.75 * sigma, gaussian_patch(_PILOT_PATCH, 3), vol.channels,
                                sigma=1.15 * sigma)
        search = window_offsets(_PILOT_RADIUS, 3, device=device)
        pilot_halo = _PILOT_RADIUS + _PILOT_PATCH // 2
    shape = tuple(int(n) for n in data.shape[1:])
    first = window_offsets(default_radius(initial_h, shape), 3, device=device)
    offsets = window_offsets(radius, 3, device=device)

    def region(block: Block) -> torch.Tensor:
        from .nlm import filter_region

        source = block.read(data)
        if given is not None:
            guide = block.read(given)
        elif isinstance(pilot, str) and pilot == "nlm":
            guide = filter_region(source, kernel_nlm, search, "reflect")
        else:
            guide = source
        return steer(source, guide, local_fit(guide, classic_kernel(initial_h, 3), first, 2),
                     iterations=iterations, photometric=photometric, offsets=offsets,
                     order=order, ndim=3,
                     field_of=lambda g: steering_field_3d(g * to255, h, window,
                                                          dtype=data.dtype, **structure))

    halo = pilot_halo + int(first.abs().max()) + iterations * (window + radius)
    per_pixel = data.element_size() * _numbers(data.shape[0])
    return vol.back(run_blocks(tracked(region), torch.empty_like(data), halo, per_pixel,
                               ndim=3))
