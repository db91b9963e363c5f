"""The sweeps' compiled loops seen from Python: loading them and declaring their signatures.

Three C files sit beside this module: ``order.c`` (sorting), ``expsweep.c``
(poly x exp kernels) and ``window.c`` (compact kernels). Every array crosses
as a pointer to contiguous float64, int32 or int64 memory that the caller
keeps alive for the call (a sorted order as None: the identity).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from .. import native

__all__ = ["SOURCES", "load", "pointer", "unavailable"]

_HERE = Path(__file__).parent
SOURCES = {name: _HERE / f"{name}.c" for name in ("order", "expsweep", "window")}

_P, _I, _D, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double, ctypes.c_int

_SIGNATURES = {
    "order": {
        "nadaraya_is_sorted": ([_I, _P], _INT),
        "nadaraya_sort_rows": ([_I, _P, _P, _INT, _I, _P], _INT),
        "nadaraya_select": ([_I, _P, _D, _D, _INT, _INT, _P, _I, _P], _I),
        "nadaraya_search": ([_I, _P, _P, _INT, _I, _P, _INT, _P], None),
    },
    "expsweep": {
        "nadaraya_exp_neg": ([_I, _P, _P], None),
        "nadaraya_exp_finals": ([_I, _I, _INT, _D, _P, _P, _P, _INT, _I, _I, _I, _P, _P], _INT),
        "nadaraya_exp_carries": ([_I, _INT, _D, _P, _P, _I, _P, _P, _P, _P], None),
        "nadaraya_exp_eval": ([_I, _I, _INT, _D, _P, _P, _P, _P, _P, _P, _INT, _P, _I, _I, _I,
                               _I, _I, _I, _P, _P, _P, _P, _P, _P], _INT),
    },
    "window": {
        "nadaraya_window": ([_I, _I, _I, _INT, _INT, _INT, _P, _P, _P, _P, _P, _INT, _I, _I, _I,
                             _D, _P, _I, _P, _P], _I),
        "nadaraya_window_means": ([_I, _I, _P, _P], _I),
    },
}

_declared: dict[str, ctypes.CDLL] = {}


def load(name: str) -> ctypes.CDLL | None:
    """The compiled library ``name`` (a key of :data:`SOURCES`), or None without native code."""
    lib = native.library(SOURCES[name])
    if lib is None:
        return None
    if name not in _declared or _declared[name] is not lib:
        for fn, (args, result) in _SIGNATURES[name].items():
            getattr(lib, fn).argtypes = args
            getattr(lib, fn).restype = result
        _declared[name] = lib
    return lib


def unavailable() -> str | None:
    """Why some library cannot be loaded (None when all load)."""
    for name in SOURCES:
        if load(name) is None:
            return native.unavailable(SOURCES[name]) or "its compiled loops are unavailable"
    return None


def pointer(array: object) -> int | None:
    """The address of a contiguous NumPy array's data (None for None: a NULL pointer)."""
    if array is None:
        return None
    return array.ctypes.data  # type: ignore[attr-defined]
