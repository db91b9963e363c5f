"""The engine: one operator, several ways to compute it.

``smooth(queries, keys, values, kernel, mask)`` dispatches to the dense,
streamed, neighbors or fused engine; ``explain`` says which and why.
"""

from __future__ import annotations

from ._api import explain, smooth, weights
from ._dispatch import ENGINES, Explanation
from ._state import SmoothState
from .dask._detect import any_dask, is_dask
from .features import RandomFeatures

__all__ = ["ENGINES", "Explanation", "RandomFeatures", "SmoothState", "any_dask", "explain",
           "is_dask", "smooth", "weights"]
