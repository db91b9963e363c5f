"""The caller's inputs as Dask arrays: checked, 2-D, keys and values chunked alike."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..._config import get_config
from ..._errors import NadarayaError
from ..._validation import as_input, compute_dtype
from ._detect import import_dask, is_dask

__all__ = ["Inputs", "chunk_rows", "prepare_inputs"]


def chunk_rows(width: int, itemsize: int) -> int:
    """Rows per chunk for in-memory inputs: a quarter of the working-memory budget.

    A block task holds a query chunk, a key chunk (with its values), one
    state and the in-memory engine's own blocks (within the budget), so
    chunks of a quarter of the budget keep a task within about twice it.
    """
    budget = get_config().working_memory * 2**20
    return max(1, int(budget // (4 * itemsize * max(width, 1))))


@dataclass
class Inputs:
    """Queries ``(m, d)``, keys ``(n, d)`` and values ``(n, p)`` as Dask arrays.

    Keys and values share their row chunks; every array has one column chunk.
    """

    queries: Any
    keys: Any
    values: Any
    squeeze: bool
    dtype: torch.dtype
    out_dtype: np.dtype

    @property
    def m(self) -> int:
        return int(self.queries.shape[0])

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    @property
    def p(self) -> int:
        return int(self.values.shape[1])

    def offsets(self, which: str) -> list[int]:
        """Global index of the first row of each chunk of ``"queries"`` or ``"keys"``."""
        chunks = getattr(self, which).chunks[0]
        return [0, *np.cumsum(chunks)[:-1].tolist()] if chunks else []


def _dask_array(x: Any, name: str) -> Any:
    """``x`` as a Dask array of numbers (a Dask DataFrame or Series is converted)."""
    da = import_dask()
    if not isinstance(x, da.Array):
        x = x.to_dask_array(lengths=True)
    if x.dtype.kind not in "biuf":
        raise NadarayaError(
            f"{name} must hold numbers; got a Dask array of dtype {x.dtype}. Convert it, "
            "e.g. with x.astype(float)."
        )
    if any(math.isnan(c) for axis in x.chunks for c in axis):
        raise NadarayaError(
            f"{name} is a Dask array with unknown chunk sizes {x.chunks}; the Dask engine "
            f"needs them to index the rows. Call {name}.compute_chunk_sizes() first, or "
            "build it with to_dask_array(lengths=True)."
        )
    return x


def _in_memory(x: Any, name: str) -> np.ndarray:
    arr = as_input(x, name)
    if isinstance(arr, torch.Tensor):
        arr = arr.detach().cpu().numpy()
    return arr


def _two_d(x: Any, name: str) -> Any:
    if x.ndim == 1:
        return x[:, None]
    if x.ndim != 2:
        raise NadarayaError(
            f"{name} must be 1-D (n,) or 2-D (n, d); got a Dask array of shape {x.shape}. "
            "Reshape it."
        )
    return x


def prepare_inputs(queries: Any, keys: Any, values: Any | None) -> Inputs:
    """Check the inputs and give them as aligned Dask arrays.

    In-memory inputs (NumPy, tensors, lists) are chunked by :func:`chunk_rows`;
    Dask inputs keep their row chunks (values take the keys'). Nothing is
    computed, except the partition lengths of a Dask DataFrame or Series.
    """
    da = import_dask()
    raw = {"queries": queries, "keys": keys, "values": values}
    arrays: dict[str, Any] = {}
    for name, x in raw.items():
        if x is None:
            continue
        arrays[name] = _dask_array(x, name) if is_dask(x) else _in_memory(x, name)
    dtypes = [compute_dtype(a.dtype) for a in arrays.values()]
    dtype = torch.float32 if dtypes and all(t == torch.float32 for t in dtypes) else torch.float64
    vals = arrays.get("values")
    out_dtype = (np.dtype(vals.dtype) if vals is not None and vals.dtype.kind == "f"
                 else np.dtype(np.float64))
    squeeze = vals is not None and vals.ndim == 1
    for name, x in arrays.items():
        if x.ndim == 0 or x.ndim > 2:
            raise NadarayaError(
                f"{name} must be 1-D (n,) or 2-D (n, d); got shape {tuple(x.shape)}. "
                "Reshape it."
            )
        if x.shape[0] == 0:
            raise NadarayaError(
                f"{name} is empty (shape {tuple(x.shape)}); give at least one row.")
    q, k = arrays["queries"], arrays["keys"]
    d = q.shape[1] if q.ndim == 2 else 1
    if (k.shape[1] if k.ndim == 2 else 1) != d:
        raise NadarayaError(
            f"queries have {d} feature(s) but keys have {k.shape[1] if k.ndim == 2 else 1}; "
            "both must have the same number of columns."
        )
    v = arrays.get("values")
    if v is None:
        v = np.zeros((k.shape[0], 0), dtype=np.float64)
    if v.shape[0] != k.shape[0]:
        raise NadarayaError(
            f"values have {v.shape[0]} row(s) but keys have {k.shape[0]}; "
            "give one value row per key."
        )
    itemsize = 4 if dtype == torch.float32 else 8
    p = v.shape[1] if v.ndim == 2 else 1
    if not isinstance(q, da.Array):
        q = da.from_array(q, chunks=(chunk_rows(d, itemsize),) + (-1,) * (q.ndim - 1))
    if not isinstance(k, da.Array):
        k = da.from_array(k, chunks=(chunk_rows(d + p, itemsize),) + (-1,) * (k.ndim - 1))
    q, k = _two_d(q, "queries").rechunk({1: -1}), _two_d(k, "keys").rechunk({1: -1})
    v = _two_d(v if isinstance(v, da.Array) else da.from_array(v), "values")
    v = v.rechunk({0: k.chunks[0], 1: -1})
    return Inputs(q, k, v, squeeze, dtype, out_dtype)
