"""Masks: the visible set M(q) as a predicate on (query index, key index).

A mask is bound once to the sizes (and, for geometric masks, the points) of a
problem. Engines then ask the bound mask for a block's visibility, whether a
block is fully visible or fully hidden (so such blocks cost nothing), the
visibility of given (query, key) pairs, or, for sparse masks, the candidate
keys of every query.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._errors import NadarayaError
from ._candidates import Candidates, merge_lists

__all__ = ["And", "BoundMask", "Candidates", "Mask", "Or", "Predicate", "Visibility"]


class Visibility(enum.Enum):
    """How much of a block a mask lets through."""

    FULL = "full"
    EMPTY = "empty"
    PARTIAL = "partial"


@dataclass
class Problem:
    """What a mask may look at when it is bound: sizes, raw points, leading dimensions.

    ``lead`` is the ``(..., heads)`` shape of problems bound together (one
    binding for every attention head); masks that read the batch and head
    index (:class:`~nadaraya.masks.MaskMod`) give blocks ``(*lead, mb, nb)``,
    or any shape that broadcasts to it.
    """

    n_queries: int
    n_keys: int
    queries: torch.Tensor
    keys: torch.Tensor
    lead: tuple[int, ...] = ()


class Mask:
    """Base class: combine masks with ``&`` (both) and ``|`` (either)."""

    name = "mask"

    def __and__(self, other: Mask) -> Mask:
        if not isinstance(other, Mask):
            return NotImplemented
        return And(self, other)

    def __or__(self, other: Mask) -> Mask:
        if not isinstance(other, Mask):
            return NotImplemented
        return Or(self, other)

    def bind(self, problem: Problem) -> BoundMask:
        """Bind to a problem's sizes and points."""
        return BoundMask(self, problem)

    @property
    def reads_index(self) -> bool:
        """Whether visibility depends on the (batch, head) index of the problem."""
        return False

    def at(self, lead: tuple[int, ...], index: int) -> Mask:
        """This mask for the one problem of flat index ``index`` among ``lead``."""
        return self

    # -- to implement on bound data ---------------------------------------
    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        """Visibility ``(mb, nb)`` of a block, as a bool tensor."""
        raise NotImplementedError

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        return Visibility.PARTIAL

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Visibility ``(mb, K)`` of keys ``index[i]`` for queries ``rows[i]``."""
        return self._predicate(bound, rows[:, None], index)

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """Visibility of broadcastable index tensors ``i`` (queries), ``j`` (keys)."""
        raise NotImplementedError

    def _candidates(self, bound: BoundMask) -> Candidates | None:
        return None

    def _prepare(self, bound: BoundMask) -> None:
        """Compute what the bound mask needs (a neighbour table, for example)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._params()})"

    def _params(self) -> str:
        return ""


class BoundMask:
    """A mask bound to one problem."""

    def __init__(self, mask: Mask, problem: Problem) -> None:
        self.mask = mask
        self.problem = problem
        self.state: dict[str, object] = {}
        mask._prepare(self)

    @property
    def device(self) -> torch.device:
        return self.problem.queries.device

    def block(self, rows: slice, cols: slice) -> torch.Tensor:
        """Bool ``(mb, nb)``: which keys ``cols`` each query ``rows`` sees."""
        return self.mask._block(self, rows, cols)

    def status(self, rows: slice, cols: slice) -> Visibility:
        """Whether a block is fully visible, fully hidden, or mixed."""
        return self.mask._status(self, rows, cols)

    def pairs(self, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Bool ``(mb, K)``: visibility of key ``index[i, t]`` for query ``rows[i]``."""
        return self.mask._pairs(self, rows, index)

    def candidates(self) -> Candidates | None:
        """The keys each query may see, for sparse masks; None for dense ones."""
        return self.mask._candidates(self)


def _aranges(bound: BoundMask, rows: slice, cols: slice) -> tuple[torch.Tensor, torch.Tensor]:
    dev = bound.device
    i = torch.arange(rows.start, rows.stop, device=dev)[:, None]
    j = torch.arange(cols.start, cols.stop, device=dev)[None, :]
    return i, j


class IndexMask(Mask):
    """A mask defined by a vectorized predicate on indices."""

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        i, j = _aranges(bound, rows, cols)
        return torch.broadcast_to(self._predicate(bound, i, j), (i.shape[0], j.shape[1]))


class Predicate(IndexMask):
    """A mask from ``fn(i, j) -> bool``, vectorized over index tensors.

    Parameters
    ----------
    fn : callable
        Takes query indices ``i`` of shape ``(mb, 1)`` and key indices ``j``
        of shape ``(1, nb)`` (int64 tensors) and returns a bool tensor that
        broadcasts to ``(mb, nb)``, like FlexAttention's ``mask_mod``.

    Examples
    --------
    >>> from nadaraya.masks import Predicate
    >>> even = Predicate(lambda i, j: (j % 2) == 0)
    """

    name = "predicate"

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        if not callable(fn):
            raise NadarayaError(f"mask predicate must be callable; got {type(fn).__name__}.")
        self.fn = fn

    def _predicate(self, bound: BoundMask, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        out = torch.as_tensor(self.fn(i, j), device=i.device)
        if out.dtype != torch.bool:
            raise NadarayaError(
                f"mask predicate must return a bool tensor; got dtype {out.dtype}. "
                "Return a comparison such as (j <= i)."
            )
        try:
            return torch.broadcast_to(out, torch.broadcast_shapes(i.shape, j.shape))
        except RuntimeError:
            raise NadarayaError(
                f"mask predicate returned shape {tuple(out.shape)}, which does not broadcast "
                f"to {tuple(torch.broadcast_shapes(i.shape, j.shape))}."
            ) from None

    def _params(self) -> str:
        return getattr(self.fn, "__name__", "fn")


class _Binary(Mask):
    def __init__(self, left: Mask, right: Mask) -> None:
        self.left, self.right = left, right

    def _prepare(self, bound: BoundMask) -> None:
        bound.state["left"] = BoundMask(self.left, bound.problem)
        bound.state["right"] = BoundMask(self.right, bound.problem)

    @staticmethod
    def _sides(bound: BoundMask) -> tuple[BoundMask, BoundMask]:
        return bound.state["left"], bound.state["right"]  # type: ignore[return-value]

    def _params(self) -> str:
        return f"{self.left!r}, {self.right!r}"

    @property
    def reads_index(self) -> bool:
        return self.left.reads_index or self.right.reads_index

    def at(self, lead: tuple[int, ...], index: int) -> Mask:
        if not self.reads_index:
            return self
        return type(self)(self.left.at(lead, index), self.right.at(lead, index))


class And(_Binary):
    """Keys visible to both masks."""

    name = "and"

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        left, right = self._sides(bound)
        return left.block(rows, cols) & right.block(rows, cols)

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        a, b = (s.status(rows, cols) for s in self._sides(bound))
        if Visibility.EMPTY in (a, b):
            return Visibility.EMPTY
        if a is b is Visibility.FULL:
            return Visibility.FULL
        return Visibility.PARTIAL

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        left, right = self._sides(bound)
        return left.pairs(rows, index) & right.pairs(rows, index)

    def _candidates(self, bound: BoundMask) -> Candidates | None:
        left, right = self._sides(bound)
        for first, other in ((left, right), (right, left)):
            cand = first.candidates()
            if cand is not None:
                return _filtered(cand, other)
        return None

    def __repr__(self) -> str:
        return f"({self.left!r} & {self.right!r})"


class Or(_Binary):
    """Keys visible to either mask."""

    name = "or"

    def _block(self, bound: BoundMask, rows: slice, cols: slice) -> torch.Tensor:
        left, right = self._sides(bound)
        return left.block(rows, cols) | right.block(rows, cols)

    def _status(self, bound: BoundMask, rows: slice, cols: slice) -> Visibility:
        a, b = (s.status(rows, cols) for s in self._sides(bound))
        if Visibility.FULL in (a, b):
            return Visibility.FULL
        if a is b is Visibility.EMPTY:
            return Visibility.EMPTY
        return Visibility.PARTIAL

    def _pairs(self, bound: BoundMask, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        left, right = self._sides(bound)
        return left.pairs(rows, index) | right.pairs(rows, index)

    def _candidates(self, bound: BoundMask) -> Candidates | None:
        left, right = self._sides(bound)
        a, b = left.candidates(), right.candidates()
        if a is None or b is None:
            return None

        def fetch(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return merge_lists(a.rows(rows), b.rows(rows))

        return Candidates(a.n_rows, a.width + b.width, fetch, a.count + b.count,
                          order=a.order if a.order is not None else b.order, device=a.device)

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


def _filtered(cand: Candidates, other: BoundMask) -> Candidates:
    """``cand`` with the pairs ``other`` hides marked invalid (the count is an upper bound)."""

    def fetch(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index, valid = cand.rows(rows)
        return index, valid & other.pairs(rows, index)

    return Candidates(cand.n_rows, cand.width, fetch, cand.count, order=cand.order,
                      device=cand.device)
