"""Progress of the block-by-block filters, reported to whoever asked for it.

A caller (the command line's progress bar) installs a callback with
:func:`reporting`; the filters wrap the function they hand to
:func:`nadaraya.engine.grid.run_blocks` in :func:`tracked`, which reports each
finished block's pixel count. Blocks filtered inside another tracked block
(the pilot of a pipeline) are not counted twice; without a callback the
wrapper is the function itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["done", "reporting", "tracked"]

_callback: ContextVar[Callable[[int], None] | None] = ContextVar("nadaraya_progress",
                                                                 default=None)
_inside: ContextVar[bool] = ContextVar("nadaraya_progress_inside", default=False)


@contextlib.contextmanager
def reporting(callback: Callable[[int], None] | None) -> Iterator[None]:
    """Within the block, filters call ``callback(pixels)`` as blocks finish.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.image import bilateral
    >>> seen = []
    >>> with reporting(seen.append):
    ...     _ = bilateral(np.zeros((8, 9)), 0.1, 1.0)
    >>> sum(seen)
    72
    """
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def done(pixels: int) -> None:
    """Report ``pixels`` finished outside any block (a volume filtered whole)."""
    callback = _callback.get()
    if callback is not None and not _inside.get():
        callback(int(pixels))


def tracked(filter_block: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``filter_block`` (of a :class:`~nadaraya.engine.grid.Block`), reporting each block."""
    callback = _callback.get()
    if callback is None or _inside.get():
        return filter_block

    def run(block: Any) -> Any:
        token = _inside.set(True)
        try:
            result = filter_block(block)
        finally:
            _inside.reset(token)
        callback(block.size)
        return result

    return run
