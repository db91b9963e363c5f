"""The iterations of steering kernel regression, shared by images and volumes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..kernels.quadratic import QuadraticKernel
from ._poly import local_fit

__all__ = ["steer"]


def steer(source: torch.Tensor, guide: torch.Tensor, fit: Any, *, iterations: int,
          field_of: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
          photometric: Any, offsets: torch.Tensor, order: int, ndim: int) -> torch.Tensor:
    """Refit ``source`` ``iterations`` times, each with the kernel steered by the last fit.

    Parameters
    ----------
    source, guide : torch.Tensor
        The values to fit, and the pilot the photometric term compares.
    fit : LocalFit
        The first (order-2) fit, whose gradient steers the first iteration. The
        caller passes it without keeping a reference, so that it is freed here.
    iterations : int
    field_of : callable
        ``gradient -> (position field, key log-weight)`` of the steering kernel.
    photometric : optional
        The photometric term of :class:`~nadaraya.kernels.quadratic.QuadraticKernel`.
    offsets : torch.Tensor
        The window's offsets.
    order : int
        Degree of the last fit (the others are of degree 2, for their gradient).
    ndim : int
        Spatial axes: 2 for images, 3 for volumes.

    Returns
    -------
    torch.Tensor
        The last fit's values.
    """
    for it in range(iterations):
        assert fit.gradient is not None
        field, log_weight = field_of(fit.gradient)
        del fit
        kernel = QuadraticKernel(None, photometric, position_field=field,
                                 key_log_weight=log_weight, ndim=ndim)
        del field, log_weight
        last = it == iterations - 1
        fit = local_fit(source, kernel, offsets, order if last else 2,
                        guide=None if photometric is None else guide)
        del kernel
        source = guide = fit.value
    return source
