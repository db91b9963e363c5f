"""Fixtures for the Dask engine: a process cluster (slow tests) and the synchronous scheduler.

Fast tests compute with ``scheduler="sync"`` (:func:`compute`), so a cluster
client made by a slow test of the same session never runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


def compute(*arrays: Any) -> Any:
    """Compute Dask arrays on the synchronous scheduler (one result, or a tuple)."""
    import dask

    out = dask.compute(*arrays, scheduler="sync")
    return out[0] if len(out) == 1 else out


def as_dask(x: np.ndarray, chunks: Any) -> Any:
    """``x`` as a Dask array with row chunks ``chunks`` (an int or a tuple of sizes)."""
    rows = chunks if isinstance(chunks, int) else tuple(chunks)
    return da.from_array(x, chunks=(rows,) + (-1,) * (x.ndim - 1))


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A Client on a LocalCluster of two worker processes with one thread each.

    Module-scoped: once its tests have run it closes, so it is no longer the default
    scheduler of the tests that follow.
    """
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit="1GiB")
    with cluster, distributed.Client(cluster) as c:
        yield c
