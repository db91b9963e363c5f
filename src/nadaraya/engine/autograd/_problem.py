"""The autograd engine's problem: blocks, their visibility, scores and value frame.

:class:`BlockProblem` describes one differentiable smoothing problem (its kernel's block
formula, its mask as a :class:`BlockMask`, block sizes); the helpers give a block's
scores, the values' frame (centred and divided by a power of two) and the gradient's
unit. The passes that use them are in :mod:`._passes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..._config import Config, get_config
from ...masks import BoundMask, Mask, Problem, Visibility
from ...masks._base import IndexMask, _Binary
from ...masks.matrix import MatrixMask

__all__ = ["Block", "BlockMask", "BlockProblem", "gradient_unit", "rescaled_gradient"]

Block = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _point_free(mask: Mask) -> bool:
    """Whether a mask depends only on indices (so one binding serves every head)."""
    if isinstance(mask, IndexMask | MatrixMask):
        return True
    if isinstance(mask, _Binary):
        return _point_free(mask.left) and _point_free(mask.right)
    return False


class BlockMask:
    """Visibility blocks of a mask for problems with leading (batch, head) dimensions.

    A mask that depends only on indices (causal, window, predicate, matrix) is
    bound once and its ``(mb, nb)`` blocks broadcast over the leading
    dimensions; a mask that depends on the points (k-nearest, radius) is bound
    to each problem's own queries and keys.

    Parameters
    ----------
    mask : Mask or BoundMask
        The mask, or a mask already bound to a single problem.
    lead : tuple of int
        The leading dimensions.
    m, n : int
        Number of queries and keys.
    queries, keys : torch.Tensor, optional
        Points ``(..., m, d)`` and ``(..., n, d)`` for masks that read them.
    """

    def __init__(self, mask: Mask | BoundMask, lead: tuple[int, ...], m: int, n: int,
                 queries: torch.Tensor | None = None, keys: torch.Tensor | None = None,
                 device: torch.device | None = None) -> None:
        self.lead = lead
        self.per_problem: list[BoundMask] | None = None
        if isinstance(mask, BoundMask):
            self.shared: BoundMask | None = mask
            return
        if _point_free(mask) or not lead:
            dev = device if device is not None else (
                queries.device if queries is not None else torch.device("cpu"))
            q = queries if queries is not None and not lead else torch.empty(m, 0, device=dev)
            k = keys if keys is not None and not lead else torch.empty(n, 0, device=dev)
            self.shared = mask.bind(Problem(m, n, q, k, lead=lead))
            return
        if queries is None or keys is None:
            raise ValueError("a mask that reads the points needs queries and keys")
        self.shared = None
        qf = queries.detach().expand(*lead, m, queries.shape[-1]).reshape(-1, m, queries.shape[-1])
        kf = keys.detach().expand(*lead, n, keys.shape[-1]).reshape(-1, n, keys.shape[-1])
        self.per_problem = [mask.at(lead, g).bind(Problem(m, n, a, b))
                            for g, (a, b) in enumerate(zip(qf, kf, strict=True))]

    def status(self, rows: slice, cols: slice) -> Visibility:
        if self.shared is not None:
            return self.shared.status(rows, cols)
        return Visibility.PARTIAL

    def block(self, rows: slice, cols: slice) -> torch.Tensor:
        """Bool ``(mb, nb)`` (shared), ``(*lead, mb, nb)`` (per problem, or a shared mask
        that reads the (batch, head) index), or a shape that broadcasts to the latter."""
        if self.shared is not None:
            return self.shared.block(rows, cols)
        assert self.per_problem is not None
        parts = torch.stack([b.block(rows, cols) for b in self.per_problem])
        return parts.reshape(*self.lead, *parts.shape[1:])


@dataclass
class BlockProblem:
    """What :func:`smooth_blocks` needs besides the tensors.

    Attributes
    ----------
    block : callable
        ``block(q, k)`` for prepared queries ``(..., mb, e)`` and keys
        ``(..., nb, e)`` returns ``(..., mb, nb)``: log-weights, or the weights
        themselves when ``log_domain`` is False. It must not hold parameters
        that need gradients: fold those into the prepared points.
    mask : BlockMask, optional
        Visibility of each block.
    log_domain : bool
        Whether ``block`` gives log-weights (normalised by log-sum-exp).
    dot : bool
        Whether ``block(q, k)`` is exactly ``q @ k.T`` (a faster backward).
    dropout_p : float
        Probability of dropping each weight (attention dropout; the
        normaliser keeps every weight, as in ``scaled_dot_product_attention``).
    point_scales : tuple of torch.Tensor, optional
        Powers of two ``(sq, sk)`` ``(..., 1, 1)`` by which queries and keys
        are divided before ``block`` (homogeneous weights only).
    """

    block: Block
    mask: BlockMask | None = None
    log_domain: bool = True
    dot: bool = False
    dropout_p: float = 0.0
    seed: int = 0
    sizes: tuple[int, int] = (1, 1)
    point_scales: tuple[torch.Tensor, torch.Tensor] | None = None


def working_config() -> Config:
    """The configuration in force; under ``torch.compile``, which cannot read it, the default.

    (A context variable cannot be read inside a compiled graph: compiled
    calls use the default blocks and working memory.)
    """
    return Config() if torch.compiler.is_compiling() else get_config()


def gradient_unit(scale: torch.Tensor) -> torch.Tensor:
    """The unit ``(..., 1, 1)`` in which the scores' gradients are formed: ``S``, at least 2**-64.

    The value part of ``dS`` is of order ``S`` (the values' power of two): in
    units of ``S`` it is of order one whatever the values' magnitude. The
    floor keeps the other parts (through ``lse``, or the returned weights),
    of order one in the caller's units, from overflowing when divided by it.
    """
    return scale.clamp(min=2.0**-64)


def rescaled_gradient(g: torch.Tensor, unit: torch.Tensor, divisor: torch.Tensor,
                      ) -> torch.Tensor:
    """``g * unit / divisor`` for powers of two, in the order that cannot overflow early.

    ``g`` is the gradient with respect to points divided by ``divisor``,
    given in units of ``unit`` (both ``(..., 1, 1)``).
    """
    ratio = unit / divisor  # a power of two, exact where it is representable
    ordered = torch.where(divisor > 1, (g / divisor) * unit, (g * unit) / divisor)
    return torch.where(torch.isfinite(ratio) & (ratio > 0), g * ratio, ordered)


def _scaled_points(spec: BlockProblem, qp: torch.Tensor,
                   kp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if spec.point_scales is None:
        return qp, kp
    sq, sk = spec.point_scales
    return qp / sq, kp / sk


def _block_sizes(lead: tuple[int, ...], m: int, n: int, itemsize: int) -> tuple[int, int]:
    config = working_config()
    groups = max(1, math.prod(lead))
    elements = max(1, int(config.working_memory * 2**20 // (itemsize * 4)))
    budget = max(1, elements // groups)
    nb = max(1, min(n, config.key_block, budget))
    mb = max(1, min(m, config.query_block, budget // nb))
    return mb, nb


def _keep(spec: BlockProblem, shape: torch.Size, r: int, c: int, dtype: torch.dtype,
          device: torch.device) -> torch.Tensor:
    """Dropout multipliers of block (r, c): the same in the forward and backward pass."""
    gen = torch.Generator(device=device)
    gen.manual_seed((spec.seed * 1_000_003 + r * 65_537 + c) % (2**63 - 1))
    keep = torch.rand(shape, generator=gen, device=device, dtype=dtype) >= spec.dropout_p
    return keep.to(dtype) / (1.0 - spec.dropout_p)


def _scores(spec: Any, qp: torch.Tensor, kp: torch.Tensor, bias: torch.Tensor | None,
            rows: slice, cols: slice, status: Visibility,
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Raw block and its visibility factor.

    Returns ``(raw, extra)``: log domain, ``extra`` is the additive term
    (bias, ``-inf`` where hidden) or None; weight domain, ``extra`` is the
    multiplicative factor ``exp(bias)`` (zero where hidden) or None.
    """
    raw = spec.block(qp[..., rows, :], kp[..., cols, :])
    extra = None
    if bias is not None:
        extra = bias[..., rows, cols]
    if status is Visibility.PARTIAL and spec.mask is not None:
        visible = spec.mask.block(rows, cols)
        hidden = torch.tensor(-math.inf, dtype=raw.dtype, device=raw.device)
        shown = extra if extra is not None else torch.zeros((), dtype=raw.dtype,
                                                               device=raw.device)
        extra = torch.where(visible, shown, hidden)
    if extra is not None and not spec.log_domain:
        extra = torch.exp(extra)
    return raw, extra


def _value_frame(v: torch.Tensor, dropout_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Centre ``c`` ``(..., 1, p)`` and power of two ``S`` ``(..., 1, 1)`` of each problem's values.

    The engine sums ``(v - c) / S``, of magnitude in ``[1, 2)``: the sums cannot
    overflow for values near the dtype's largest number nor lose tiny values to
    underflow, and the backward's ``v_j - out_i`` is formed without the
    cancellation of a large common offset. ``c`` is the midpoint of a column
    whose values share a sign (0 otherwise), rounded to a multiple of the
    unit in the last place of its largest value, so that ``v - c`` is exact
    for values of one magnitude and ``(v - c) + c`` gives ``v`` back. A
    weighted mean moves with its values; dropout breaks that (the dropped
    weights stay in the normaliser), so it keeps ``c = 0``.
    """
    lead = v.shape[:-2]
    if v.numel() == 0:
        return v.new_zeros((*lead, 1, v.shape[-1])), v.new_ones((*lead, 1, 1))
    vd = v.detach()
    low, high = vd.amin(-2, keepdim=True), vd.amax(-2, keepdim=True)
    if dropout_p > 0:
        centre = torch.zeros_like(low)
    else:
        mid = low / 2 + high / 2  # halved first: cannot overflow
        _, exponent = torch.frexp(torch.maximum(low.abs(), high.abs()))
        info = torch.finfo(v.dtype)
        # the unit in the last place, never below the smallest subnormal (it would be 0)
        ulp = torch.ldexp(torch.full_like(mid, info.eps), exponent - 1).clamp(
            min=info.smallest_normal * info.eps)
        one_sign = (low > 0) | (high < 0)
        centre = torch.where(one_sign & torch.isfinite(mid), torch.round(mid / ulp) * ulp,
                             torch.zeros_like(mid))
    top = (vd - centre).abs().amax(dim=(-2, -1), keepdim=True)
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    _, exponent = torch.frexp(top)  # top = mantissa * 2**exponent, mantissa in [0.5, 1)
    return centre, torch.ldexp(torch.ones_like(top), exponent - 1)


def _combine(spec: BlockProblem, raw: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
    if extra is None:
        return raw
    return raw + extra if spec.log_domain else raw * extra


