"""The grid engine's plan: the padded inputs of one grid smoothing and its offsets' schedule.

``_plan`` checks the kernel's blocks against the grid, maps the guide so that
the value block is Euclidean (``L y`` with ``L^T L = Q_v``), factors the patch
weights, pads every per-key array once (so that each offset's view of each
tile is a plain slice), splits the offsets into the centre, symmetric pairs
``(o, -o)`` and singles, and, on the grouped path, groups them by all but
their last coordinate (:mod:`nadaraya.engine.grid._group`). The result is a
:class:`Plan`, read by the tiles (:mod:`nadaraya.engine.grid._tile`).

Range: the padded values are multiplied by ``2^-k`` and the guide by
``2^-g``, powers of two that bring their largest magnitudes into
``[1/2, 1)`` (exact: a power of two commutes with rounding), so that no sum,
difference or square overflows and none of them underflows for values near
the dtype's smallest normal number; ``2^(2 g)`` is folded into the scale of
the squared guide differences (``guide_scale``) and the tiles multiply the
means by ``2^k``. For values in the usual range the results are bit for bit
those of unscaled arithmetic. Sums are accumulated in float64 for
lower-precision values (``acc_dtype``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..._errors import NadarayaError
from ...kernels.quadratic import QuadraticKernel
from .._job import exp_floor
from ._grouping import Group, _groups, _window_max
from ._lattice import _separable, monomials, pad

__all__ = ["Plan", "peak_exponent", "scale_pow2"]


def _ldexp(x: float, e: int) -> float:
    """``x 2^e`` as a Python float, ``inf`` (with ``x``'s sign) on overflow."""
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def scale_pow2(x: torch.Tensor, e: int, *, inplace: bool = True) -> torch.Tensor:
    """``x 2^e``, exact, in steps whose factors the dtype of ``x`` represents.

    Scaling up takes the largest step first and scaling down the smallest
    last, so no step leaves the dtype's range before the result would.
    """
    if not e:
        return x
    step = math.frexp(torch.finfo(x.dtype).max)[1] - 2
    for _ in range(-(-abs(e) // step)):
        part = max(-step, min(step, e))
        x = x.mul_(2.0 ** part) if inplace else x * 2.0 ** part
        inplace = True
        e -= part
    return x


def _exponent(peak: float) -> int:
    """``e`` with ``peak 2^-e`` in ``[1/2, 1)`` (0 for 0)."""
    return math.frexp(peak)[1] if peak > 0 and math.isfinite(peak) else 0


def peak_exponent(x: torch.Tensor) -> int:
    """``e`` with ``max |x| 2^-e`` in ``[1/2, 1)`` (0 when ``x`` is 0 or empty):
    ``scale_pow2(x, -e)`` brings ``x`` into ``(-1, 1)``."""
    if not x.numel():
        return 0
    low, high = torch.aminmax(x)
    return _exponent(max(-float(low), float(high)))


@dataclass
class Plan:
    """The padded inputs of one grid smoothing and the offsets' schedule.

    Arrays are padded by ``pads`` on both sides of every grid axis so that
    every offset's view of every tile is a plain slice.
    """

    shape: tuple[int, ...]
    pads: tuple[int, ...]
    values: torch.Tensor          # (p, *padded) v 2^-value_exp
    guide: torch.Tensor | None    # (c', *padded) L y 2^-g / |L|; None when Q_v = 0
    guide_scale: float            # |L|^2 4^g: squared differences of the guide are scaled by it
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
    value_exp: int = 0                  # the values are stored times 2^-value_exp
    value_low: torch.Tensor | None = None   # (p, *grid) least value in each query's window box
    value_high: torch.Tensor | None = None  # (p, *grid) largest (both times 2^-value_exp)
    acc_dtype: torch.dtype = torch.float64  # the tiles' accumulators

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
    # guide -> L guide / |L| with L^T L = Q_v (the value block becomes Euclidean): a (c,)
    # vector when Q_v is diagonal (channel by channel, elementwise: no matrix product
    # whose rounding follows the grid's size), else a (c', c) matrix
    lmap = None
    lnorm2 = 0.0  # |L|^2, the largest eigenvalue of Q_v
    if kernel.value is not None:
        qvm = kernel.value_matrix(g.shape[0])
        if bool((qvm != 0).any()):
            diag = torch.diagonal(qvm)
            if bool((qvm == torch.diag(diag)).all()):
                lnorm2 = float(diag.max())
                lmap = (diag / lnorm2).sqrt()
            else:
                lam, vec = torch.linalg.eigh(qvm)
                keep = lam > lam.abs().max() * 1e-14
                lnorm2 = float(lam[keep].max())
                lmap = (vec[:, keep] * (lam[keep] / lnorm2).sqrt()).T
            lmap = lmap.to(dtype=dtype, device=device)
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
    value_exp = peak_exponent(values)
    vals = pad(values, pads, mode)
    vals = scale_pow2(vals, -value_exp, inplace=vals is not values)
    gd = None
    guide_scale = 1.0
    if lmap is not None:
        # padding copies pixels, so it commutes with the linear map: the values
        # are padded once and serve as the guide's source when they are the guide
        if guide is None:
            source, gexp = vals, value_exp
        else:
            source = pad(g.to(dtype=dtype, device=device), pads, mode)
            gexp = peak_exponent(source)
            source = scale_pow2(source, -gexp, inplace=source is not g)
        # |L y 2^-g| <= sqrt(c): differences and squares stay in range, and the
        # scale is clamped to the dtype's largest number (such weights are 0 anyway)
        guide_scale = min(_ldexp(lnorm2, 2 * gexp), torch.finfo(dtype).max)
        if lmap.ndim == 2:
            gd = torch.einsum("ij,j...->i...", lmap, source)
        elif bool((lmap == 1).all()):
            gd = source  # Q_v a multiple of the identity (one channel, most filters)
        else:
            gd = source * lmap.reshape(-1, *([1] * d))
    valid = None
    if key_valid is not None:
        valid = key_valid.to(device=device, dtype=torch.bool)
    if not keys_outside:
        inside = torch.ones(shape, dtype=torch.bool, device=device)
        valid = inside if valid is None else valid
        widths = tuple(p for p in reversed(pads) for _ in (0, 1))
        valid = torch.nn.functional.pad(valid.to(torch.uint8), widths).to(torch.bool)
    elif valid is not None:
        valid = pad(valid, pads, mode)
    if logw is not None:
        logw = pad(logw, pads, mode)
    if field is not None:
        field = pad(field, pads, mode)
    shift = None
    if key_shift is not None:
        if tuple(key_shift.shape) != (d, *shape):
            raise NadarayaError(
                f"key_shift must have shape (d, *grid_shape) = {(d, *shape)}; "
                f"got {tuple(key_shift.shape)}."
            )
        shift = pad(key_shift.to(dtype=dtype, device=device), pads, mode)
    value_low, value_high = _value_range(vals, valid, pads, offs, shape)
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
    acc_dtype = torch.float64 if torch.finfo(dtype).bits < 64 else dtype
    groups = keylog = top = keep = None
    if (shift is None and patch is None and not kernel.noise
            and (degree > 0 or logw is not None or field is not None)):
        qx = kernel.position_matrix().tolist()
        groups = _groups(offs, d, degree, None if field is not None else qx, dtype, device,
                         acc_dtype)
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
        value_exp=value_exp, value_low=value_low, value_high=value_high,
        acc_dtype=acc_dtype,
    )


def _value_range(vals: torch.Tensor, valid: torch.Tensor | None, pads: tuple[int, ...],
                 offsets: list[tuple[int, ...]], shape: tuple[int, ...]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The least and largest key value in each query's window box, ``(p, *grid)`` each.

    A weighted mean is clamped to them against rounding: a constant stays
    itself, and the clamp reads the query's keys only, so that it is the same
    whatever else the grid holds (``-inf`` and ``inf`` without a key).
    """
    low, high = [], []
    hidden = None if valid is None else ~valid
    for v in vals:
        top = v if hidden is None else v.masked_fill(hidden, -math.inf)
        high.append(_window_max(top, pads, offsets, shape))
        bottom = -v if hidden is None else (-v).masked_fill_(hidden, -math.inf)
        low.append(_window_max(bottom, pads, offsets, shape).neg_())
    value_low, value_high = torch.stack(low), torch.stack(high)
    value_low.masked_fill_(value_low == math.inf, -math.inf)
    value_high.masked_fill_(value_high == -math.inf, math.inf)
    return value_low, value_high


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
