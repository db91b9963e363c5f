"""The neighbors engine: only the keys that can carry weight (trees, k-nearest, radius)."""

from __future__ import annotations

from ._engine import (
    MAX_PAIR_FRACTION,
    NeighborsEngine,
)

__all__ = [
    "MAX_PAIR_FRACTION",
    "NeighborsEngine",
]
