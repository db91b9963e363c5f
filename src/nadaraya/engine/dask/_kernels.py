"""Kernels on blocks of a chunked problem: those that need every key at once are refused.

A kernel binds to the queries and keys of each block. Most kernels only
move the points into their coordinates (a rounding centre, a metric), so a
block's scores are the whole problem's. A few compute a statistic of all
keys when they bind: ``ArgMax`` (each query's largest similarity) and
``LinearKernel`` with ``intercept=True`` (the keys' mean, and ``1/n``) or
``metric="whitened"`` (their covariance). Those cannot be split by keys.
"""

from __future__ import annotations

from typing import Any

from ..._errors import NadarayaError
from ...bandwidth import resolve_bandwidth
from ...kernels import get_kernel

__all__ = ["check_kernel"]


def _global_part(kernel: Any) -> tuple[Any, str] | None:
    """A part of ``kernel`` that needs all keys when it binds, and what it needs."""
    from ...kernels.linear import LinearKernel
    from ...kernels.similarity import ArgMax

    if isinstance(kernel, ArgMax):
        return kernel, "each query's largest similarity over all keys"
    if isinstance(kernel, LinearKernel):
        if kernel.intercept:
            return kernel, "the mean and the number of all keys (intercept=True)"
        if isinstance(kernel.metric, str) and kernel.metric != "identity":
            return kernel, "the covariance of all keys (metric='whitened')"
    for part in [*(getattr(kernel, "parts", None) or []), getattr(kernel, "similarity", None)]:
        if part is not None:
            found = _global_part(part)
            if found is not None:
                return found
    return None


def check_kernel(kernel: Any, bandwidth: Any) -> Any:
    """The kernel object for ``kernel``; refuses kernels that need all keys.

    A bandwidth rule (``"scott"``, ``"silverman"``) stands in as 1.0: it is
    computed over the keys in the graph.
    """
    if isinstance(bandwidth, str) and bandwidth.lower() in ("scott", "silverman"):
        bandwidth = 1.0
    kern = get_kernel(kernel, resolve_bandwidth(bandwidth, None, kernel))  # type: ignore[arg-type]
    found = _global_part(kern)
    if found is not None:
        part, what = found
        raise NadarayaError(
            f"kernel {part!r} needs {what} when it binds, which no chunk of keys has, so the "
            "Dask engine cannot split the keys. Give the statistic explicitly (a metric "
            "matrix M, centred data), or compute the inputs and smooth in memory."
        )
    return kern
