"""Global configuration: the working-memory budget and engine block sizes.

The budget is configuration, not an argument threaded through every call::

    with nadaraya.config_context(working_memory=64):   # MiB
        nadaraya.smooth(q, k, v)

The environment variable ``NADARAYA_WORKING_MEMORY`` (MiB) sets the default.

The configuration lives in a :mod:`contextvars` variable: a change made by
:func:`config_context` or :func:`set_config` holds in the thread (or asyncio
task) that made it, and in the threads an engine starts for that call; other
threads, and threads started by the caller, begin from the default.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ._errors import NadarayaError

__all__ = ["Config", "config_context", "get_config", "set_config"]

_ENV_MEMORY = "NADARAYA_WORKING_MEMORY"


@dataclass(frozen=True)
class Config:
    """Settings read by the engines.

    Attributes
    ----------
    working_memory : float
        Budget in MiB for the temporary blocks of one smoothing call (score
        blocks, neighbour lists). Inputs and outputs are not counted.
    key_block : int
        Preferred number of keys per block in the streamed engine.
    query_block : int
        Preferred number of queries per block in the streamed and fused engines.

    The default blocks (256 x 2048 scores, 2-4 MiB) stay in the processor's
    cache between the passes over a block, which halves the float64 time of
    blocks ten times larger; the working-memory budget only caps them.
    """

    working_memory: float = 256.0
    key_block: int = 2048
    query_block: int = 256


def _default() -> Config:
    raw = os.environ.get(_ENV_MEMORY)
    if raw is None:
        return Config()
    try:
        return _checked(Config(working_memory=float(raw)))
    except ValueError:  # not a number, or not a positive finite one
        raise NadarayaError(
            f"environment variable {_ENV_MEMORY} must be a positive number of MiB; "
            f"got {raw!r}. Set it to e.g. 256 or unset it."
        ) from None


def _checked(config: Config) -> Config:
    memory = config.working_memory
    if isinstance(memory, bool) or not isinstance(memory, numbers.Real) or not (
            0 < memory < math.inf):
        raise NadarayaError(
            f"working_memory must be a positive finite number of MiB; got {memory!r}. "
            "Pass e.g. config_context(working_memory=256)."
        )
    for name in ("key_block", "query_block"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise NadarayaError(f"{name} must be a positive integer; got {value!r}.")
    return config


_current: contextvars.ContextVar[Config | None] = contextvars.ContextVar(
    "nadaraya_config", default=None)


def get_config() -> Config:
    """Return the configuration in force in this thread (or context)."""
    config = _current.get()
    if config is None:
        config = _default()
        _current.set(config)
    return config


def set_config(**changes: Any) -> None:
    """Change the configuration of this thread (see :class:`Config` for the keys).

    Parameters
    ----------
    **changes
        ``working_memory`` (MiB), ``key_block``, ``query_block``; unknown keys are
        refused by name.
    """
    _current.set(_checked(replace(get_config(), **_known(changes))))


def _known(changes: dict[str, Any]) -> dict[str, Any]:
    unknown = set(changes) - set(Config.__dataclass_fields__)
    if unknown:
        raise NadarayaError(
            f"unknown configuration key(s) {sorted(unknown)}; "
            f"known keys are {sorted(Config.__dataclass_fields__)}."
        )
    return changes


@contextlib.contextmanager
def config_context(**changes: Any) -> Iterator[Config]:
    """Temporarily change the configuration.

    Parameters
    ----------
    **changes
        ``working_memory`` (MiB), ``key_block``, ``query_block``.

    Examples
    --------
    >>> import nadaraya
    >>> with nadaraya.config_context(working_memory=32) as cfg:
    ...     cfg.working_memory
    32
    """
    new = _checked(replace(get_config(), **_known(changes)))
    token = _current.set(new)
    try:
        yield new
    finally:
        _current.reset(token)


def block_elements(itemsize: int, buffers: int = 2) -> int:
    """Number of score elements one block may hold within the budget."""
    budget = get_config().working_memory * 2**20
    return max(1, int(budget // (itemsize * buffers)))
