"""Mixed data: continuous, unordered and ordered features in one product kernel.

A feature's type is a letter, as in statsmodels' ``var_type`` and R's np:
``'c'`` continuous, ``'u'`` unordered categorical, ``'o'`` ordered categorical.
Continuous features take the estimator's radial kernel with their bandwidth
``h``; an unordered feature takes ``ukernel`` and an ordered one ``okernel``
(see :mod:`nadaraya.kernels.discrete`) with their smoothing parameter
``lambda``; the kernel of the estimator is the product of these on their
columns (Li and Racine's product kernel for mixed data).

A categorical feature whose ``lambda`` is at the upper end of its range
(``1`` for the Li-Racine kernels, ``(c - 1) / c`` for Aitchison-Aitken with
``c`` levels) gives every level the same weight: it is smoothed out, irrelevant
to the fit (Hall, Li and Racine 2007), and left out of the kernel; so is a
feature with an infinite bandwidth. Wang-van Ryzin cannot smooth a feature
out (its ``lambda`` stays below 1, where a level apart still weighs half).

The bandwidth search runs on ``log h``; for a categorical feature on
``t = logit(lambda / upper)``, a pseudo-bandwidth ``e^t`` in
``[e^-12, e^12]`` (:data:`LOGIT_BOUND`) whose ends snap to ``lambda = 0``
(each level to itself) and to the upper end (smoothed out), so that the
coordinate search treats both kinds alike (:meth:`MixedTypes.from_search`).
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import NadarayaError
from ..kernels import RADIAL, AitchisonAitken, LiRacine, LiRacineOrdered, WangVanRyzin
from ._kernel import KernelSpec

__all__ = ["LOGIT_BOUND", "OKERNELS", "UKERNELS", "VAR_TYPES", "MixedTypes", "check_var_types",
           "mixed_types"]

VAR_TYPES = "cuo"
#: Kernels of unordered features, by name.
UKERNELS: dict[str, type] = {"aitchison-aitken": AitchisonAitken, "li-racine": LiRacine}
#: Kernels of ordered features, by name.
OKERNELS: dict[str, type] = {"li-racine": LiRacineOrdered, "wang-van-ryzin": WangVanRyzin}
#: The search on ``t = logit(lambda / upper)`` stays in ``[-LOGIT_BOUND, LOGIT_BOUND]``.
LOGIT_BOUND = 12.0


def check_var_types(var_types: Any, n_features: int) -> str | None:
    """``var_types`` as a string of ``'c'``, ``'u'``, ``'o'``, one per feature (None: not given)."""
    if var_types is None:
        return None
    if not isinstance(var_types, str) or set(var_types) - set(VAR_TYPES):
        raise NadarayaError(
            f"var_types must be a string of the letters 'c' (continuous), 'u' (unordered "
            f"categorical) and 'o' (ordered categorical), one per feature; got {var_types!r}. "
            "Pass e.g. var_types='cuo', or None to read the types from a DataFrame's dtypes."
        )
    if len(var_types) != n_features:
        raise NadarayaError(
            f"var_types has {len(var_types)} letter(s) but X has {n_features} feature(s); "
            "give one letter per feature, e.g. var_types="
            f"{('c' * n_features)!r}."
        )
    return var_types


def _check_name(value: Any, table: dict[str, type], param: str) -> type:
    cls = table.get(value) if isinstance(value, str) else None
    if cls is None:
        raise NadarayaError(
            f"{param} must be one of {', '.join(map(repr, table))}; got {value!r}."
        )
    return cls


@dataclass
class MixedTypes:
    """The types of the features and their categorical kernels, as fitted.

    Attributes
    ----------
    types : str
        One letter per feature (``'c'``, ``'u'``, ``'o'``).
    ukernel, okernel : str
        Names of the kernels of unordered and ordered features.
    levels : ndarray of shape (n_features,)
        Number of distinct codes of each feature among the training rows.
    """

    types: str
    ukernel: str
    okernel: str
    levels: np.ndarray

    @property
    def discrete(self) -> np.ndarray:
        """Whether each feature is categorical, shape ``(n_features,)``."""
        return np.array([t != "c" for t in self.types], dtype=bool)

    def _class(self, j: int) -> type:
        return UKERNELS[self.ukernel] if self.types[j] == "u" else OKERNELS[self.okernel]

    def _snaps(self, j: int) -> bool:
        """Whether the upper end of feature ``j``'s lambda smooths it out."""
        return self._class(j) is not WangVanRyzin

    def upper(self) -> np.ndarray:
        """Upper end of each feature's lambda (``inf`` for continuous features)."""
        out = np.full(len(self.types), np.inf)
        for j in np.flatnonzero(self.discrete):
            c = int(self.levels[j])
            out[j] = (c - 1) / c if self._class(j) is AitchisonAitken and c >= 2 else 1.0
        return out

    def smoothed_out(self, h: np.ndarray) -> np.ndarray:
        """Features the bandwidths ``h`` leave out of the kernel, shape ``(n_features,)``.

        An infinite ``h`` or ``lambda``, ``lambda`` at the upper end of its range
        (not for Wang-van Ryzin), or a categorical feature with one level.
        """
        out = ~np.isfinite(h)
        upper = self.upper()
        for j in np.flatnonzero(self.discrete):
            out[j] |= self.levels[j] < 2 or (self._snaps(j) and h[j] >= upper[j])
        return out

    # -- the search's coordinates --------------------------------------------
    def from_search(self, s: np.ndarray) -> np.ndarray:
        """Bandwidths (``h``, ``lambda``) from the search's pseudo-bandwidths ``s``.

        Continuous features keep theirs; a categorical one maps ``e^t`` to
        ``upper / (1 + e^-t)``, with the ends of ``[-LOGIT_BOUND, LOGIT_BOUND]``
        snapped to 0 and to ``upper`` (or ``inf``: a feature the search leaves out).
        """
        out = np.asarray(s, dtype=float).copy()
        upper = self.upper()
        for j in np.flatnonzero(self.discrete):
            if not np.isfinite(out[j]):
                out[j] = upper[j] if self._snaps(j) else np.inf
                continue
            t = math.log(out[j])
            if t <= -LOGIT_BOUND + 1e-9:
                out[j] = 0.0
            elif t >= LOGIT_BOUND - 1e-9 and self._snaps(j):
                out[j] = upper[j]
            else:
                out[j] = upper[j] / (1.0 + math.exp(-t))
        return out

    # -- checking and building ------------------------------------------------
    def check_bandwidth(self, h: Any, bandwidth: Any, kernel: Any) -> Any:
        """Refuse what a mixed kernel cannot take; return ``h`` (checked by the base)."""
        if not (isinstance(kernel, str) and kernel.lower() in RADIAL):
            raise NadarayaError(
                f"var_types={self.types!r} has categorical features, which need the "
                f"continuous kernel by name ('gaussian', 'epanechnikov', ...); got "
                f"kernel={kernel!r}. Pass a kernel name, or build the product kernel yourself "
                "(e.g. Gaussian(0.3).on([0]) * LiRacine(0.5).on([1])) with var_types=None."
            )
        if h is None or isinstance(h, str):
            if h is None or h not in ("cv", "gcv", "aicc"):
                raise NadarayaError(
                    f"bandwidth={bandwidth!r} gives no lambda for the categorical features "
                    f"of var_types={self.types!r}; pass bandwidth='cv' (or 'gcv', 'aicc'), or "
                    "one value per feature: h for continuous features, lambda for categorical "
                    "ones."
                )
            return h
        d = len(self.types)
        if h.ndim == 0 or h.size != d:
            raise NadarayaError(
                f"bandwidth={bandwidth!r}: with categorical features (var_types="
                f"{self.types!r}) give one value per feature, h for continuous features and "
                "lambda for categorical ones."
            )
        upper = self.upper()
        for j in range(d):
            if self.types[j] == "c":
                if not h[j] > 0:
                    raise NadarayaError(
                        f"bandwidth[{j}] is the bandwidth of continuous feature {j} and must "
                        f"be > 0 (inf smooths it out); got {h[j]!r}."
                    )
                continue
            closed = self._snaps(j)
            inside = 0 <= h[j] <= upper[j] if closed else 0 <= h[j] < upper[j]
            if not (inside or h[j] == np.inf or self.levels[j] < 2):
                raise NadarayaError(
                    f"bandwidth[{j}] is the lambda of categorical feature {j} "
                    f"({self._class(j).__name__}) and must be in [0, {upper[j]:g}"
                    f"{']' if closed else ')'} (or inf: smoothed out); got {h[j]!r}."
                )
        return h

    def kernel_spec(self, name: str, h: np.ndarray) -> KernelSpec:
        """The product kernel of radial ``name`` and the categorical kernels at ``h``."""
        h = np.asarray(h, dtype=float)
        out = self.smoothed_out(h)
        parts = []
        cont = [j for j in range(len(self.types)) if self.types[j] == "c" and not out[j]]
        if cont:
            parts.append(RADIAL[name](h[cont]).on(cont))
        radial = True  # log K(x, x) = 0: the Li-Racine kernels give weight 1 to a level's own
        for j in np.flatnonzero(self.discrete & ~out):
            cls = self._class(j)
            lam = float(h[j])
            if cls is AitchisonAitken:
                kern = cls(lam, levels=int(self.levels[j]))
            else:
                kern = cls(lam)
            radial &= cls in (LiRacine, LiRacineOrdered) or lam == 0.0
            parts.append(kern.on([int(j)]))
        if not parts:
            return KernelSpec(RADIAL["gaussian"](1.0).on([]), None, True)
        return KernelSpec(functools.reduce(operator.mul, parts), None, radial)


def mixed_types(types: str | None, ukernel: Any, okernel: Any, X: np.ndarray
                ) -> MixedTypes | None:
    """The :class:`MixedTypes` of training rows ``X`` (None when every feature is continuous)."""
    _check_name(ukernel, UKERNELS, "ukernel")
    _check_name(okernel, OKERNELS, "okernel")
    if types is None or set(types) <= {"c"}:
        return None
    levels = np.array([np.unique(X[:, j]).size if t != "c" else 0
                       for j, t in enumerate(types)])
    return MixedTypes(types, ukernel, okernel, levels)
