"""Certified transforms: kernel sums in O(n + m) within a caller's tolerance, with a proof.

``smooth(..., tolerance=t)`` lets the dispatcher here choose a method (the
fast Gauss transform, binned sums with FFT) when it is cheaper than the
exact engines. Each method returns the sums with proven absolute bounds
(:class:`Sums`); every query's output bound is checked against ``t`` and the
few it does not prove are computed exactly (:mod:`._tolerance` gives the
arithmetic), so the promise holds for every output, not on average.
"""

from __future__ import annotations

from ._choose import METHODS, CertifiedChoice, choose_certified, get_methods
from ._run import certified_state, query_rows, state_of
from ._sums import Method, PreparedSums, Sums, block_rows, prepare_sums
from ._tolerance import check_tolerance, unproven_rows

__all__ = [
    "METHODS",
    "CertifiedChoice",
    "Method",
    "PreparedSums",
    "Sums",
    "block_rows",
    "certified_state",
    "check_tolerance",
    "choose_certified",
    "get_methods",
    "prepare_sums",
    "query_rows",
    "state_of",
    "unproven_rows",
]
