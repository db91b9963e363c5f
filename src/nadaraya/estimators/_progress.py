"""Progress reports of a bandwidth search, for command lines and notebooks.

Inside ``with search_progress(callback):`` every evaluation of a bandwidth
criterion calls ``callback(SearchStep)``; outside, nothing is reported and
nothing is slowed down.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["SearchStep", "report", "search_progress"]


@dataclass(frozen=True)
class SearchStep:
    """One evaluation of the criterion.

    Attributes
    ----------
    evaluation : int
        1 for the first evaluation of this search.
    bandwidth : ndarray of shape (n_features,)
        The bandwidth just evaluated.
    score : float
        Its criterion value.
    best_bandwidth : ndarray of shape (n_features,)
    best_score : float
        The best so far.
    """

    evaluation: int
    bandwidth: np.ndarray
    score: float
    best_bandwidth: np.ndarray
    best_score: float


_callback: contextvars.ContextVar[Callable[[SearchStep], None] | None] = \
    contextvars.ContextVar("nadaraya_search_progress", default=None)


@contextlib.contextmanager
def search_progress(callback: Callable[[SearchStep], None]) -> Iterator[None]:
    """Call ``callback`` with a :class:`SearchStep` after each criterion evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import NadarayaWatsonRegressor, search_progress
    >>> steps = []
    >>> x = np.linspace(0, 6, 50)[:, None]; y = np.sin(x[:, 0])
    >>> with search_progress(steps.append):
    ...     _ = NadarayaWatsonRegressor().fit(x, y)
    >>> steps[-1].evaluation == len(steps)
    True
    """
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def report(history: list[tuple[np.ndarray, float, int]]) -> None:
    """Tell the active callback (if any) about the last entry of ``history``."""
    callback = _callback.get()
    if callback is None or not history:
        return
    h, score, _ = history[-1]
    finite = [(s, i) for i, (_, s, _) in enumerate(history) if np.isfinite(s)]
    best = min(finite)[1] if finite else len(history) - 1
    callback(SearchStep(len(history), h, score, history[best][0], history[best][1]))
