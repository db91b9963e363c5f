"""The differentiable engine: a flash-attention style autograd function in bounded memory."""

from __future__ import annotations

from ._engine import (
    AutogradEngine,
    BlockMask,
    BlockProblem,
    gradient_unit,
    rescaled_gradient,
    smooth_blocks,
)

__all__ = [
    "AutogradEngine",
    "BlockMask",
    "BlockProblem",
    "gradient_unit",
    "rescaled_gradient",
    "smooth_blocks",
]
