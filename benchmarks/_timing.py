"""Best-of-``repeat`` timing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["best_time"]


def best_time(fn: Callable[[], Any], repeat: int, *, warmup: bool = False) -> tuple[float, Any]:
    """The shortest of ``repeat`` timed calls of ``fn`` (wall seconds) and the last result.

    With ``warmup`` one untimed call comes first (start-up costs: imports, compilation).
    """
    if warmup:
        fn()
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out
