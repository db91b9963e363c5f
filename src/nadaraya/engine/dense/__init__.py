"""The dense engine: the reference, score rows of a few queries at a time."""

from __future__ import annotations

from ._engine import (
    DenseEngine,
    dense_weights,
)

__all__ = [
    "DenseEngine",
    "dense_weights",
]
