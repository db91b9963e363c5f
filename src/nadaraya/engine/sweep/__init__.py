"""Exact sweeps in one dimension: O(n + m) kernel sums over sorted keys.

* :mod:`._exp`: kernels ``poly(t) exp(-t)`` (Laplacian, Matern 3/2 and 5/2) by
  Hofmeyr's recursions, carried from key to key with positive factors only;
* :mod:`._window`: compact polynomial kernels (Epanechnikov, tricube, uniform)
  by sliding-window sums that never subtract.

Both are exact up to rounding, with bounds stated in their modules, and run
in compiled loops (``expsweep.c``, ``window.c``, sorting in ``order.c``).
"""

from __future__ import annotations

from ._engine import SweepEngine, worth_it

__all__ = ["SweepEngine", "worth_it"]
