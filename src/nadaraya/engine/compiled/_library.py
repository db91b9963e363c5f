"""The compiled dense loop (``dense.c``) seen from Python: loading it and calling it.

:func:`dense_state` is the whole interface of the engine to the C code: it
passes the prepared points, the values and the output arrays as pointers
(every tensor contiguous, on the CPU, in the job's dtype) and checks the
result. The call releases the GIL, so threads run query blocks side by side.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from .. import native

__all__ = ["KERNELS", "PAD", "SOURCE", "dense_state", "exp", "exp_fma", "isa", "load",
           "unavailable"]

SOURCE = Path(__file__).with_name("dense.c")
# Kernel codes of dense.c.
KERNELS = {"gaussian": 0, "laplacian": 1, "softmax": 2}
# Keys and values are passed padded to a multiple of this many columns (the widest vector).
PAD = 16

_P = ctypes.c_void_p
_I = ctypes.c_int64


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    for suffix, real in (("f64", ctypes.c_double), ("f32", ctypes.c_float)):
        dense = getattr(lib, f"nadaraya_dense_{suffix}")
        dense.argtypes = [ctypes.c_int, ctypes.c_int, _I, _I, _I, _I, _P, _P, _I, _P, _P, real,
                          _P, _P, _P]
        dense.restype = ctypes.c_int
        probe = getattr(lib, f"nadaraya_exp_fma_{suffix}")
        probe.argtypes = [_P, _P, _I, _I, _P]
        probe.restype = None
        exp = getattr(lib, f"nadaraya_exp_{suffix}")
        exp.argtypes = [_P, _I, _P]
        exp.restype = None
    lib.nadaraya_dense_isa.argtypes = []
    lib.nadaraya_dense_isa.restype = ctypes.c_char_p
    return lib


_declared: dict[int, ctypes.CDLL] = {}


def load() -> ctypes.CDLL | None:
    """The compiled library, or None where native code is unavailable (see :func:`unavailable`)."""
    lib = native.library(SOURCE)
    if lib is None:
        return None
    key = id(lib)
    if key not in _declared:
        _declared[key] = _declare(lib)
    return _declared[key]


def unavailable() -> str | None:
    """Why :func:`load` gave None."""
    return native.unavailable(SOURCE)


def isa() -> str:
    """The instruction set the loaded library was compiled for."""
    lib = load()
    return "none" if lib is None else lib.nadaraya_dense_isa().decode()


def _suffix(dtype: torch.dtype) -> str:
    return {torch.float64: "f64", torch.float32: "f32"}[dtype]


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def dense_state(kernel: int, exact: bool, q: torch.Tensor, kt: torch.Tensor, vt: torch.Tensor,
                n: int, ldk: int, hide: torch.Tensor | None,
                floor: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The online log-sum-exp state of queries ``q`` over the first ``n`` keys.

    Parameters
    ----------
    kernel : int
        A code of :data:`KERNELS`.
    exact : bool
        Offsets from each key block's largest score (True) or from its
        bounding box (False, cheaper).
    q : torch.Tensor of shape (rows, e)
        Prepared queries, contiguous.
    kt : torch.Tensor of shape (e, ...)
        Prepared keys transposed: row ``f`` holds feature ``f`` of every key,
        rows ``ldk`` apart. It may be a view that starts at a key range; the
        columns from its start up to ``n`` rounded up to a multiple of
        :data:`PAD` must exist (padding with finite numbers).
    vt : torch.Tensor of shape (p, ...)
        Values transposed, in the layout of ``kt``.
    n : int
        Keys to use: the first ``n`` columns of ``kt`` and ``vt``.
    ldk : int
        Row stride of ``kt`` and ``vt``, a multiple of :data:`PAD`.
    hide : torch.Tensor of shape (rows,), int64, or None
        The key (column of ``kt``) each query must not see; -1 or out of range for none.
    floor : float
        Lowest argument passed to ``exp`` (:func:`~nadaraya.engine._job.exp_floor`).

    Returns
    -------
    offset : torch.Tensor of shape (rows,), in the dtype of ``q``
    total : torch.Tensor of shape (rows,), float64
    acc : torch.Tensor of shape (rows, p), float64
    """
    lib = load()
    assert lib is not None, unavailable()
    rows, e = q.shape
    p = vt.shape[0]
    offset = torch.empty(rows, dtype=q.dtype)
    total = torch.empty(rows, dtype=torch.float64)
    acc = torch.empty(rows, p, dtype=torch.float64)
    fn = getattr(lib, f"nadaraya_dense_{_suffix(q.dtype)}")
    status = fn(kernel, int(exact), rows, n, e, p, _ptr(q), _ptr(kt), ldk, _ptr(vt),
                _ptr(hide), floor, _ptr(offset), _ptr(total), _ptr(acc))
    if status == -2:
        raise MemoryError(f"the compiled dense loop could not allocate its scratch (p={p})")
    if status != 0:
        raise ValueError(f"the compiled dense loop refused its arguments (rows={rows}, n={n}, "
                         f"e={e}, p={p}, ldk={ldk})")
    return offset, total, acc


def exp(x: torch.Tensor) -> torch.Tensor:
    """``exp`` of ``x`` as the loop computes it (1-D, contiguous, in ``[exp_floor, 0]``)."""
    lib = load()
    assert lib is not None, unavailable()
    out = torch.empty_like(x)
    getattr(lib, f"nadaraya_exp_{_suffix(x.dtype)}")(_ptr(x), x.numel(), _ptr(out))
    return out


def exp_fma(x: torch.Tensor, v: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Run the roofline probe: ``exp`` of ``x (4, count)`` accumulated against ``v (count,)``.

    The four rows are the query tile of every build; ``count`` is a multiple of
    :data:`PAD`; arguments lie in ``[exp_floor, 0]``. Returns the sums of the
    weights and of the weights times the values, over all ``repeats``.
    """
    assert x.shape[0] == 4 and x.shape[1] % PAD == 0 and x.is_contiguous()
    lib = load()
    assert lib is not None, unavailable()
    out = torch.zeros(2, dtype=torch.float64)
    getattr(lib, f"nadaraya_exp_fma_{_suffix(x.dtype)}")(
        _ptr(x), _ptr(v), x.shape[1], repeats, _ptr(out))
    return float(out[0]), float(out[1])
