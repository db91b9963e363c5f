"""Engines that run their own threads, with torch ops on one thread each.

On a busy machine, torch's own intra-op threads meet at a barrier after every
operation, and a descheduled thread stalls the others: small blocks can run
tens of times slower. Engines that split work into independent blocks run
them side by side in Python threads instead (torch releases the GIL), each
operation on one thread.

Torch keeps its thread count in two places: a count per thread, and a
process-wide default that a thread takes when it first runs an operation;
``torch.set_num_threads`` sets both. So the worker threads here are made once
and kept: each sets its own count to one when it starts, and the default is
put back at once. Calls never change the calling thread's count nor, after the
workers' start, the default: a thread's count is the same after a call as
before it, whatever other threads do meanwhile.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import torch

__all__ = ["map_blocks", "on_worker"]

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_size = 0
_worker = threading.local()


def _in_new_thread(fn: Callable[[], R]) -> R:
    """``fn()`` in a short-lived thread: it changes no other thread's own count."""
    box: list[R] = []
    thread = threading.Thread(target=lambda: box.append(fn()), name="nadaraya-threads")
    thread.start()
    thread.join()
    return box[0]


def _start_worker(ready: threading.Barrier) -> None:
    torch.get_num_threads()  # take the default now, so that it is never taken again
    torch.set_num_threads(1)
    _worker.active = True
    ready.wait()


def _workers(size: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``size`` started workers."""
    global _pool, _size
    with _lock:
        if _pool is None or _size < size:
            default = _in_new_thread(torch.get_num_threads)
            ready = threading.Barrier(size + 1)
            pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="nadaraya",
                                      initializer=_start_worker, initargs=(ready,))
            # start every worker now (each waits for the others), then put the default back
            for _ in range(size):
                pool.submit(int)
            ready.wait()
            _in_new_thread(lambda: torch.set_num_threads(default))
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _size = pool, size
        return _pool


def _forget_workers() -> None:  # in a forked child the workers do not exist
    global _pool, _size, _lock
    _pool, _size, _lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)


def _serial(device: torch.device) -> bool:
    return (device.type != "cpu" or torch.get_num_threads() < 2
            or getattr(_worker, "active", False))


def on_worker(fn: Callable[[], R], *, device: torch.device) -> R:
    """``fn()`` on one worker thread (torch ops on one thread), in the caller's context.

    For work that runs beside another thread of its own (say a tree walk
    prefetched in the background). Off the CPU, or with one thread, it runs
    here.
    """
    if _serial(device):
        return fn()
    return _workers(1).submit(contextvars.copy_context().run, fn).result()


def map_blocks(fn: Callable[[T], R], blocks: Iterable[T], *, device: torch.device) -> list[R]:
    """``[fn(b) for b in blocks]``, in threads on the CPU, in order.

    At most as many blocks run at once as torch's thread count in the calling
    thread, each on a worker whose torch ops use one thread, in the caller's
    configuration (:func:`nadaraya.config_context`). Called from a worker, it
    runs the blocks there in turn.

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
    if len(blocks) < 2 or _serial(device):
        return [fn(b) for b in blocks]
    threads = min(torch.get_num_threads(), len(blocks))
    results: list[R] = [None] * len(blocks)  # type: ignore[list-item]
    order = iter(range(len(blocks)))
    take = threading.Lock()
    failed = threading.Event()

    def drain() -> None:
        # each of the `threads` tasks takes the next block until none is left
        while not failed.is_set():
            with take:
                i = next(order, None)
            if i is None:
                return
            try:
                results[i] = fn(blocks[i])
            except BaseException:
                failed.set()
                raise

    pool = _workers(threads)
    futures: list[Future[None]] = [pool.submit(contextvars.copy_context().run, drain)
                                   for _ in range(threads)]
    for f in futures:
        f.result()
    return results
