"""The engine: one operator, several ways to compute it.

``smooth(queries, keys, values, kernel, mask)`` computes
``out(q) = sum_j K(q, k_j) v_j / sum_j K(q, k_j)`` over the keys ``M(q)``
lets each query see; ``weights`` gives rows of the smoother matrix and
``explain`` says which engine runs a problem and why the others do not.

Each engine is a package of its own; the dispatcher (``_dispatch``) and the
merge rule of partial states (:class:`SmoothState`) sit here, above them.
The faces (estimators, images, modules, memory, CLI) use only the names of
this module and of the public packages :mod:`.grid` (the grid smooth and
its window helpers), :mod:`.batched` (many ``(..., L, E)`` problems at once)
and :mod:`.certified` (tolerances); never a private engine name.
"""

from __future__ import annotations

from ._api import explain, smooth, weights
from ._dispatch import ENGINES, Explanation
from ._empty import EMPTY_POLICIES
from ._state import SmoothState
from .dask._detect import any_dask, is_dask
from .features import RandomFeatures

__all__ = ["EMPTY_POLICIES", "ENGINES", "Explanation", "RandomFeatures", "SmoothState",
           "any_dask", "explain", "is_dask", "smooth", "weights"]
