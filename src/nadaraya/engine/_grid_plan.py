"""The grid engine's plan: the padded inputs of one grid smoothing and its offsets' schedule.

``_plan`` checks the kernel's blocks against the grid, maps the guide so that
the value block is Euclidean (``L y`` with ``L^T L = Q_v``), factors the patch
weights, pads every per-key array once (so that each offset's view of each
tile is a plain slice), splits the offsets into the centre, symmetric pairs
``(o, -o)`` and singles, and, on the grouped path, groups them by all but
their last coordinate (:mod:`nadaraya.engine._grid_group`). The result is a
:class:`Plan`, read by the tiles (:mod:`nadaraya.engine._grid_tile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .._errors import NadarayaError
from ..kernels.quadratic import QuadraticKernel
from ._grid_group import Group, _groups, _window_max
from ._job import exp_floor
from ._lattice import _pad, _separable, monomials

__all__ = ["Plan"]


@dataclass
class Plan:
    """The padded inputs of one grid smoothing and the offsets' schedule.

    Arrays are padded by ``pads`` on both sides of every grid axis so that
    every offset's view of every tile is a plain slice.
    """

    shape: tuple[int, ...]
    pads: tuple[int, ...]
    values: torch.Tensor          # (p, *padded)
    guide: torch.Tensor | None    # (c', *padded) L y with L^T L = Q_v; None when Q_v = 0
    guide_scale: float            # squared differences of the guide are multiplied by it
    valid: torch.Tensor | None    # (*padded) bool, None when every key is valid
    logw: torch.Tensor | None     # (*padded)
    field: torch.Tensor | None    # (d, d, *padded) per-key Q_x
    shift: torch.Tensor | None    # (d, *padded) sub-pixel key positions
    qx: torch.Tensor              # (d, d)
    patch: list[list[float]] | torch.Tensor | None  # separable factors or full weights
    prad: tuple[int, ...]
    noise: float
    bound: float
    zero: bool
    pairs: list[tuple[int, ...]]
    singles: list[tuple[int, ...]]
    ext: tuple[int, ...]
    mono: list[tuple[int, ...]]
    mono2: list[tuple[int, ...]]
    symmetric: bool
    counts: torch.Tensor | None     # (*padded) valid as numbers, for degree 0 with hidden keys
    clamp: bool                     # whether scores can fall below the exponent floor
    groups: list[Group] | None = None   # the grouped path (no guide, no shifts)
    keylog: torch.Tensor | None = None  # (*padded) log w (grouped path)
    top: torch.Tensor | None = None     # grid_shape: per-query bound of keylog (grouped path)
    keep: torch.Tensor | None = None    # (*padded) valid as numbers (grouped path)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def p(self) -> int:
        return self.values.shape[0]


def _plan(values: torch.Tensor, kernel: QuadraticKernel, offsets: torch.Tensor,
          guide: torch.Tensor | None, key_valid: torch.Tensor | None,
          key_shift: torch.Tensor | None, degree: int, border: str,
          keys_outside: bool) -> Plan:
    dtype, device = values.dtype, values.device
    shape = tuple(values.shape[1:])
    d = len(shape)
    offs = sorted({tuple(int(v) for v in o) for o in offsets.tolist()})
    reach = tuple(max(abs(o[k]) for o in offs) for k in range(d))

    g = guide if guide is not None else values
    lmap = None  # guide -> L guide with L^T L = Q_v: the value block becomes Euclidean
    if kernel.value is not None:
        qvm = kernel.value_matrix(g.shape[0])
        if bool((qvm != 0).any()):
            lam, vec = torch.linalg.eigh(qvm)
            keep = lam > lam.abs().max() * 1e-14
            lmap = (vec[:, keep] * lam[keep].sqrt()).T.to(dtype=dtype, device=device)
    patch: Any = None
    prad = (0,) * d
    if lmap is not None and kernel.patch is not None:
        gw = kernel.patch
        if gw.ndim != d:
            raise NadarayaError(f"patch weights must have {d} dimensions; got {gw.ndim}.")
        prad = tuple(s // 2 for s in gw.shape)
        for k in range(d):
            if gw.shape[k] > shape[k]:
                raise NadarayaError(
                    f"patch of size {tuple(gw.shape)} is larger than the image "
                    f"{shape}; use a patch_size of at most {min(shape)}."
                )
        factors = _separable(gw)
        # plain floats: the filter loop reads them without a device round trip
        patch = [f.tolist() for f in factors] if factors is not None else gw

    field = None
    logw = None
    if kernel.position_field is not None:
        f = kernel.position_field
        if tuple(f.shape[:-2]) != shape:
            raise NadarayaError(
                f"position_field must have shape (*grid_shape, d, d) = {(*shape, d, d)} on "
                f"the grid; got {tuple(f.shape)}."
            )
        field = f.permute(*range(d, d + 2), *range(d)).to(dtype=dtype, device=device)
    if kernel.key_log_weight is not None:
        lw = kernel.key_log_weight
        if tuple(lw.shape) != shape:
            raise NadarayaError(
                f"key_log_weight must have the grid's shape {shape}; got {tuple(lw.shape)}."
            )
        logw = lw.to(dtype=dtype, device=device)

    symmetric = field is None and key_shift is None
    pairs, singles, zero = [], [], False
    offset_set = set(offs)
    for o in offs:
        if not any(o):
            zero = True
        elif symmetric and tuple(-v for v in o) in offset_set:
            if o > tuple(-v for v in o):
                pairs.append(o)
        else:
            singles.append(o)
    ext = reach if pairs else (0,) * d
    pads = tuple(reach[k] + ext[k] + prad[k] for k in range(d))

    mode = border
    vals = _pad(values, pads, mode)
    gd = None
    guide_scale = 1.0
    if lmap is not None:
        # padding copies pixels, so it commutes with the linear map: the values
        # are padded once and serve as the guide's source when they are the guide
        source = vals if guide is None else _pad(g.to(dtype=dtype, device=device), pads, mode)
        if lmap.shape == (1, 1):
            # one channel: the scale multiplies the squared differences instead
            gd, guide_scale = source, float(lmap[0, 0]) ** 2
        else:
            gd = torch.einsum("ij,j...->i...", lmap, source)
    valid = None
    if key_valid is not None:
        valid = key_valid.to(device=device, dtype=torch.bool)
    if not keys_outside:
        inside = torch.ones(shape, dtype=torch.bool, device=device)
        valid = inside if valid is None else valid
        widths = tuple(p for p in reversed(pads) for _ in (0, 1))
        valid = torch.nn.functional.pad(valid.to(torch.uint8), widths).to(torch.bool)
    elif valid is not None:
        valid = _pad(valid, pads, mode)
    if logw is not None:
        logw = _pad(logw, pads, mode)
    if field is not None:
        field = _pad(field, pads, mode)
    shift = None
    if key_shift is not None:
        if tuple(key_shift.shape) != (d, *shape):
            raise NadarayaError(
                f"key_shift must have shape (d, *grid_shape) = {(d, *shape)}; "
                f"got {tuple(key_shift.shape)}."
            )
        shift = _pad(key_shift.to(dtype=dtype, device=device), pads, mode)
    counts = None
    if degree == 0 and valid is not None:
        # hidden keys carry no value and no count: v * valid and valid
        counts = valid.to(dtype)
        vals = vals * counts
    clamp = _may_underflow(gd, guide_scale, patch, dtype)
    bound = 0.0
    if logw is not None:
        inner = logw if valid is None else logw[valid]
        bound = float(inner.max()) if inner.numel() else 0.0
    groups = keylog = top = keep = None
    if (shift is None and patch is None and not kernel.noise
            and (degree > 0 or logw is not None or field is not None)):
        qx = kernel.position_matrix().tolist()
        groups = _groups(offs, d, degree, None if field is not None else qx, dtype, device)
        if valid is not None:
            keep = valid.to(dtype)
        if logw is not None:
            keylog = logw
            top = _window_max(logw if valid is None else logw.masked_fill(~valid, -math.inf),
                              pads, offs, shape)
            top.masked_fill_(torch.isinf(top), 0.0)
    return Plan(
        shape=shape, pads=pads, values=vals, guide=gd, guide_scale=guide_scale, valid=valid,
        logw=logw, field=field,
        shift=shift, qx=kernel.position_matrix().to(dtype=dtype, device=device),
        patch=patch, prad=prad, noise=kernel.noise, bound=bound, zero=zero, pairs=pairs,
        singles=singles, ext=ext, mono=monomials(d, degree),
        mono2=[a for a in monomials(d, 2 * degree) if any(a)], symmetric=symmetric,
        counts=counts, clamp=clamp, groups=groups, keylog=keylog, top=top, keep=keep,
    )


def _may_underflow(guide: torch.Tensor | None, guide_scale: float, patch: Any,
                   dtype: torch.dtype) -> bool:
    """Whether some pair score of the value / patch block can fall below the exponent floor.

    ``r^2 <= sum_c range(L y_c)^2 * sum(g)``; the position block is a constant
    per offset (kept out of the arrays in the bounded pass).
    """
    if guide is None:
        return False
    spread = guide_scale * sum((float(c.amax()) - float(c.amin())) ** 2 for c in guide)
    if patch is not None:
        if isinstance(patch, list):
            total = 1.0
            for f in patch:
                total *= sum(f)
        else:
            total = float(patch.sum())
        spread *= total
    return not spread * (1 + 1e-6) < -exp_floor(dtype) - 1.0
