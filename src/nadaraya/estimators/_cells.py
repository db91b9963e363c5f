"""Leave-one-out CV of Nadaraya-Watson on mixed data, summed once per cell of levels.

With a product kernel ``K = Kc(x, x') L(u, u'; lambda)`` the continuous part
does not depend on the categorical ``lambda``: grouping the keys by their
*cell* (their combination of level codes, ``G`` cells that occur), the
leave-one-out sums at every training point are

    sum_{j != i} K_ij v_j = sum_g L(u_i, g; lambda) sum_{j in g, j != i} Kc(x_i, x_j) v_j

so one engine pass at the continuous bandwidths (its values split by cell)
gives, for every ``lambda``, the criterion in ``O(n G)`` operations. A coordinate search
moves one bandwidth at a time; its moves along a categorical ``lambda`` then
cost no kernel sums at all, and its moves along a continuous ``h`` run the
continuous kernel alone (the fast exact engines), not the product kernel.

The pass uses the leave-one-out mask, so nothing is subtracted, and each
cell's sums are kept as a log-sum (``lse``) and a mean, combined in the log
domain. It applies to the ``cv`` criterion of a local
constant fit without sample weights, masks or tolerances, with at most
:data:`MAX_CELLS` cells; :func:`cell_objective` says when.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..engine import smooth
from ..kernels import RADIAL, AitchisonAitken
from ..masks import LeaveOneOut
from ._loo import LooFit, criterion_value
from ._mixed import MixedTypes

__all__ = ["MAX_CELLS", "CellObjective", "cell_objective"]

#: Most cells of levels for which the criterion is summed by cells.
MAX_CELLS = 64


class CellObjective:
    """The ``cv`` criterion as a function of the bandwidths ``h`` (one per feature).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training points, categorical features as level codes.
    Y : ndarray of shape (n, p)
    mixed : MixedTypes
    kernel : str
        The continuous kernel's name.
    cells : ndarray of shape (n,)
        The cell of each row; ``levels`` of shape (G, k) the codes of each
        cell for the ``k`` categorical features.
    """

    def __init__(self, X: np.ndarray, Y: np.ndarray, mixed: MixedTypes, kernel: str,
                 cells: np.ndarray, levels: np.ndarray) -> None:
        self.X, self.Y, self.mixed, self.kernel = X, Y, mixed, kernel
        self.cells, self.levels = cells, levels
        self.discrete = np.flatnonzero(mixed.discrete)
        self._key: Any = None
        self._sums: tuple[np.ndarray, np.ndarray] | None = None

    def _cell_sums(self, h: np.ndarray, cont: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``lse`` (n, G) and means (n, G, p) of each cell's keys at every training point.

        One leave-one-out pass whose values are ``[Y, 1]`` placed in the
        columns of the key's cell (zero elsewhere): a column sums the terms
        of one cell only, so each cell keeps its relative precision.
        """
        n, G, p = self.X.shape[0], self.levels.shape[0], self.Y.shape[1]
        values = np.zeros((n, G, p + 1))
        values[np.arange(n), self.cells, :p] = self.Y
        values[np.arange(n), self.cells, p] = 1.0
        if cont:
            kern = RADIAL[self.kernel](h[cont])
            Xc = self.X[:, cont]
            m, s = smooth(Xc, Xc, values.reshape(n, -1), kern, LeaveOneOut(),
                          return_lse=True, empty="nan")
            m = np.asarray(m).reshape(n, G, p + 1)
            s = np.asarray(s)[:, None]
        else:  # no continuous kernel: every other key weighs one
            m = (values.sum(axis=0)[None] - values) / max(n - 1, 1)
            s = np.full((n, 1), np.log(max(n - 1, 1)) if n > 1 else -np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = m[:, :, p]
            lse = np.where(share > 0, s + np.log(share), -np.inf)
            mean = np.where((share > 0)[:, :, None], m[:, :, :p] / share[:, :, None], 0.0)
        return lse, mean

    def _log_levels(self, h: np.ndarray) -> np.ndarray:
        """``log L(u_i, g)`` of shape (n, G) at the lambdas of ``h``."""
        out = np.zeros((self.X.shape[0], self.levels.shape[0]))
        dropped = self.mixed.smoothed_out(h)
        for col, j in enumerate(self.discrete):
            if dropped[j]:
                continue  # a constant weight: it cancels in the mean
            cls = self.mixed._class(j)
            lam = float(h[j])
            kern = cls(lam, levels=int(self.mixed.levels[j])) if cls is AitchisonAitken \
                else cls(lam)
            gap = np.abs(self.X[:, j][:, None] - self.levels[None, :, col])
            with torch.no_grad():
                out += kern._of_gap(torch.as_tensor(gap, dtype=torch.float64)).numpy()
        return out

    def __call__(self, h: np.ndarray) -> float:
        h = np.asarray(h, dtype=float)
        dropped = self.mixed.smoothed_out(h)
        cont = [j for j in range(len(h)) if self.mixed.types[j] == "c" and not dropped[j]]
        key = tuple(h[cont])
        if key != self._key:
            self._sums, self._key = self._cell_sums(h, cont), key
        lse, mean = self._sums
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            logw = lse + self._log_levels(h)
            top = np.max(logw, axis=1, keepdims=True)
            w = np.exp(logw - np.where(np.isfinite(top), top, 0.0))
            loo = np.einsum("ng,ngp->np", w, mean) / w.sum(axis=1)[:, None]
        return criterion_value("cv", LooFit(loo), self.Y, None)


def cell_objective(est: Any, name: str, X: np.ndarray, Y: np.ndarray) -> CellObjective | None:
    """A :class:`CellObjective` for ``est`` on ``X``, or None where it does not apply."""
    mixed = getattr(est, "_mixed", None)
    if (mixed is None or name != "cv" or getattr(est, "degree", 0) != 0 or est._weighted
            or est.mask is not None or est._tolerance() is not None or est.engine != "auto"
            or not (isinstance(est.kernel, str) and est.kernel.lower() in RADIAL)):
        return None
    discrete = np.flatnonzero(mixed.discrete)
    levels, cells = np.unique(X[:, discrete], axis=0, return_inverse=True)
    if levels.shape[0] > MAX_CELLS or levels.shape[0] * 4 > X.shape[0]:
        return None
    return CellObjective(X, Y, mixed, est.kernel.lower(), cells.reshape(-1), levels)
