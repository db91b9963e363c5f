"""Converting an image's dtype on request (``--out-dtype``), by a stated rule.

Nothing is guessed: each pair of dtypes has one rule, scikit-image's
(``img_as_ubyte``, ``img_as_uint``, ``img_as_float``), with the float scale
given by the caller:

* integer to integer: the full scales map onto each other (uint8 ``x`` is
  uint16 ``257 x``; back, rounded);
* integer to float: divided by the integer full scale, so ``[0, 1]``;
* float to float: the values, cast;
* float to integer: ``[0, data_range]`` onto the integer full scale, rounded;
  ``data_range`` is 1.0 unless given (scikit-image's float images are in
  ``[0, 1]``). A value outside ``[0, data_range]`` is refused, not clipped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import NadarayaError

__all__ = ["OUT_DTYPES", "convert_dtype"]

OUT_DTYPES = ("uint8", "uint16", "float32", "float64")


def convert_dtype(image: Any, dtype: Any, data_range: float | None = None, *,
                  name: str = "dtype") -> np.ndarray:
    """``image`` in ``dtype`` by the rule of :mod:`nadaraya.image._dtype`.

    Parameters
    ----------
    image : ndarray of any shape
        uint8, uint16 or floating.
    dtype : {"uint8", "uint16", "float32", "float64"} or numpy dtype
    data_range : float, optional
        The float scale for float to integer (default 1.0).
    name : str
        How messages name ``dtype`` (``"--out-dtype"`` on the command line).

    Returns
    -------
    ndarray
        Same shape, in ``dtype``.

    Examples
    --------
    >>> import numpy as np
    >>> convert_dtype(np.array([0, 128, 255], np.uint8), "uint16").tolist()
    [0, 32896, 65535]
    >>> convert_dtype(np.array([0.0, 0.5, 1.0]), "uint8").tolist()
    [0, 128, 255]
    """
    try:
        target = np.dtype(dtype)
    except TypeError:
        target = None
    if target is None or target.name not in OUT_DTYPES:
        raise NadarayaError(f"{name} must be one of {', '.join(OUT_DTYPES)}; got {dtype!r}.")
    arr = np.asarray(image)
    if arr.dtype == target:
        return arr
    if arr.dtype.kind not in "uif":
        raise NadarayaError(f"the image has dtype {arr.dtype}; {name} converts integer and "
                            "float images.")
    if target.kind == "f":
        if arr.dtype.kind == "f":
            return arr.astype(target)
        return (arr.astype(np.float64) / np.iinfo(arr.dtype).max).astype(target)
    top = float(np.iinfo(target).max)
    if arr.dtype.kind in "ui":
        scaled = arr.astype(np.float64) * (top / np.iinfo(arr.dtype).max)
    else:
        scale = 1.0 if data_range is None else float(data_range)
        x = arr.astype(np.float64)
        bad = ~((x >= 0) & (x <= scale))
        if bad.any():
            raise NadarayaError(
                f"{name} {target.name}: {int(bad.sum())} value(s) of the float image lie "
                f"outside [0, {scale:g}] (from {np.nanmin(x):.4g} to {np.nanmax(x):.4g}); "
                f"float images map [0, data range] onto 0..{int(top)}. Give the data range "
                "(--data-range) that holds them, or keep the float dtype.")
        scaled = x * (top / scale)
    return np.clip(np.rint(scaled), 0, top).astype(target)
