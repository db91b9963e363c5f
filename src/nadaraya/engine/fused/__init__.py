"""The fused engine: torch's fused attention kernels (SDPA) for the exp-dot family."""

from __future__ import annotations

from ._engine import (
    FusedEngine,
)

__all__ = [
    "FusedEngine",
]
