"""``--scheduler ADDRESS``: a Dask distributed client for the length of one command.

The client is Dask's scheduler only inside the ``with`` block: a connection
that fails leaves Dask's configuration as it was (a client that never
connected would otherwise stay the default, and every later computation in
the process would wait on it), and one that succeeds is closed and
unregistered on the way out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._errors import NadarayaError

__all__ = ["CONNECT_TIMEOUT", "scheduler"]

#: How long ``--scheduler`` waits for the scheduler to answer.
CONNECT_TIMEOUT = "10s"


@contextlib.contextmanager
def scheduler(address: str | None) -> Iterator[Any]:
    """Run the block on the Dask scheduler at ``address``; yields its client.

    Parameters
    ----------
    address : str or None
        A scheduler address such as ``tcp://host:8786``; None runs on Dask's
        current scheduler and yields None.

    Raises
    ------
    NadarayaError
        Naming ``--scheduler``, when distributed is missing or nothing answers at ``address``.
    """
    if address is None:
        yield None
        return
    try:
        import dask
        from distributed import Client
    except ImportError:  # pragma: no cover - the extra is installed in the test set-up
        raise NadarayaError("--scheduler needs Dask's distributed scheduler; install it with "
                            "pip install 'nadaraya[dask]'.") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise NadarayaError(
            f"--scheduler {address!r}: no Dask scheduler answered there ({reason}). Give the "
            "address a running scheduler prints (e.g. tcp://127.0.0.1:8786), or leave "
            "--scheduler out to run on this machine."
        ) from None
    with client, dask.config.set(scheduler=client):
        yield client
