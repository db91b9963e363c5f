"""Shared helpers of the compiled engine's tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya.engine.compiled import _library

from .._oracles import EPS32, FLOAT32_FACTOR, rel_err

# Float64 results are the float64 dense engine's to this relative error.
TOL64 = 1e-12


def needs_native() -> None:
    """Skip, saying why, where the compiled loop cannot be built or is switched off."""
    if _library.load() is None:
        pytest.skip(f"compiled engine unavailable: {_library.unavailable()}")


def as_dtype(arrays: tuple[Any, ...], dtype: str) -> tuple[Any, ...]:
    return tuple(None if a is None else np.asarray(a, dtype=dtype) for a in arrays)


def check_against_dense(queries: Any, keys: Any, values: Any, kernel: Any = "gaussian",
                        mask: Any = None, *, dtype: str = "float64",
                        **kwargs: Any) -> float:
    """The compiled engine's result and lse against the float64 dense engine's.

    Float64 must agree to :data:`TOL64` (relative to the values' size); float32
    within ``FLOAT32_FACTOR`` times the float32 dense engine's own error, or times
    the rounding of the scores themselves (eps32 times the largest ``|log sum K|``,
    about the scores' size: far from the keys a float32 score of -800 is only known
    to 5e-5, and the dense engine's error there is as much luck as accuracy).
    Returns the error of the smoothed values.
    """
    q, k, v = as_dtype((queries, keys, values), dtype)
    out, lse = nadaraya.smooth(q, k, v, kernel, mask, engine="compiled", return_lse=True,
                               empty="nan", **kwargs)
    ref, ref_lse = nadaraya.smooth(*as_dtype((q, k, v), "float64"), kernel, mask,
                                   engine="dense", return_lse=True, empty="nan", **kwargs)
    if dtype == "float64":
        tol = TOL64
    else:
        d32, l32 = nadaraya.smooth(q, k, v, kernel, mask, engine="dense", return_lse=True,
                                   empty="nan", **kwargs)
        finite = ref_lse[np.isfinite(ref_lse)]
        size = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        tol = FLOAT32_FACTOR * max(rel_err(d32, ref), rel_err(l32, ref_lse), EPS32 * size)
    err = rel_err(out, ref)
    assert err <= tol, f"values: error {err:.3g} > {tol:.3g}"
    lse_err = rel_err(lse, ref_lse)
    assert lse_err <= tol, f"lse: error {lse_err:.3g} > {tol:.3g}"
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(ref_lse))
    return err
