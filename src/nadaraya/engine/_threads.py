"""Engines that run their own threads, with torch ops on one thread each.

On a busy machine, torch's own intra-op threads meet at a barrier after every
operation, and a descheduled thread stalls the others: small blocks can run
tens of times slower. Engines that split work into independent blocks run
them side by side in Python threads instead (torch releases the GIL), each
operation on one thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import torch

__all__ = ["map_blocks", "single_threaded_ops"]

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
_saved: list[int] = []  # torch's thread count while some call holds it at one


@contextlib.contextmanager
def single_threaded_ops() -> Iterator[int]:
    """Torch ops on one thread each; yields how many threads torch had.

    Calls from several threads at once restore the count once, when the last
    of them leaves.
    """
    with _lock:
        if not _saved:
            _saved.append(torch.get_num_threads())
            torch.set_num_threads(1)
        _saved.append(0)
        threads = _saved[0]
    try:
        yield threads
    finally:
        with _lock:
            _saved.pop()
            if len(_saved) == 1:
                torch.set_num_threads(_saved.pop())


def map_blocks(fn: Callable[[T], R], blocks: Iterable[T], *, device: torch.device) -> list[R]:
    """``[fn(b) for b in blocks]``, in threads on the CPU, in order.

    Parameters
    ----------
    fn : callable
        Work on one block; must not share mutable state with other blocks.
    blocks : iterable
        The blocks.
    device : torch.device
        Where the tensors live; off the CPU the blocks run in turn (the
        device queues the work itself).

    Returns
    -------
    list
        ``fn``'s results in the order of ``blocks``.
    """
    blocks = list(blocks)
    if device.type != "cpu" or len(blocks) < 2 or torch.get_num_threads() < 2:
        return [fn(b) for b in blocks]
    from concurrent.futures import ThreadPoolExecutor

    with single_threaded_ops() as threads:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(fn, blocks))
