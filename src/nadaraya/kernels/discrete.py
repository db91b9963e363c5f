"""Kernels for categorical data: unordered and ordered levels, one column of codes each.

A categorical variable is one column of codes (any numbers for unordered levels,
integer ranks for ordered ones). Its kernel is a function of the gap
``g = |q - k|`` and of the smoothing parameter ``lambda`` (np and statsmodels call
it the variable's bandwidth, and so does this package: ``bandwidth=``):

* :class:`AitchisonAitken` (unordered): ``1 - lambda`` at ``g = 0``, else
  ``lambda / (c - 1)``; ``lambda`` in ``[0, (c - 1) / c]``;
* :class:`LiRacine` (unordered): ``1`` at ``g = 0``, else ``lambda``; ``lambda``
  in ``[0, 1]``;
* :class:`WangVanRyzin` (ordered): ``1 - lambda`` at ``g = 0``, else
  ``(1 - lambda) lambda^g / 2``; ``lambda`` in ``[0, 1)``;
* :class:`LiRacineOrdered` (ordered): ``lambda^g``; ``lambda`` in ``[0, 1]``.

(``c`` the number of levels.) Aitchison–Aitken and Wang–van Ryzin sum to one over
the levels (densities: statsmodels' ``KDEMultivariate``); the Li–Racine forms do
not need to, and at ``lambda = 1`` give every level the same weight: the variable is
smoothed out, irrelevant to the fit (Hall, Li and Racine 2007; statsmodels'
``KernelReg`` and R's ``npreg``). At ``lambda = 0`` only the query's own level has
weight. They compose with continuous kernels by ``*`` on column groups: the mixed
product kernel of Li and Racine is
``Gaussian(h).on([0]) * LiRacine(lam).on([1]) * LiRacineOrdered(mu).on([2])``.
"""

from __future__ import annotations

import math

import torch

from .._errors import NadarayaError
from ._bound import BoundKernel
from ._kernel import Kernel, select
from ._module import own_copy
from ._prepared import PreparedKernel

__all__ = ["AitchisonAitken", "DiscreteKernel", "LiRacine", "LiRacineOrdered", "WangVanRyzin"]


class DiscreteKernel(Kernel):
    """A kernel of one column of level codes: a function of the gap ``|q - k|``.

    Parameters
    ----------
    bandwidth : float
        The smoothing parameter ``lambda``, in the range of the kernel.

    Subclasses give the log-weight of a zero gap (:meth:`_same`) and of a
    positive one (:meth:`_apart`).
    """

    batched = True
    ordered = False
    upper = 1.0  # the largest lambda
    upper_open = False  # whether lambda must stay below upper

    def __init__(self, bandwidth: float) -> None:
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, int | float):
            raise NadarayaError(
                f"bandwidth (lambda) of {type(self).__name__} must be a number; got "
                f"{bandwidth!r}."
            )
        self.bandwidth = float(bandwidth)
        self._check_range(self.upper)

    def _check_range(self, upper: float) -> None:
        lam = self.bandwidth
        above = lam >= upper if self.upper_open else lam > upper
        if not math.isfinite(lam) or lam < 0 or above:
            bracket = ")" if self.upper_open else "]"
            raise NadarayaError(
                f"bandwidth (lambda) of {type(self).__name__} must be in [0, {upper:g}"
                f"{bracket}; got {lam!r}. 0 keeps each level to itself, the upper end "
                "smooths the levels together."
            )

    # -- the formula -----------------------------------------------------------
    def _same(self) -> float:
        """Log-weight of a zero gap."""
        raise NotImplementedError

    def _apart(self, gap: torch.Tensor) -> torch.Tensor:
        """Log-weights of positive gaps (same shape)."""
        raise NotImplementedError

    def _of_gap(self, gap: torch.Tensor) -> torch.Tensor:
        """Log-weights of gaps ``|q - k|`` of any shape."""
        apart = self._apart(gap.clamp(min=1.0))
        return torch.where(gap == 0, torch.full_like(gap, self._same()), apart)

    # -- coordinates -------------------------------------------------------------
    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        if q.shape[-1] != 1:
            raise NadarayaError(
                f"{type(self).__name__} reads one column of level codes; it sees "
                f"{q.shape[-1]}. Give each categorical variable its own kernel on its column "
                f"and multiply them, e.g. {type(self).__name__}(0.2).on([2]) * "
                f"{type(self).__name__}(0.2).on([3])."
            )
        if self.ordered:
            for name, x in (("queries", q), ("keys", k)):
                if x.numel() and not bool((x == torch.round(x)).all()):
                    raise NadarayaError(
                        f"{type(self).__name__} needs integer ranks of ordered levels in "
                        f"the {name}; got non-integer codes. Code the levels 0, 1, 2, ... "
                        "in their order (pandas: Series.cat.codes of an ordered categorical)."
                    )

    def _gap(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (q[..., :, None, 0] - k[..., None, :, 0]).abs()

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        return self._of_gap(self._gap(q, k))

    def _pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._of_gap((k[..., 0] - q[:, None, 0]).abs())

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return -self._gap(q, k)  # nearest: the same level, then the nearest code

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor:
        top = max(self._same(), float(self._apart(torch.ones((), dtype=torch.float64))))
        return q.new_full((q.shape[0],), top)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        return PreparedKernel(q, k, self._block, name=self.name)

    def _params(self) -> str:
        return f"bandwidth={self.bandwidth!r}"


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


class LiRacine(DiscreteKernel):
    """Unordered levels, Li and Racine's regression kernel: 1 on the query's level, lambda off it.

    ``lambda = 1`` smooths the variable out (it is irrelevant); ``0`` splits
    the data by level. statsmodels' ``aitchison_aitken_reg`` (``KernelReg``'s
    ``'u'``).

    Examples
    --------
    >>> import torch
    >>> from nadaraya.kernels import LiRacine
    >>> codes = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    >>> LiRacine(0.25).score(codes[:1], codes).exp()
    tensor([[1.0000, 0.2500, 0.2500]], dtype=torch.float64)
    """

    name = "li-racine"

    def _same(self) -> float:
        return 0.0

    def _apart(self, gap: torch.Tensor) -> torch.Tensor:
        return torch.full_like(gap, _log(self.bandwidth))


class LiRacineOrdered(DiscreteKernel):
    """Ordered levels, Li and Racine's regression kernel: ``lambda ** |q - k|``.

    statsmodels' ``wang_ryzin_reg`` (``KernelReg``'s ``'o'``). Codes are
    integer ranks.
    """

    name = "li-racine-ordered"
    ordered = True

    def _same(self) -> float:
        return 0.0

    def _apart(self, gap: torch.Tensor) -> torch.Tensor:
        return gap * _log(self.bandwidth)


class AitchisonAitken(DiscreteKernel):
    """Unordered levels (Aitchison and Aitken): ``1 - lambda`` at gap 0, else ``lambda / (c - 1)``.

    The weights of the ``c`` levels sum to one (a density over them).

    Parameters
    ----------
    bandwidth : float
        ``lambda`` in ``[0, (c - 1) / c]``; at the upper end every level
        weighs ``1 / c``.
    levels : int, optional
        The number of levels ``c``; default the number of distinct codes
        among the keys.
    """

    name = "aitchison-aitken"

    def __init__(self, bandwidth: float, levels: int | None = None) -> None:
        if levels is not None and (isinstance(levels, bool) or not isinstance(levels, int)
                                   or levels < 2):
            raise NadarayaError(f"levels must be an integer >= 2; got {levels!r}.")
        self.levels = levels
        super().__init__(bandwidth)
        if levels is not None:
            self._check_range((levels - 1) / levels)
        self._count = levels

    def _counted(self, k: torch.Tensor) -> AitchisonAitken:
        """This kernel, or a copy that knows the number of levels among the keys ``k``."""
        if self.levels is not None:
            return self
        count = int(torch.unique(k.detach()).numel()) if k.numel() else 0
        if count < 2:
            raise NadarayaError(
                "AitchisonAitken needs at least 2 levels; the keys hold "
                f"{count}. Pass levels= with the number of levels of the variable."
            )
        self._check_range((count - 1) / count)
        other = own_copy(self)  # binding never changes the kernel itself
        other.__dict__["_count"] = count
        return other

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        return Kernel.bind(self._counted(select(keys, self.columns)), queries, keys)

    def prepare(self, queries: torch.Tensor, keys: torch.Tensor) -> PreparedKernel:
        return Kernel.prepare(self._counted(select(keys, self.columns)), queries, keys)

    def _same(self) -> float:
        return _log(1.0 - self.bandwidth)

    def _apart(self, gap: torch.Tensor) -> torch.Tensor:
        count = self._count if self._count is not None else 2
        return torch.full_like(gap, _log(self.bandwidth / (count - 1)))

    def _params(self) -> str:
        extra = "" if self.levels is None else f", levels={self.levels}"
        return f"bandwidth={self.bandwidth!r}{extra}"


class WangVanRyzin(DiscreteKernel):
    """Ordered levels (Wang, van Ryzin): ``1 - lambda`` at gap 0, else ``(1 - lambda) lambda^g/2``.

    ``lambda`` in ``[0, 1)``; codes are integer ranks. statsmodels'
    ``wang_ryzin`` (``KDEMultivariate``'s ``'o'``).
    """

    name = "wang-van-ryzin"
    ordered = True
    upper_open = True

    def _same(self) -> float:
        return _log(1.0 - self.bandwidth)

    def _apart(self, gap: torch.Tensor) -> torch.Tensor:
        return _log(0.5 * (1.0 - self.bandwidth)) + gap * _log(self.bandwidth)
