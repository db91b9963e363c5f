"""Linear binning with FFT convolution (KernSmooth, KDEpy), certified per query.

The method ``"binned"`` (:class:`BinnedMethod`) computes both kernel sums for
radial kernels in 1 or 2 dimensions on a regular grid, and bounds each
query's error from its own neighbourhood; :mod:`._bound` derives the bound.
"""

from __future__ import annotations

from ._method import BinnedMethod

__all__ = ["BinnedMethod"]
