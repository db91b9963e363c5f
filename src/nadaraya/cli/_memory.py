"""Refusing, before the work starts, a job whose arrays cannot fit in this machine's memory.

The commands estimate a lower bound of the bytes a job needs from its
options; when even that exceeds the machine's physical memory the job could
only fail later (or be killed by the system), so it is refused at once with
a message naming the options. Allocation failures that still happen are
reported by :func:`nadaraya.cli.main` as one line.
"""

from __future__ import annotations

import os

from .._errors import NadarayaError

__all__ = ["check_memory", "physical_memory"]


def physical_memory() -> int | None:
    """Bytes of memory of this machine, or None when the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(needed: int, options: str) -> None:
    """Raise when ``needed`` bytes (a lower bound) exceed the machine's memory.

    Parameters
    ----------
    needed : int
        Bytes the job needs at least.
    options : str
        The options that set the size, with their values, for the message
        (``"--grid 1000000000000"``).

    Raises
    ------
    NadarayaError
        Naming ``options``, the bytes needed and the bytes available.
    """
    total = physical_memory()
    if total is not None and needed > total:
        raise NadarayaError(f"{options}: the job needs at least {needed / 2**30:.3g} GiB of "
                            f"memory; this machine has {total / 2**30:.3g} GiB. Give smaller "
                            "values.")
