"""The compiled engine: exact dense sums in a vectorized C loop (see :mod:`._engine`)."""

from ._engine import MAX_FEATURES, MAX_VALUES, CompiledEngine, kernel_code

__all__ = ["MAX_FEATURES", "MAX_VALUES", "CompiledEngine", "kernel_code"]
