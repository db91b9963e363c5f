"""The estimators on Dask data: inputs made from NumPy arrays, computed synchronously."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("dask.array")

import dask


@pytest.fixture(autouse=True)
def _synchronous() -> Iterator[None]:
    """The default test run computes in this process, one task at a time."""
    with dask.config.set(scheduler="synchronous"):
        yield
