"""The pruned engine: streamed over only the key blocks whose weight can matter."""

from __future__ import annotations

from ._engine import (
    MAX_SHARE_BESIDE_COMPILED,
    MAX_VISITED_SHARE,
    PRUNE_TOLERANCE,
    PrunedEngine,
)

__all__ = [
    "MAX_SHARE_BESIDE_COMPILED",
    "MAX_VISITED_SHARE",
    "PRUNE_TOLERANCE",
    "PrunedEngine",
]
