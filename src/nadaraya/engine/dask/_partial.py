"""A partial result over some key chunks, with the range of their values: a monoid.

In memory, the values are divided column by column by a power of two
``2^e`` that brings the largest ``|v|`` into ``[1/2, 1)``
(:mod:`nadaraya.engine._scale`), and a mean is clamped into the values'
range. Over chunks, a block task cannot wait for the global ``e`` without
every key chunk being held until all have been read; so each block scales
by its own chunk's exponents, and :class:`Partial` carries the chunk's
largest ``|v|`` and range. Two partials merge by rescaling both sums to the
larger exponent (a multiplication by a power of two: exact) and merging
them (the engine state's rule, or the certified sums' addition).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._scale import times_power_of_two

__all__ = ["Partial", "exponents", "value_range"]


def exponents(top: torch.Tensor) -> torch.Tensor:
    """Per-column exponents ``e`` (int64) with ``top * 2^-e`` in ``[1/2, 1)``; 0 for 0."""
    return torch.frexp(top.to(torch.float64)).exponent.to(torch.int64)


def value_range(v: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Largest ``|v|``, least and largest value of each column of a chunk (float64)."""
    a = np.asarray(v)
    if a.shape[0] == 0:
        inf = torch.full((a.shape[1],), torch.inf, dtype=torch.float64)
        return torch.zeros_like(inf), inf, -inf
    if a.dtype.kind == "f" and a.dtype.isnative:
        with warnings.catch_warnings():
            # a chunk may be read-only (a memory map, an Arrow buffer): it is only read here
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            lo, hi = (x.to(torch.float64) for x in torch.aminmax(torch.from_numpy(a), dim=0))
    else:  # integers, booleans, other byte orders: NumPy's reductions (torch lacks some)
        lo, hi = (torch.from_numpy(x.astype(np.float64)) for x in (a.min(axis=0), a.max(axis=0)))
    return torch.maximum(-lo, hi), lo, hi


def _rescaled(part: Any, shift: torch.Tensor) -> Any:
    """``part`` with its value sums multiplied by ``2^shift`` (per column, ``shift <= 0``)."""
    if not bool((shift != 0).any()):
        return part
    fields = {"acc": times_power_of_two(part.acc, shift[None, :])}
    if hasattr(part, "acc_err"):
        fields["acc_err"] = times_power_of_two(part.acc_err, shift[None, :])
    return dataclasses.replace(part, **fields)


@dataclass
class Partial:
    """A partial result over disjoint key chunks, its value sums scaled by ``2^-exponents(top)``.

    Attributes
    ----------
    part : SmoothState or Sums
        The engine state, or a certified method's sums, over the keys seen.
    top, lo, hi : torch.Tensor of shape (p,), float64
        Largest ``|v|``, least and largest value of each column over those keys.
    """

    part: Any
    top: torch.Tensor
    lo: torch.Tensor
    hi: torch.Tensor

    @property
    def exponents(self) -> torch.Tensor:
        """The exponents ``e (p,)`` the value sums are divided by."""
        return exponents(self.top)

    def merge(self, other: Partial) -> Partial:
        """Combine two partials over disjoint key sets (exact: rescaling by powers of two)."""
        top = torch.maximum(self.top, other.top)
        e = exponents(top)
        a = _rescaled(self.part, self.exponents - e)
        b = _rescaled(other.part, other.exponents - e)
        return Partial(a.merge(b), top, torch.minimum(self.lo, other.lo),
                       torch.maximum(self.hi, other.hi))
