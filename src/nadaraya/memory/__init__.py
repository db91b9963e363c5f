"""Associative memory: recall by smoothing over stored patterns.

:class:`AssociativeMemory` is the universal Hopfield network of Millidge et
al. (2022): a similarity (dot, cosine, Euclidean, Manhattan, or the whitened
dot product of linear regression) and a separation (softmax, max, identity,
power) chosen independently; one retrieval step is one call of
:func:`nadaraya.smooth` over the stored patterns. :func:`weight_matrices`
puts linear regression, Nadaraya-Watson and attention side by side as the
one form ``X M X^T``.
"""

from __future__ import annotations

from ._compare import plot_weight_matrices, weight_matrices
from ._memory import SEPARATIONS, SIMILARITIES, AssociativeMemory, memory_kernel

__all__ = [
    "SEPARATIONS",
    "SIMILARITIES",
    "AssociativeMemory",
    "memory_kernel",
    "plot_weight_matrices",
    "weight_matrices",
]
