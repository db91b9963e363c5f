"""The weight domain: unnormalized sums and signed kernels (linear, cosine)."""

from __future__ import annotations

from ._engine import (
    SignedState,
    WeightDomainEngine,
    adapt_engines,
    check_options,
    finish,
    is_signed,
)

__all__ = [
    "SignedState",
    "WeightDomainEngine",
    "adapt_engines",
    "check_options",
    "finish",
    "is_signed",
]
