"""Non-local Bayes (Lebrun, Buades and Morel 2013): Wiener estimates over groups of patches.

Each reference patch (on a grid of step ``step``) is compared with every patch
whose top-left corner lies in its search window; the ``k`` nearest (mean
squared difference, the non-local means kernel's distance, i.e. the
k-nearest mask over patch vectors) form its group. The group's empirical mean
``m`` and covariance ``C`` give a linear minimum-mean-squared-error estimate of
every patch of the group,

    stage 1:  P_hat = m + (P - m) (C - beta sigma^2 I)_+ C^+      (C of the noisy group)
    stage 2:  P_hat = m + (P - m) C_b (C_b + sigma^2 I)^-1         (C_b of the pilot's group)

(the matrix functions taken on the eigenvalues, the positive part keeping
stage 1 a shrinkage; with ``threshold="hard"`` stage 1 keeps the group's
principal directions whose eigenvalue exceeds ``beta sigma^2`` and drops the
others, the hard thresholding of BM3D's first stage in the group's own
basis), and the estimates of overlapping patches are averaged
pixel by pixel: in stage 1 with equal weights, in stage 2 (``weighted``)
with the inverse of each group's estimated noise variance, as BM3D weighs
its groups. Stage 2 groups the patches of the stage-1 result (the pilot,
or oracle) and takes its covariance from them. A group whose noisy values vary
less than ``flat * sigma`` (a flat area) is replaced by its mean in stage 1,
and less than ``flat2 * sigma`` in stage 2.

The pilot may instead be collaborative hard thresholding in a fixed
transform (BM3D's first stage: each group's coefficients in the 2-D DCT of
its patches and a DCT across the group, those of magnitude at most
``transform_lambda * sigma`` set to zero, the group weighing the inverse of
the number kept), or the mean of the two first stages (``pilot="both"``):
they err differently, and their mean is a better oracle than either. Stage 2
may run with several patch sizes and average the results.

Colour images are moved to an orthonormal opponent basis (luminance and two
differences, so the noise keeps its ``sigma``), grouped on all channels
jointly and estimated channel by channel, as NL-Bayes does in YUV.

Each chunk of reference patches finds its groups with the grid engine's patch
search (:func:`nadaraya.engine.grid.nearest_patches`, ties to the smaller
position) and estimates them at once; the chunk is sized so its group
tensors stay within the working-memory budget (:func:`nadaraya.config_context`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._errors import NadarayaError
from ..engine.grid import peak_exponent, scale_pow2
from ._collaborative import hard_threshold_stage
from ._image import as_image, check_non_negative, check_positive
from ._layout import apply_layout, needs_layout
from ._patch_groups import aggregate_groups

__all__ = ["nl_bayes", "nl_bayes_stage"]

def _opponent(c: int, like: torch.Tensor) -> torch.Tensor | None:
    """Orthonormal opponent basis for 3 channels (rows: luminance, R-B, R-2G+B)."""
    if c != 3:
        return None
    return torch.tensor([[1 / math.sqrt(3)] * 3,
                         [1 / math.sqrt(2), 0.0, -1 / math.sqrt(2)],
                         [1 / math.sqrt(6), -2 / math.sqrt(6), 1 / math.sqrt(6)]],
                        dtype=like.dtype, device=like.device)


def _eigen_function(cov: torch.Tensor, f: Callable[[torch.Tensor], torch.Tensor]
                    ) -> torch.Tensor:
    """``V f(L) V^T`` for the eigenvalues ``L`` (negative ones taken as 0) of ``cov``
    ``(..., n, n)``."""
    lam, vec = torch.linalg.eigh(cov)
    return (vec * f(lam.clamp(min=0))[..., None, :]) @ vec.transpose(-1, -2)


def _threshold_matrix(cov: torch.Tensor, sigma2: float, beta: float,
                      hard: bool) -> torch.Tensor:
    """Stage 1's filter: eigenvalues above ``beta sigma^2`` kept (``hard``) or shrunk by it."""
    if hard:
        return _eigen_function(cov, lambda lam: (lam > beta * sigma2).to(lam.dtype))
    return _eigen_function(cov, lambda lam: torch.where(
        lam > 0, (lam - beta * sigma2).clamp(min=0) / lam.clamp(min=1e-300),
        torch.zeros_like(lam)))


def _wiener_matrix(cov: torch.Tensor, sigma2: float) -> torch.Tensor:
    """Stage 2's ``C (C + s I)^-1 = I - s (C + s I)^-1``, ``s = sigma^2``, ``C = cov (..., n, n)``.

    By a Cholesky factor (a third of an eigendecomposition's time); a matrix
    whose factorization fails in rounding takes the eigenvalues instead.
    """
    eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
    factor, info = torch.linalg.cholesky_ex(cov + sigma2 * eye)
    bad = info != 0
    factor[bad] = eye  # a placeholder: their rows are replaced below
    out = eye - sigma2 * torch.cholesky_inverse(factor)
    if bool(bad.any()):
        out[bad] = _eigen_function(cov[bad], lambda lam: lam / (lam + sigma2))
    return out


def nl_bayes_stage(noisy: torch.Tensor, pilot: torch.Tensor, sigma: float, *, stage: int,
                   patch_size: int, search_radius: int, k: int, step: int,
                   beta: float = 1.0, flat: float = 0.0, hard: bool = False,
                   weighted: bool = False) -> torch.Tensor:
    """One NL-Bayes stage on ``(c, H, W)`` tensors; returns the ``(c, H, W)`` estimate.

    ``pilot`` is what the groups are searched on (the noisy image itself in
    stage 1, the stage-1 result in stage 2); ``noisy`` is what is estimated.
    ``k`` is clipped to the smallest number of candidates any reference has;
    ``hard`` selects stage 1's hard threshold; ``flat`` sets a group whose
    noisy values' standard deviation is at most ``flat * sigma`` to its mean
    (0: never). With ``weighted`` each group's patches are aggregated with the
    weight ``1 / (mean(f^2) + 1 / k)``, ``f`` the filter's factors on the
    group's principal directions (all channels): the inverse of the
    estimate's noise variance in units of ``sigma^2`` per pixel, as BM3D
    weighs its groups. (The factors' squares sum to the squared Frobenius
    norm of the symmetric filter matrix, which is how they are computed.)
    """
    c = noisy.shape[0]
    n = patch_size * patch_size
    sigma2 = float(sigma) ** 2

    def estimate(group: torch.Tensor, guide: torch.Tensor) -> tuple[torch.Tensor,
                                                                     torch.Tensor | None]:
        m, size = group.shape[:2]
        mean = group.mean(1, keepdim=True)
        centred = group - mean
        basis = centred if stage == 1 else guide - guide.mean(1, keepdim=True)
        b = basis.permute(0, 2, 1, 3)  # (m, c, k, n)
        cov = b.transpose(-1, -2) @ b / max(size - 1, 1)
        if stage == 1:
            filt = _threshold_matrix(cov, sigma2, beta, hard)
        else:
            filt = _wiener_matrix(cov, sigma2)
        est = (centred.permute(0, 2, 1, 3) @ filt).permute(0, 2, 1, 3) + mean
        if flat > 0:
            spread = group.permute(0, 2, 1, 3).reshape(m, c, -1).var(-1, unbiased=False)
            level = group.mean((1, 3))  # (m, c)
            is_flat = (spread <= (flat * flat) * sigma2)[:, None, :, None]
            est = torch.where(is_flat, level[:, None, :, None].expand_as(est), est)
        if not weighted:
            return est, None
        return est, 1.0 / (filt.square().sum((-1, -2, -3)) / (c * n) + 1.0 / size)

    return aggregate_groups(noisy, pilot, estimate, patch_size=patch_size,
                            search_radius=search_radius, k=k, step=step, per_group=c * n * n * 3)


_PILOTS = ("bayes", "transform", "both")


def _check_scale(data: torch.Tensor, sigma: float) -> None:
    """Refuse values so far above ``sigma`` that patch distances and covariances, sums
    of hundreds of their squares in units of about sigma, would overflow."""
    room = math.frexp(torch.finfo(data.dtype).max)[1] // 2 - 10
    if peak_exponent(data) - math.frexp(sigma)[1] > room:
        peak = float(data.abs().max())
        wider = "" if data.dtype == torch.float64 else ", or the image as float64"
        raise NadarayaError(
            f"sigma {sigma:.4g} is too small for the image's values (up to about "
            f"{peak:.4g}, more than 2^{room} sigma): patch distances would overflow "
            f"{data.dtype}. Pass the noise level in the image's units{wider}.")


def _count(value: Any, name: str, least: int, odd: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (
            odd and value % 2 == 0):
        kind = "an odd integer" if odd else "an integer"
        raise NadarayaError(f"{name} must be {kind} >= {least}; got {value!r}.")
    return int(value)


def nl_bayes(image: Any, sigma: float, *, patch_size: int = 5, search_radius: int = 10,
             k1: int = 60, k2: int = 30, step: int = 3,
             patch_size2: int | Sequence[int] | None = None,
             beta: float = 1.0, flat: float = 1.05, threshold: str = "soft",
             flat2: float = 1.0, weighted: bool = True, pilot: str = "bayes",
             transform_patch_size: int = 8, transform_k: int = 16,
             transform_lambda: float = 2.7, channel_axis: int | None = -1,
             batch_axis: int | None = None) -> Any:
    """Denoise with non-local Bayes: two stages of Wiener estimates over patch groups.

    Lebrun, Buades and Morel, "A Nonlocal Bayesian Image Denoising
    Algorithm", SIAM J. Imaging Sciences 6(3), 2013 (and "Implementation of
    the Non-Local Bayes image denoising algorithm", IPOL 2013). Each group is
    the ``k`` nearest patches, in mean squared difference, of a reference
    patch within its search window: the k-nearest mask on the non-local means
    kernel's patch vectors. See :mod:`nadaraya.image.nlbayes` for the
    estimates.

    Parameters
    ----------
    image : array-like or torch.Tensor
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a torch tensor stays on its device.
    sigma : float
        Noise standard deviation in the image's units.
    patch_size : int, default 5
        Odd side of the square patches of stage 1.
    search_radius : int, default 10
        Half-side of the square window of candidate top-left corners.
    k1, k2 : int, default 60 and 30
        Group sizes of stage 1 and stage 2.
    step : int, default 3
        Spacing of the reference patches, in each stage at most its patch
        side (a larger one is taken as the side; with the last row and
        column always references, every pixel is estimated).
    patch_size2 : int or sequence of int, optional
        Odd side of the patches of stage 2; default ``patch_size``. With
        several sides, stage 2 runs once with each and the results are
        averaged (their errors differ: larger patches group regular textures
        better, smaller ones keep fine detail).
    beta : float, default 1.0
        Stage 1 subtracts ``beta * sigma^2`` from the covariance's eigenvalues
        (or, with ``threshold="hard"``, drops those below it).
    flat : float, default 1.05
        Stage-1 groups whose values' standard deviation is at most
        ``flat * sigma`` are set to their mean; 0 turns it off.
    threshold : {"soft", "hard"}, default "soft"
        Stage 1's rule on the eigenvalues ``l`` of each group's covariance:
        ``"soft"`` scales each direction by ``(l - beta sigma^2)_+ / l`` (the
        paper's); ``"hard"`` keeps a direction whole when ``l > beta
        sigma^2`` and drops it otherwise, which keeps the edges of regular
        textures sharper (``denoise`` uses it, with ``beta`` from 2 to 3).
    flat2 : float, default 1.0
        The same rule in stage 2 (on the noisy values of the group found on
        the stage-1 estimate), at ``flat2 * sigma``; 0 turns it off.
    weighted : bool, default True
        Aggregate the stage-2 estimates of the patches of each group with
        the weight ``1 / (mean(f^2) + 1 / k2)``, where ``f`` are the Wiener
        factors ``l / (l + sigma^2)`` on the group's principal directions:
        the inverse of the estimate's noise variance, as BM3D weighs its
        groups. False: every estimate of a pixel counts the same (the
        paper's).
    pilot : {"bayes", "transform", "both"}, default "bayes"
        The first stage, whose result stage 2 groups on and takes its
        covariances from: non-local Bayes's own (the paper's); collaborative
        hard thresholding in a fixed transform, BM3D's first stage (see
        the module's description); or the mean of the two, which errs less
        than either (``denoise`` uses it).
    transform_patch_size : int, default 8
        The side of the patches of the transform's first stage (at most the
        image's smaller side: a larger one is taken as that side).
    transform_k : int, default 16
        Its group size.
    transform_lambda : float, default 2.7
        Its threshold, in units of ``sigma``: the transform's coefficients
        of magnitude at most ``transform_lambda * sigma`` are set to zero.
    channel_axis : int or None, default -1
        The axis of the channels; a 2-D image is gray whatever it says.
        Three channels are filtered in an opponent colour basis.
    batch_axis : int, optional
        An axis of independent images, each filtered on its own.

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image``.

    Raises
    ------
    NadarayaError
        ``sigma`` not a finite number > 0 or so small against the image's
        values that patch distances would overflow, a bad count or patch
        size, or an image smaller than a patch.

    Notes
    -----
    The result is equivariant under a common scale of ``image`` and
    ``sigma``: the filter runs on both scaled by the power of two that
    brings ``sigma`` into [1/2, 1), so images of any range (1e-300 or 1e300)
    are filtered alike.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image.nlbayes import nl_bayes
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0, 1, 32), (32, 1))
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> out = nl_bayes(noisy, 0.1, search_radius=4)
    >>> bool(np.abs(out - clean).mean() < np.abs(noisy - clean).mean() / 2)
    True
    """
    sigma = check_positive(sigma, "sigma", "Pass the noise standard deviation.")
    p1 = _count(patch_size, "patch_size", 1, odd=True)
    sizes2 = (p1,) if patch_size2 is None else patch_size2
    if isinstance(sizes2, (list, tuple)) and sizes2:
        p2 = tuple(_count(size, "patch_size2", 1, odd=True) for size in sizes2)
    else:
        p2 = (_count(sizes2, "patch_size2", 1, odd=True),)
    radius = _count(search_radius, "search_radius", 0)
    k1, k2 = _count(k1, "k1", 1), _count(k2, "k2", 1)
    step = _count(step, "step", 1)
    beta = check_positive(beta, "beta", "Pass e.g. 1.0.")
    if not isinstance(threshold, str) or threshold not in ("soft", "hard"):
        raise NadarayaError(f"threshold must be 'soft' or 'hard'; got {threshold!r}.")
    flat = check_non_negative(flat, "flat", "Pass 0 to turn the flat-area rule off.")
    flat2 = check_non_negative(flat2, "flat2", "Pass 0 to turn the flat-area rule off.")
    if not isinstance(weighted, bool):
        raise NadarayaError(f"weighted must be True or False; got {weighted!r}.")
    if not isinstance(pilot, str) or pilot not in _PILOTS:
        raise NadarayaError(f"pilot must be one of {', '.join(map(repr, _PILOTS))}; got "
                            f"{pilot!r}.")
    pt = _count(transform_patch_size, "transform_patch_size", 1)
    kt = _count(transform_k, "transform_k", 1)
    lam = check_positive(transform_lambda, "transform_lambda", "Pass e.g. 2.7.")
    if needs_layout(image, channel_axis, batch_axis):
        return apply_layout(image, channel_axis, batch_axis, lambda x: nl_bayes(
            x, sigma, patch_size=p1, search_radius=radius, k1=k1, k2=k2, step=step,
            patch_size2=p2, beta=beta, flat=flat, threshold=threshold, flat2=flat2,
            weighted=weighted, pilot=pilot, transform_patch_size=pt, transform_k=kt,
            transform_lambda=lam), what="non-local Bayes")
    img = as_image(image)
    for name, size in (("patch_size", p1), ("patch_size2", max(p2))):
        if size > min(img.shape):
            raise NadarayaError(f"{name} {size} is larger than the image {img.shape}; use "
                                f"patches of at most {min(img.shape)} pixels a side.")
    pt = min(pt, *img.shape)
    # every step is equivariant under a common scale of the image and sigma: work where
    # sigma is in [1/2, 1), so no square of an image of any range leaves the dtype's
    e = math.frexp(sigma)[1]
    _check_scale(img.data, sigma)
    data = scale_pow2(img.data, -e, inplace=False)
    sigma = math.ldexp(sigma, -e)
    basis = _opponent(img.channels, data)
    if basis is not None:
        data = torch.einsum("ij,jhw->ihw", basis, data)
    basic = None
    if pilot != "transform":
        basic = nl_bayes_stage(data, data, sigma, stage=1, patch_size=p1,
                               search_radius=radius, k=k1, step=step, beta=beta, flat=flat,
                               hard=threshold == "hard")
    if pilot != "bayes":
        fixed = hard_threshold_stage(data, sigma, patch_size=pt, search_radius=radius, k=kt,
                                     step=step, lam=lam)
        basic = fixed if basic is None else (basic + fixed) / 2
    out = sum(nl_bayes_stage(data, basic, sigma, stage=2, patch_size=size,
                             search_radius=radius, k=k2, step=step, flat=flat2,
                             weighted=weighted) for size in p2) / len(p2)
    if basis is not None:
        out = torch.einsum("ji,jhw->ihw", basis, out)
    return img.back(scale_pow2(out, e))
