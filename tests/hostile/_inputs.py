"""Hostile inputs: hypothesis strategies and the contract every public call must keep.

The contract: a call either returns finite numbers of the promised shape, or
raises :class:`nadaraya.NadarayaError` whose message names the parameter at
fault. Any other exception (a traceback from torch, numpy or scikit-learn), a
NaN or infinity that the caller did not ask for, or a changed input, breaks it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nadaraya

#: numpy dtypes a caller may pass; the engines compute floats, ints and bools
NUMERIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "bool")
#: dtypes that must be refused with a NadarayaError naming the parameter
REFUSED_DTYPES = ("complex64", "complex128", "object", "U3", "datetime64[s]")
#: torch dtypes a caller may pass
TORCH_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32,
                torch.int64, torch.bool)


@dataclass
class Outcome:
    """What one call gave: a result, or a NadarayaError."""

    value: Any = None
    error: nadaraya.NadarayaError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def call(fn: Callable[[], Any], *, names: tuple[str, ...] = ()) -> Outcome:
    """Run ``fn``; a NadarayaError is an outcome, any other exception fails the test.

    With ``names``, an error message must mention at least one of them (the
    parameter at fault, in the caller's words).
    """
    try:
        return Outcome(value=fn())
    except nadaraya.NadarayaError as exc:
        message = str(exc)
        assert message and message[0].isprintable(), "an error needs a message"
        if names:
            assert any(re.search(rf"\b{re.escape(n)}\b", message) for n in names), (
                f"the message names none of {names}: {message}")
        return Outcome(error=exc)


def as_float64(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def assert_finite(x: Any, what: str) -> None:
    arr = as_float64(x)
    bad = ~np.isfinite(arr)
    assert not bad.any(), f"{what}: {int(bad.sum())} non-finite value(s) in the result"


# -- the operator, written out ------------------------------------------------------------
def naive_gaussian(queries: np.ndarray, keys: np.ndarray, values: np.ndarray,
                   bandwidth: float) -> np.ndarray:
    """Gaussian Nadaraya-Watson in float64, scaled so that no step overflows.

    Differences are divided by the bandwidth before squaring; weights are
    shifted by each row's largest score; values are divided by their largest
    magnitude before the sum and multiplied back after it, and the mean is kept
    within the values' range (as every weighted mean is). NaN where every
    weight underflows.
    """
    q = np.asarray(queries, np.float64).reshape(len(queries), -1)
    k = np.asarray(keys, np.float64).reshape(len(keys), -1)
    v = np.asarray(values, np.float64).reshape(len(values), -1)
    z = (q[:, None, :] / bandwidth - k[None, :, :] / bandwidth)
    s = -0.5 * np.sum(z * z, axis=2)
    top = s.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        w = np.exp(s - top)
    scale = np.abs(v).max(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    with np.errstate(over="ignore"):
        out = (w @ (v / scale)) / w.sum(axis=1, keepdims=True) * scale
    # a weighted mean lies between the smallest and the largest value: the rounding of the
    # sum must not carry values near the largest float past it (to inf)
    out = np.clip(out, v.min(axis=0), v.max(axis=0))
    out[~np.isfinite(top[:, 0])] = np.nan
    return out


# -- strategies ---------------------------------------------------------------------------
def magnitudes(dtype: str = "float64") -> st.SearchStrategy[int]:
    """Decimal exponents a finite value of ``dtype`` can carry, subnormals included."""
    info = np.finfo(dtype)
    low = math.floor(math.log10(float(info.smallest_subnormal)))
    return st.integers(low + 1, math.floor(math.log10(float(info.max))))


@st.composite
def point_sets(draw: st.DrawFn, *, dtype: str = "float64", max_rows: int = 12,
               max_cols: int = 4) -> tuple[np.ndarray, np.ndarray, float]:
    """Queries, keys and a bandwidth at one random scale (1e-300 to 1e300 in float64).

    The points are ``scale * u`` with ``u`` of order one, the bandwidth
    ``scale`` times a factor from 0.05 to 20, so that most weights are
    representable. (The scale stays clear of the subnormal range, where the
    points themselves would round; subnormal bandwidths are tested apart.)
    """
    d = draw(st.integers(1, max_cols))
    m, n = draw(st.integers(1, max_rows)), draw(st.integers(1, max_rows))
    info = np.finfo(dtype)
    exp = draw(st.integers(math.ceil(math.log10(float(info.tiny))) + 2,
                           math.floor(math.log10(float(info.max))) - 2))
    scale = 10.0 ** exp
    unit = st.floats(-3, 3, allow_nan=False, width=64)
    q = draw(hnp.arrays(np.float64, (m, d), elements=unit)) * scale
    k = draw(hnp.arrays(np.float64, (n, d), elements=unit)) * scale
    h = draw(st.floats(0.05, 20)) * scale
    return q.astype(dtype), k.astype(dtype), float(h)


@st.composite
def value_sets(draw: st.DrawFn, n: int, *, dtype: str = "float64") -> np.ndarray:
    """Values for ``n`` keys at any finite magnitude, up to the dtype's largest."""
    p = draw(st.integers(1, 3))
    info = np.finfo(dtype)
    kind = draw(st.sampled_from(["scaled", "huge", "tiny", "mixed"]))
    if kind == "huge":  # within a factor of two of the largest finite value
        signs = draw(hnp.arrays(np.float64, (n, p), elements=st.sampled_from([-1.0, 1.0])))
        mags = draw(hnp.arrays(np.float64, (n, p), elements=st.floats(0.5, 1.0)))
        return (signs * mags * float(info.max)).astype(dtype)
    if kind == "tiny":  # subnormal
        ints = draw(hnp.arrays(np.int64, (n, p), elements=st.integers(-50, 50)))
        return (ints * float(info.smallest_subnormal)).astype(dtype)
    exp = draw(magnitudes(dtype))
    unit = draw(hnp.arrays(np.float64, (n, p), elements=st.floats(-1, 1, width=64)))
    if kind == "mixed":
        spread = draw(hnp.arrays(np.float64, (n, p), elements=st.floats(-30, 30)))
        unit = unit * 10.0 ** spread
        return np.clip(unit * 10.0 ** min(exp, 200), -float(info.max),
                       float(info.max)).astype(dtype)
    return (unit * 10.0 ** exp).astype(dtype)


def poison(draw: st.DrawFn, arr: np.ndarray) -> np.ndarray:
    """``arr`` with one entry replaced by NaN, +inf or -inf."""
    out = np.array(arr, dtype=np.float64 if arr.dtype.kind != "f" else arr.dtype)
    flat = out.reshape(-1)
    i = draw(st.integers(0, flat.size - 1))
    flat[i] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return out


# -- the command line ---------------------------------------------------------------------
#: What Python prints before a traceback; it must never reach a user of the command line.
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class CliRun:
    """What one in-process run of ``nadaraya.cli.main`` gave."""

    argv: list[str]
    status: int | str | None
    out: bytes
    err: str

    @property
    def lines(self) -> list[str]:
        """Lines of standard error, without progress-bar redraws (they hold a carriage return)."""
        return [line for line in self.err.split("\n") if line.strip() and "\r" not in line]


def run_cli(argv: list[str]) -> CliRun:
    """Run ``nadaraya.cli.main(argv)`` with standard output and error captured.

    Standard output is a strict UTF-8 text stream over bytes, as a terminal's
    is; a usage error's :class:`SystemExit` becomes its status. Any other
    exception propagates: the contract forbids it.
    """
    import contextlib
    import io

    from nadaraya.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status: int | str | None = main(argv)
        except SystemExit as exc:
            status = exc.code
    out.flush()
    return CliRun(list(argv), status, out.buffer.getvalue(), err.getvalue())


def check_cli_contract(result: CliRun, *, names: tuple[str, ...] = ()) -> None:
    """The contract of every command: 0; or 1 and one line naming what is at fault; or 2.

    Exit status 1 comes with exactly one line on standard error,
    ``nadaraya <command>: error: ...``, which mentions one of ``names``
    when given (an option, a metavar, a file). Status 2 is argparse's usage
    error. No traceback in any case.
    """
    where = f"nadaraya {' '.join(map(ascii, result.argv))}"
    assert TRACEBACK not in result.err, f"{where} printed a traceback:\n{result.err}"
    assert result.status in (0, 1, 2), f"{where} exited with {result.status!r}:\n{result.err}"
    if result.status == 1:
        errors = [line for line in result.lines if ": error: " in line]
        assert len(result.lines) == 1 and len(errors) == 1, (
            f"{where} failed without exactly one error line:\n{result.err}")
        assert errors[0].startswith("nadaraya "), errors[0]
        if names:
            assert any(name and name in errors[0] for name in names), (
                f"{where}: the error names none of {names}: {errors[0]}")
    if result.status == 2:
        assert "usage:" in result.err and ": error: " in result.lines[-1], result.err


def temporaries(folder: Any) -> list[str]:
    """Files left in ``folder`` by an interrupted atomic write (``.<name>.<hex>.tmp<suffix>``)."""
    from pathlib import Path

    return sorted(p.name for p in Path(folder).iterdir() if re.match(r"\..*\.tmp", p.name))


# -- float64 as the oracle ----------------------------------------------------------------
def assert_like_float64(got: Any, ref: Any, perturbed: list[Any], *, eps: float, top: float,
                        tiny: float, what: str, floor: Any = 0.0, loose: Any = None,
                        headroom: float = 1.0, natural: Any = 0.0,
                        factor: float = 16.0) -> None:
    """``got`` (any dtype) keeps the contract against the float64 result ``ref``.

    ``perturbed`` are float64 results of the same problem with its numbers
    rounded once at random by ``eps`` (the caller decides which: inputs,
    scores, their derivatives): how far they move from ``ref`` is the
    problem's own sensitivity to rounding, the error any computation in a
    dtype of unit roundoff ``eps`` may make. Per row (last axis), the
    tolerance is ``factor`` times that movement, plus ``eps`` times the
    row's magnitude, the spacing of subnormals ``tiny`` and ``floor`` (an
    absolute error the caller allows, one number or one per row, such as
    ``eps`` times the natural scale of a gradient that vanishes in float64). ``got`` must be finite
    wherever ``ref`` lies that far inside the dtype's range (``headroom (|ref|
    + natural) + tol < top``, ``natural`` one number or one per row: a
    headroom above one and a natural scale allow the intermediate products
    of a chain rule to exceed the result), and within the tolerance of
    ``ref`` wherever both are finite.
    Rows marked ``loose`` (bool, one per row) are results the dtype cannot
    resolve: there ``got`` must only be finite where both ``|ref|`` and the
    row's natural scale ``floor / eps`` lie a ``factor`` inside the range.
    """
    g, r = as_float64(got), as_float64(ref)
    assert g.shape == r.shape, f"{what}: shape {g.shape}, expected {r.shape}"
    if r.size == 0:
        return
    with np.errstate(invalid="ignore", over="ignore"):
        rows = r.reshape(-1, r.shape[-1]) if r.ndim else r.reshape(1, 1)
        shape = rows.shape
        moved = np.zeros(shape)
        for p in perturbed:
            moved = np.maximum(moved, np.abs(as_float64(p).reshape(shape) - rows))
        moved = np.where(np.isnan(moved), np.inf, moved)
        scale = np.abs(np.where(np.isfinite(rows), rows, 0)).max(axis=1, keepdims=True)
        floor = np.asarray(floor, np.float64).reshape(-1, 1) if np.ndim(floor) else floor
        natural = (np.asarray(natural, np.float64).reshape(-1, 1) if np.ndim(natural)
                   else natural)
        tol = factor * (moved.max(axis=1, keepdims=True) + eps * scale + tiny + floor)
        tol = np.broadcast_to(np.where(np.isnan(tol), np.inf, tol), shape).copy()
        gr = g.reshape(shape)
        inside = np.isfinite(rows) & (headroom * (np.abs(rows) + natural) + tol < top)
        if loose is not None:
            blind = np.broadcast_to(np.asarray(loose, bool).reshape(-1, 1), shape)
            small = np.broadcast_to(factor * floor / eps < top, shape)
            inside = np.where(blind, np.isfinite(rows) & (factor * np.abs(rows) < top) & small,
                              inside)
            tol[blind] = np.inf
        bad = inside & ~np.isfinite(gr)
        assert not bad.any(), (
            f"{what}: {int(bad.sum())} non-finite value(s) where float64 gives "
            f"{rows[bad][:3]}")
        both = np.isfinite(rows) & np.isfinite(gr)
        err = np.where(both, np.abs(gr - rows), 0.0)
        worst = np.unravel_index(np.argmax(err - tol), shape)
        assert (err <= tol).all(), (
            f"{what}: error {err[worst]:.3g} > tolerance {tol[worst]:.3g} at row {worst[0]} "
            f"(got {gr[worst]!r}, float64 {rows[worst]!r})")
