"""The fast Gauss transform: Gaussian kernel sums in ``O(n + m)`` with a proven bound per query.

:class:`FastGaussTransform` (``"fgt"``) is a certified method (see
:mod:`nadaraya.engine.certified`): boxes of keys summarized by Hermite
moments (translated into Taylor coefficients at boxes of queries, Greengard
and Strain) or by weights on Chebyshev nodes (translated node to node and
interpolated), with direct sums where boxes hold few points. ``fgt.c`` holds
the loops; :mod:`._bounds` and :mod:`._chebyshev` the proofs of the bounds,
:mod:`._plan` the choice of parameters, :mod:`._transform` the run.
"""

from __future__ import annotations

from ._method import MAX_DIMENSIONS, MIN_TOLERANCE, FastGaussTransform

__all__ = ["MAX_DIMENSIONS", "MIN_TOLERANCE", "FastGaussTransform"]
