"""Patch search on the grid: the k nearest patches of reference patches within a window.

The patches of an image ``(channels, height, width)`` are its ``patch x patch``
squares that lie inside it, named by their top-left corner ``(r, c)``,
``0 <= r <= height - patch``, ``0 <= c <= width - patch``, and numbered row by
row: position ``r * (width - patch + 1) + c``. The distance of two patches is
the sum of their squared differences over the patch's pixels and the
channels (``patch^2 * channels`` times the mean squared difference of
non-local means). A reference patch's candidates are the patches whose
top-left corner is within ``window`` rows and ``window`` columns of its own
(the search window, clipped to the image, the reference itself included:
it is always its own nearest);
:func:`nearest_patches` gives the ``k`` nearest, the k-nearest mask over patch
vectors that non-local Bayes and block-matching filters group by.

The candidates are compared by gathering them from a strided view of the
image, a chunk of references at a time, the chunk sized so that its
gathered patches stay within the working-memory budget
(:func:`nadaraya.config_context`); the results do not depend on the chunk.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..._config import block_elements
from ..._errors import NadarayaError

__all__ = ["nearest_patches"]

# Numbers held per reference and candidate besides the gathered patch (whose difference
# and square are formed in place): the distance, the sort's values and int64 indices, the
# candidates' rows, columns and validity (int64 counted as two float32 numbers).
_EXTRA = 12


def _count(value: Any, name: str, least: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise NadarayaError(f"{name} must be an integer >= {least}; got {value!r}. {fix}")
    return int(value)


def _as_image(image: Any) -> torch.Tensor:
    x = image if isinstance(image, torch.Tensor) else torch.as_tensor(image)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or min(x.shape) < 1:
        raise NadarayaError(f"image must be (height, width) or (channels, height, width), "
                            f"not empty; got shape {tuple(x.shape)}. Pass a channels-first "
                            "image, e.g. img.permute(2, 0, 1) for a channels-last one.")
    if x.is_complex() or x.dtype == torch.bool:
        raise NadarayaError(f"image must hold real numbers; got dtype {x.dtype}. Convert it, "
                            "e.g. image.to(torch.float64).")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    # a finite sum proves every value finite
    if not math.isfinite(float(x.sum())) and not bool(torch.isfinite(x).all()):
        raise NadarayaError(f"image contains {int((~torch.isfinite(x)).sum())} NaN or "
                            "infinite value(s); patch distances would be undefined. Fill "
                            "them first, e.g. with nadaraya.image.reconstruct.")
    return x


def _references(references: Any, rows: int, cols: int, device: torch.device) -> torch.Tensor:
    if references is None:
        r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        return torch.stack([r.flatten(), c.flatten()], 1).to(device)
    ref = torch.as_tensor(references)
    if ref.ndim != 2 or ref.shape[1] != 2 or ref.is_floating_point() or ref.is_complex() or (
            ref.dtype == torch.bool):
        raise NadarayaError(f"references must be an integer array of shape (n_references, 2) "
                            f"(top-left row, column); got shape {tuple(ref.shape)} and dtype "
                            f"{ref.dtype}.")
    ref = ref.to(torch.long)
    if ref.numel() and bool(((ref < 0) | (ref >= torch.tensor([rows, cols]).to(ref))).any()):
        raise NadarayaError(f"references must be top-left corners of patches inside the image: "
                            f"rows 0..{rows - 1}, columns 0..{cols - 1}; got "
                            f"{ref.min(0).values.tolist()} .. {ref.max(0).values.tolist()}.")
    return ref.to(device)


def nearest_patches(image: Any, patch: int, window: int, k: int, *,
                    references: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` nearest patches of each reference patch within its search window.

    Parameters
    ----------
    image : torch.Tensor or array-like of shape (channels, height, width) or (height, width)
        Real values, all finite; integers are compared in float64. A tensor
        stays on its device; the distances are of its dtype.
    patch : int
        The patches' side, ``1 <= patch <= min(height, width)``.
    window : int
        The search window's reach: candidates have their top-left corner at
        most ``window`` rows and columns from the reference's (``>= 0``).
    k : int
        How many nearest patches to return per reference (``>= 1``).
    references : array-like of int, shape (n_references, 2), optional
        The references' top-left corners ``(row, column)``; default every
        patch, in the order of their positions.

    Returns
    -------
    indices : torch.Tensor of shape (n_references, k), int64
        The neighbours' positions ``row * (width - patch + 1) + column``,
        nearest first. The reference itself comes first (its distance, 0,
        is the least), then equal distances go to the smaller position. A
        reference with fewer than ``k`` candidates (near a border, or ``k``
        above ``(2 window + 1)^2``) has ``-1`` in its last columns.
    distances : torch.Tensor of shape (n_references, k)
        Their distances: the sum over the patch's pixels and the channels of
        the squared differences; ``inf`` where the index is ``-1``.

    Raises
    ------
    NadarayaError
        A bad shape, a NaN or infinite value, a ``patch``, ``window`` or
        ``k`` that is not such an integer, or references outside the image.

    Notes
    -----
    Each reference is compared with its ``(2 window + 1)^2`` candidates at
    ``patch^2 * channels`` numbers each, a chunk of references at a time
    within the working-memory budget; the chunking does not change the
    result.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.engine.grid import nearest_patches
    >>> img = torch.tensor([[0., 0., 5., 0.],
    ...                     [0., 0., 5., 0.]])
    >>> idx, dist = nearest_patches(img, 2, 1, 2, references=[[0, 0]])
    >>> idx.tolist(), dist.tolist()
    ([[0, 1]], [[0.0, 50.0]])
    """
    x = _as_image(image)
    channels, height, width = x.shape
    side = min(height, width)
    p = _count(patch, "patch", 1, f"Pass a side of at most {side} (the image's smaller side).")
    if p > side:
        raise NadarayaError(f"patch must be at most the image's smaller side {side}; got {p}. "
                            "Pass a smaller patch.")
    w = _count(window, "window", 0, "Pass the search window's reach in pixels, e.g. 10.")
    k = _count(k, "k", 1, "Pass how many nearest patches to return, e.g. 16.")
    rows, cols = height - p + 1, width - p + 1
    ref = _references(references, rows, cols, x.device)
    m = ref.shape[0]
    indices = torch.full((m, k), -1, dtype=torch.long, device=x.device)
    distances = torch.full((m, k), math.inf, dtype=x.dtype, device=x.device)
    if m == 0:
        return indices, distances
    # every patch as a view (rows, cols, channels, patch * patch) of the image: no copy
    view = x.unfold(1, p, 1).unfold(2, p, 1).permute(1, 2, 0, 3, 4)
    w = min(w, max(rows, cols) - 1)  # a larger reach finds no more patches
    dy, dx = torch.meshgrid(torch.arange(-w, w + 1, device=x.device),
                            torch.arange(-w, w + 1, device=x.device), indexing="ij")
    # the candidates: the reference itself, then the others in row-major order (their
    # positions increase)
    dy, dx = dy.flatten(), dx.flatten()
    centre = (2 * w + 1) * w + w
    first = torch.cat([torch.tensor([centre]), torch.arange(centre),
                       torch.arange(centre + 1, dy.numel())]).to(x.device)
    dy, dx = dy[first], dx[first]
    n_off = dy.numel()
    keep = min(k, n_off)
    per_ref = n_off * (channels * p * p + _EXTRA)
    chunk = max(1, block_elements(x.element_size(), 1) // per_ref)
    for s in range(0, m, chunk):
        r0, c0 = ref[s:s + chunk, 0], ref[s:s + chunk, 1]
        cr, cc = r0[:, None] + dy, c0[:, None] + dx  # (chunk, n_off)
        valid = (cr >= 0) & (cr < rows) & (cc >= 0) & (cc < cols)
        cr, cc = cr.clamp(0, rows - 1), cc.clamp(0, cols - 1)
        here = view[r0, c0].reshape(len(r0), 1, channels, p * p)
        diff = view[cr, cc].reshape(len(r0), n_off, channels, p * p)
        dist = diff.sub_(here).square_().sum((-1, -2))
        del diff
        dist.masked_fill_(~valid, math.inf)
        # a stable sort: equal distances keep the candidates' order
        order = torch.sort(dist, dim=1, stable=True).indices[:, :keep]
        found = torch.gather(valid, 1, order)
        pos = torch.gather(cr * cols + cc, 1, order)
        indices[s:s + chunk, :keep] = pos.masked_fill_(~found, -1)
        distances[s:s + chunk, :keep] = torch.gather(dist, 1, order).masked_fill_(~found,
                                                                                 math.inf)
    return indices, distances
