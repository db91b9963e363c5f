"""The streamed engine: key blocks folded into the online log-sum-exp state."""

from __future__ import annotations

from ._engine import (
    StreamedEngine,
    dot_form_tolerance,
)

__all__ = [
    "StreamedEngine",
    "dot_form_tolerance",
]
