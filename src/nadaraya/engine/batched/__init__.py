"""Many problems at once: attention's ``(..., L, E)`` tensors, fused, streamed or dense."""

from __future__ import annotations

from ._engine import (
    BATCHED_ENGINES,
    EMPTY,
    BatchedResult,
    accumulation_dtype,
    smooth_batched,
    wider_dtype,
)

__all__ = [
    "BATCHED_ENGINES",
    "EMPTY",
    "BatchedResult",
    "accumulation_dtype",
    "smooth_batched",
    "wider_dtype",
]
