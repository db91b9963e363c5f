"""Orthogonal Gaussian projections, drawn from a seed (Performers' ``ORF``).

The ``r`` projections ``w_i`` come in blocks of ``e`` (the dimension): within
a block the directions are orthonormal (the Q factor of a Gaussian matrix,
signs fixed so that it is Haar distributed) and each length is that of an
independent standard Gaussian vector (chi with ``e`` degrees of freedom).
Every ``w_i`` is then marginally ``N(0, I_e)``, so each feature is unbiased,
and orthogonality within a block lowers the variance of their mean
(Choromanski et al. 2021, Theorem 2). Blocks are independent; the last one
keeps only the directions it needs.
"""

from __future__ import annotations

import numbers
import secrets

import torch

from ..._errors import NadarayaError

__all__ = ["check_features", "check_seed", "orthogonal_gaussian"]

_SEED_LIMIT = 2**63


def check_features(features: object) -> int:
    """``features`` as an int >= 2, else :class:`~nadaraya.NadarayaError`."""
    if isinstance(features, bool) or not isinstance(features, numbers.Integral) or features < 2:
        raise NadarayaError(
            f"features must be an integer >= 2 (the number of random features; two at "
            f"least, so their spread gives an error estimate); got {features!r}. "
            "Pass e.g. features=256."
        )
    return int(features)


def check_seed(seed: object) -> int:
    """``seed`` as an int in ``[0, 2^63)``; a fresh random one for None."""
    if seed is None:
        return secrets.randbelow(_SEED_LIMIT)
    if (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
            or not 0 <= seed < _SEED_LIMIT):
        raise NadarayaError(
            f"seed must be None or an integer in [0, 2**63); got {seed!r}. "
            "Pass an int to make the random features reproducible."
        )
    return int(seed)


def orthogonal_gaussian(features: int, dim: int, seed: int,
                        device: torch.device | str = "cpu") -> torch.Tensor:
    """Projections ``(features, dim)``, float64, in orthogonal blocks of ``dim`` rows.

    Drawn on the CPU from ``seed`` and moved to ``device``, so one seed gives
    the same projections on every device.

    Parameters
    ----------
    features : int
        Number of projections ``r``.
    dim : int
        Dimension ``e`` of the points projected.
    seed : int
        Seed of the generator.
    device : torch.device or str
        Where the result goes.

    Returns
    -------
    torch.Tensor of shape (features, dim)
        Rows marginally ``N(0, I_dim)``; rows within one block of ``dim``
        are orthogonal.

    Examples
    --------
    >>> w = orthogonal_gaussian(6, 3, seed=0)
    >>> g = w[:3] @ w[:3].T
    >>> bool((g - torch.diag(torch.diag(g))).abs().max() < 1e-12)
    True
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    if dim == 0:
        return torch.zeros(features, 0, dtype=torch.float64, device=device)
    blocks = []
    left = features
    while left > 0:
        rows = min(dim, left)
        g = torch.randn(dim, rows, generator=gen, dtype=torch.float64)
        q, r = torch.linalg.qr(g)  # (dim, rows): orthonormal columns
        signs = torch.sign(torch.diagonal(r))
        signs[signs == 0] = 1.0
        directions = (q * signs).T
        lengths = torch.randn(rows, dim, generator=gen, dtype=torch.float64).norm(dim=1)
        blocks.append(directions * lengths[:, None])
        left -= rows
    return torch.cat(blocks).to(device)
