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

The distances are formed a chunk of references at a time, offset by offset:
for each offset ``(dy, dx)``, the squared differences between the pixels of
the references' bounding box and the pixels ``(dy, dx)`` away, summed over
the channels, then over ``patch`` rows at the references' rows, then over
``patch`` columns at their columns (plain sums, not running sums, which
cancel in float32). A chunk of scattered references, whose bounding box
would cost more, gathers its candidates from a strided view of the image
instead and sums in the same order, so both give the same numbers. The
chunks and the batches of offsets stay within the working-memory budget
(:func:`nadaraya.config_context`); the results do not depend on them.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..._config import block_elements
from ..._errors import NadarayaError

__all__ = ["nearest_patches"]

# Numbers held per reference and candidate: the distance, the sort's int64 keys and
# indices, the validity and a copy of the distances (int64 counted as two float32 numbers).
_EXTRA = 8
# The cost of a loop's step (a dozen calls), in numbers formed by contiguous operations;
# how many such numbers one gathered number costs; and the numbers formed per batch of
# offset rows that keep the batch in cache.
_STEP = 200_000
_GATHER = 10
_CACHE = 1 << 20


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


def _add_in_order(parts: list[torch.Tensor]) -> torch.Tensor:
    """``parts[0] + parts[1] + ...``, added one after the other in list order (one part:
    itself, no copy)."""
    if len(parts) == 1:
        return parts[0]
    out = parts[0] + parts[1]
    for part in parts[2:]:
        out += part
    return out


def _sum_along(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The sum over ``dim``, added one slice after the other in index order."""
    return _add_in_order([t.select(dim, i) for i in range(t.shape[dim])])


def _sum_rows(t: torch.Tensor, starts: slice | torch.Tensor, p: int) -> torch.Tensor:
    """Sums of ``p`` consecutive rows (dimension 2) from each start, in row order; the
    starts a slice (a strided view, no copy) or a tensor of them."""
    if isinstance(starts, slice):
        return _add_in_order([t[:, :, starts.start + i:starts.stop + i:starts.step]
                              for i in range(p)])
    return _add_in_order([t.index_select(2, starts + i) for i in range(p)])


def _sum_columns(t: torch.Tensor, p: int) -> torch.Tensor:
    """Sums of ``p`` consecutive columns (the last dimension) from every start."""
    n = t.shape[-1] - p + 1
    return _add_in_order([t[..., i:i + n] for i in range(p)])


def _gathered(x: torch.Tensor, r: torch.Tensor, c: torch.Tensor, p: int, w: int,
              room: int) -> torch.Tensor:
    """Distances ``(n_references, (2 w + 1)^2)`` by gathering every candidate patch.

    The sums run in the order of :func:`_by_offsets` (channels, then the patch's rows,
    then its columns), so both give the same numbers.
    """
    channels = x.shape[0]
    rows, cols = x.shape[1] - p + 1, x.shape[2] - p + 1
    view = x.unfold(1, p, 1).unfold(2, p, 1).permute(1, 2, 0, 3, 4)  # no copy
    reach = torch.arange(-w, w + 1, device=x.device)
    n_off = len(reach) ** 2
    dy, dx = reach.repeat_interleave(len(reach)), reach.repeat(len(reach))
    out = x.new_empty(len(r), n_off)
    step = max(1, room // (n_off * channels * p * p))
    for s in range(0, len(r), step):
        r0, c0 = r[s:s + step], c[s:s + step]
        cr = (r0[:, None] + dy).clamp_(0, rows - 1)
        cc = (c0[:, None] + dx).clamp_(0, cols - 1)
        diff = view[cr, cc].sub_(view[r0, c0][:, None]).square_()  # (m, n_off, ch, p, p)
        out[s:s + step] = _sum_along(_sum_along(_sum_along(diff, 2), 2), 2)
    return out


def _by_offsets(x: torch.Tensor, r: torch.Tensor, c: torch.Tensor, p: int, w: int,
                box: tuple[int, int, int, int], batch: int) -> torch.Tensor:
    """Distances ``(n_references, (2 w + 1)^2)`` one row of offsets ``dy`` at a time.

    For an offset ``(dy, dx)`` the squared differences of each pixel of the
    references' bounding ``box`` (top, left, height, width) and the pixel
    ``(dy, dx)`` from it, summed over the channels, are summed over ``p`` rows
    at the references' rows, then over ``p`` columns at their columns.
    """
    channels, height, width = x.shape
    top, left, hb, wb = box
    span = 2 * w + 1
    # the box and its halo of w pixels; pixels outside the image only reach invalid
    # candidates
    if top >= w and left >= w and top + hb + w <= height and left + wb + w <= width:
        halo = x[:, top - w:top + hb + w, left - w:left + wb + w]
    else:
        halo = x.new_zeros(channels, hb + 2 * w, wb + 2 * w)
        r0, r1 = max(top - w, 0), min(top + hb + w, height)
        c0, c1 = max(left - w, 0), min(left + wb + w, width)
        halo[:, r0 - top + w:r1 - top + w, c0 - left + w:c1 - left + w] = x[:, r0:r1, c0:c1]
    here = halo[:, None, None, w:w + hb, w:w + wb]
    ur, row_of = torch.unique(r - top, return_inverse=True)
    at = row_of * (wb - p + 1) + c - left
    step = int(ur[1] - ur[0]) if len(ur) > 1 else 1
    even = bool((ur == ur[0] + step * torch.arange(len(ur), device=ur.device)).all())
    starts = slice(int(ur[0]), int(ur[-1]) + 1, step) if even else ur
    out = x.new_empty(len(r), span, span)
    buf = x.new_empty(channels, min(batch, span), span, hb, wb)
    for a in range(0, span, batch):
        b = min(batch, span - a)
        # (channels, dy, dx, row, column): halo[ch, a + dy + row, dx + column]
        there = halo[:, a:a + b + hb - 1].unfold(1, hb, 1).unfold(2, wb, 1)
        diff = torch.sub(there, here, out=buf[:, :b]).square_()
        sums = _sum_columns(_sum_rows(_sum_along(diff, 0), starts, p), p)
        out[:, a:a + b] = sums.reshape(b, span, -1).index_select(2, at).permute(2, 0, 1)
    return out.reshape(len(r), span * span)


def _distances(x: torch.Tensor, r: torch.Tensor, c: torch.Tensor, p: int, w: int,
               room: int) -> torch.Tensor:
    """Distances ``(n_references, (2 w + 1)^2)`` to the candidates at offsets ``(dy, dx)``
    in row-major order, by offsets or by gathering, whichever costs less."""
    channels = x.shape[0]
    span = 2 * w + 1
    top, left = int(r.min()), int(c.min())
    hb, wb = int(r.max()) - top + p, int(c.max()) - left + p
    n_rows = len(torch.unique(r))
    # numbers formed per offset row dy: the differences, the row sums and the column sums
    per_dy = span * (channels * hb * wb + 2 * n_rows * wb + len(r))
    batch = max(1, min(room, _CACHE) // per_dy)
    cost = span * per_dy + -(-span // batch) * _STEP
    if per_dy <= room and cost <= _GATHER * len(r) * span * span * channels * p * p + _STEP:
        return _by_offsets(x, r, c, p, w, (top, left, hb, wb), batch)
    return _gathered(x, r, c, p, w, room)


def _first(dist: torch.Tensor, keep: int) -> torch.Tensor:
    """The columns of the ``keep`` least distances of each row, least first, equal ones
    in column order, except the centre column (the reference itself) always first:
    the order of a stable sort.

    Distances of at most 32 bits go to ``topk`` with a key unique to each column that
    orders as the stable sort does: the distance's bits (non-negative floats order as
    their bits do), then the column. Wider ones take every column below the
    ``keep``-th least value and the first columns equal to it, which are the columns
    the stable sort keeps, then sort only those.
    """
    m, n = dist.shape
    centre = n // 2
    columns = torch.arange(n, device=dist.device)
    if dist.element_size() <= 4:
        bits = dist.view(torch.int32 if dist.element_size() == 4 else torch.int16)
        key = bits.to(torch.int64).mul_(n).add_(columns)
        key[:, centre] = -1
        return torch.topk(key, keep, dim=1, largest=False, sorted=True).indices
    first = dist.clone()
    first[:, centre] = -1.0
    if 2 * keep > n:
        return torch.sort(first, dim=1, stable=True).indices[:, :keep]
    last = torch.topk(first, keep, dim=1, largest=False, sorted=False).values.amax(1, True)
    below, equal = first < last, first == last
    chosen = below | (equal & (equal.cumsum(1) <= keep - below.sum(1, keepdim=True)))
    kept = chosen.nonzero()[:, 1].view(m, keep)  # exactly keep a row, in column order
    return kept.gather(1, torch.sort(first.gather(1, kept), dim=1, stable=True).indices)


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
    Each reference has ``(2 window + 1)^2`` candidates. Their distances are
    formed offset by offset over the bounding box of a chunk of references
    (about ``channels + 2 patch / step`` numbers per pixel of the box and
    offset for references on a grid of step ``step``), or, for scattered
    references, from the ``patch^2 * channels`` numbers of each candidate, in
    the same order of summation; the chunks stay within the working-memory
    budget and do not change the result.

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
    height, width = x.shape[1:]
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
    w = min(w, max(rows, cols) - 1)  # a larger reach finds no more patches
    span = 2 * w + 1
    n_off = span * span
    keep = min(k, n_off)
    room = block_elements(x.element_size(), 2)  # half the budget: the distances, half: sums
    chunk = max(1, room // (n_off * _EXTRA))
    reach = torch.arange(-w, w + 1, device=x.device)
    for s in range(0, m, chunk):
        r, c = ref[s:s + chunk, 0], ref[s:s + chunk, 1]
        dist = _distances(x, r, c, p, w, room)
        valid_r = ((r[:, None] + reach) >= 0) & ((r[:, None] + reach) < rows)
        valid_c = ((c[:, None] + reach) >= 0) & ((c[:, None] + reach) < cols)
        dist.masked_fill_(~(valid_r[:, :, None] & valid_c[:, None, :]).reshape(len(r), n_off),
                          math.inf)
        order = _first(dist, keep)
        ar, ac = torch.div(order, span, rounding_mode="floor"), order % span
        found = valid_r.gather(1, ar) & valid_c.gather(1, ac)
        pos = (r[:, None] + ar - w) * cols + c[:, None] + ac - w
        indices[s:s + chunk, :keep] = pos.masked_fill_(~found, -1)
        distances[s:s + chunk, :keep] = dist.gather(1, order).masked_fill_(~found, math.inf)
    return indices, distances
