"""Estimate groups of similar patches and average the overlapping estimates.

The block-matching denoisers (non-local Bayes, and the collaborative hard
thresholding of its pilot) share one frame: reference patches on a grid of
step ``step``, each grouped with its ``k`` nearest patches within a search
window (:func:`nadaraya.engine.grid.nearest_patches`, the k-nearest mask
over patch vectors), every patch of every group estimated from its group,
and each pixel's estimate the weighted mean of the estimates of the patches
that cover it. :func:`aggregate_groups` runs that frame; the estimator of a
group is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._config import block_elements
from ..engine.grid import nearest_patches

__all__ = ["GroupEstimate", "aggregate_groups", "reference_starts"]

# Buffers per number of a chunk: per reference patch, its candidates' values (as the patch
# search holds them) or its group's (indices, patches, estimates), whichever is larger.
_GROUP_BUFFERS = 6

#: ``estimate(group, guide)``: the groups' noisy patches and the guide's, both
#: ``(m, k, c, n)``, to the estimates ``(m, k, c, n)`` and the weight of each group
#: ``(m,)`` (or None: every group counts the same).
GroupEstimate = Callable[[torch.Tensor, torch.Tensor],
                         tuple[torch.Tensor, torch.Tensor | None]]


def reference_starts(size: int, patch: int, step: int) -> torch.Tensor:
    """Reference top-left coordinates along one axis: every ``step``-th, and the last."""
    last = size - patch
    out = list(range(0, last + 1, step))
    if out[-1] != last:
        out.append(last)
    return torch.tensor(out, dtype=torch.long)


def aggregate_groups(noisy: torch.Tensor, guide: torch.Tensor, estimate: GroupEstimate, *,
                     patch_size: int, search_radius: int, k: int, step: int,
                     per_group: int = 0) -> torch.Tensor:
    """Group, estimate and aggregate the patches of ``noisy`` ``(c, H, W)``.

    Parameters
    ----------
    noisy : torch.Tensor of shape (channels, height, width)
        The image whose patches are estimated.
    guide : torch.Tensor of shape (channels, height, width)
        The image the groups are searched on (``noisy`` itself, or a pilot).
    estimate : callable
        ``estimate(group, guide_group)``: the noisy and guide patches of the
        chunk's groups, ``(m, k, channels, patch_size ** 2)`` each, to their
        estimates of the same shape and the groups' weights ``(m,)`` (None:
        equal weights).
    patch_size, search_radius, step : int
        The patches' side, the search window's reach and the references'
        spacing, at most ``patch_size`` (a larger one is taken as
        ``patch_size``; with the last row and column always references,
        every pixel is covered).
    k : int
        The group size, clipped to the smallest number of candidates any
        reference has.
    per_group : int, default 0
        Numbers the estimator holds per group besides its patches (e.g. a
        covariance), for sizing the chunks within the working-memory budget.

    Returns
    -------
    torch.Tensor of shape (channels, height, width)
        Each pixel's weighted mean of the estimates of the patches covering it.
    """
    c, height, width = noisy.shape
    p = patch_size
    n = p * p
    step = min(step, p)
    rows, cols = reference_starts(height, p, step), reference_starts(width, p, step)
    reach_r, reach_c = min(search_radius, height - p), min(search_radius, width - p)
    k = min(k, (reach_r + 1) * (reach_c + 1))
    n_off = (2 * search_radius + 1) ** 2
    device = noisy.device
    pcols = width - p + 1
    # every patch as a row: (positions, c, n), position = top-left row * pcols + column
    unfold = torch.nn.functional.unfold
    guides = unfold(guide[None], p)[0].reshape(c, n, -1).permute(2, 0, 1)
    values = unfold(noisy[None], p)[0].reshape(c, n, -1).permute(2, 0, 1)
    num = torch.zeros(c, height * width, dtype=noisy.dtype, device=device)
    den = torch.zeros(height * width, dtype=noisy.dtype, device=device)
    u, v = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    inner = (u * width + v).flatten().to(device)  # pixel offsets of a patch's pixels
    per_ref = max(n_off * c * n, k * c * n * 4 + per_group)
    chunk = max(1, block_elements(noisy.element_size(), _GROUP_BUFFERS) // per_ref)
    ri, ci = torch.meshgrid(rows, cols, indexing="ij")
    refs = torch.stack([ri.flatten(), ci.flatten()], 1)
    for s in range(0, refs.shape[0], chunk):
        # every reference has at least k candidates: no index is -1
        members = nearest_patches(guide, p, search_radius, k, references=refs[s:s + chunk])[0]
        est, weight = estimate(values[members], guides[members])
        mr, mc = members // pcols, members % pcols
        pix = ((mr * width + mc)[..., None] + inner).reshape(-1)  # (m * k * n,)
        if weight is None:
            mass = torch.ones_like(pix, dtype=noisy.dtype)
        else:
            est = est * weight[:, None, None, None]
            mass = weight[:, None].expand(-1, members.shape[1] * n).reshape(-1)
        num.index_add_(1, pix, est.permute(2, 0, 1, 3).reshape(c, -1))
        den.index_add_(0, pix, mass)
    return (num / den).reshape(c, height, width)
