"""Recognising Dask collections without importing Dask.

A Dask array can only exist once ``dask.array`` has been imported, so the
check looks in :data:`sys.modules` and never loads Dask itself: ``import
nadaraya`` and in-memory calls stay free of it.
"""

from __future__ import annotations

import sys
from typing import Any

from ..._errors import NadarayaError

__all__ = ["any_dask", "import_dask", "is_dask"]


def is_dask(x: Any) -> bool:
    """Whether ``x`` is a Dask array, DataFrame or Series (a lazy Dask collection)."""
    if x is None or "dask" not in sys.modules:
        return False
    array = sys.modules.get("dask.array")
    if array is not None and isinstance(x, array.Array):
        return True
    return type(x).__module__.startswith("dask.") and hasattr(x, "to_dask_array")


def any_dask(*arrays: Any) -> bool:
    """Whether any of ``arrays`` is a Dask collection."""
    return any(is_dask(a) for a in arrays)


def import_dask() -> Any:
    """``dask.array``, or an error that says what to install."""
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - the extra is installed in the test set-up
        raise NadarayaError(
            "engine='dask' needs Dask; install it with pip install 'nadaraya[dask]' "
            "(dask[distributed])."
        ) from None
    return da
