"""The two expansions the boxes can carry, behind one interface.

``hermite``: Hermite moments of the source boxes, translated into Taylor
coefficients at the target boxes (Greengard and Strain; bound in
:mod:`._bounds`). ``chebyshev``: weights anterpolated to Chebyshev nodes,
translated node to node, interpolated at the targets (bound in
:mod:`._chebyshev`). Both use the same compiled moments, passes and
evaluation; they differ in the polynomials of one coordinate, the
translation matrices, the decay weights of the bound and its factor ``E``.
For the same accuracy Chebyshev nodes need a lower order (the interpolant
is near-minimax over the box, the Taylor polynomial exact only at its
centre), which pays in 2 and 3 dimensions; the planner takes whichever
models faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import _chebyshev, _hermite
from ._bounds import CRAMER, expansion_factor

__all__ = ["BASES", "Basis"]


@dataclass(frozen=True)
class Basis:
    """One expansion: ``"hermite"`` or ``"chebyshev"``."""

    name: str

    @property
    def description(self) -> str:
        if self.name == "hermite":
            return "Hermite moments -> Taylor coefficients (Greengard-Strain)"
        return "Chebyshev anterpolation -> node-to-node translation -> interpolation"

    def nodes(self, order: int, side: float) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(eta, wbar)`` for the compiled loops (None: Taylor powers)."""
        return None if self.name == "hermite" else _chebyshev.nodes(order, side)

    def translation(self, reach: int, order: int, side: float) -> torch.Tensor:
        """The pass matrices ``(2K + 1, p, p)``."""
        if self.name == "hermite":
            return _hermite.translation(reach, order, side)
        return _chebyshev.translation(reach, order, side)

    def decay(self, reach: int, side: float) -> torch.Tensor:
        """The bound's weight of each offset, ``(2K + 1, 1, 1)``, rounded up."""
        if self.name == "hermite":
            return _hermite.window_weights(reach, side, gaussian=True)
        return _chebyshev.decay_weights(reach, side)

    def factor(self, side: float, order: int, d: int, reach: int, most: int) -> float:
        """``E``: the bound per unit of decay-weighted mass."""
        if self.name == "hermite":
            return expansion_factor(side, order, d, reach, most)
        return _chebyshev.factor(side, order, d, reach, most)

    def bulk_ratio(self, side: float, reach: int, d: int) -> float:
        """Decay-weighted mass over the total, for a query amid keys of uniform density."""
        per = side * float(self.decay(reach, side).sum())
        return (per / math.sqrt(2 * math.pi)) ** d

    def order_floor(self, side: float, d: int, target: float) -> int:
        """An order below which ``E`` cannot meet ``target`` (cheap; skips hopeless orders)."""
        for p in range(2, 200):
            if self.name == "hermite":
                first = (side / 2) ** p / math.sqrt(math.factorial(p))
            else:
                first = 2 * (side / 4) ** p * CRAMER / math.sqrt(math.factorial(p))
            if first <= target:
                return p
        return 200


BASES = (Basis("hermite"), Basis("chebyshev"))
