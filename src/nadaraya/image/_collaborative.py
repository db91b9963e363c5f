"""Collaborative hard thresholding: a group's patches in a fixed 3-D transform.

BM3D's first stage (Dabov, Foi, Katkovnik and Egiazarian, "Image denoising by
sparse 3-D transform-domain collaborative filtering", IEEE TIP 16(8), 2007):
each group of ``k`` similar ``p x p`` patches is taken into a separable
orthonormal transform, the 2-D DCT of each patch and a DCT across the group
(its patches in the order of their distance to the reference), and each
coefficient whose magnitude is at most ``lam * sigma`` is set to zero. The
group's mean (the first coefficient) is always kept, so a dark flat area is
not set to zero. The transform is orthonormal, so the noise keeps its
``sigma`` on every coefficient, and the group's estimate counts in the
aggregation with the weight ``1 / N``, ``N`` the number of coefficients kept
(the inverse of the estimate's noise variance in units of ``sigma^2``).

Non-local Bayes averages this estimate with its own first stage to form the
pilot of its second (:func:`nadaraya.image.nl_bayes`, ``pilot="both"``): the
two first stages err differently, a fixed transform on regular textures less
than a group's own principal directions, and their mean is a better oracle
than either.
"""

from __future__ import annotations

import math

import torch

from ._patch_groups import aggregate_groups

__all__ = ["dct_matrix", "hard_threshold_stage"]


def dct_matrix(n: int, like: torch.Tensor) -> torch.Tensor:
    """The orthonormal DCT-II of length ``n``: rows are the basis vectors, ``(n, n)``."""
    i = torch.arange(n, dtype=like.dtype, device=like.device)
    out = torch.cos(math.pi * (i[None, :] + 0.5) * i[:, None] / n) * math.sqrt(2.0 / n)
    out[0] /= math.sqrt(2.0)
    return out


def hard_threshold_stage(noisy: torch.Tensor, sigma: float, *, patch_size: int,
                         search_radius: int, k: int, step: int, lam: float) -> torch.Tensor:
    """Collaborative hard thresholding of ``noisy`` ``(c, H, W)``; returns ``(c, H, W)``.

    Groups are found on ``noisy`` over all channels jointly; each channel's
    coefficients are thresholded on their own at ``lam * sigma``. ``k`` is
    clipped to the smallest number of candidates any reference has.
    """
    p = patch_size
    c = noisy.shape[0]
    patch = dct_matrix(p, noisy)
    # the 2-D DCT of a row-major patch vector
    plane = torch.kron(patch, patch)
    level = float(lam) * float(sigma)

    def estimate(group: torch.Tensor, _: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        across = dct_matrix(group.shape[1], noisy)  # the group size, as clipped
        coef = across @ group.permute(0, 2, 1, 3) @ plane.T  # (m, c, k, n)
        keep = coef.abs() > level
        keep[..., 0, 0] = True
        est = (across.T @ (coef * keep) @ plane).permute(0, 2, 1, 3)
        return est, 1.0 / keep.sum((-1, -2, -3)).to(noisy.dtype)

    return aggregate_groups(noisy, noisy, estimate, patch_size=p, search_radius=search_radius,
                            k=k, step=step, per_group=c * k * p * p * 2)
