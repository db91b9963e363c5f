"""Kernel regression from scattered samples onto a pixel grid.

Samples need not sit on pixels: each one is attached to its nearest pixel
with a sub-pixel shift, so the grid engine still loops over window offsets
(with the true displacement in the kernel). Pixels holding several samples
are split into layers, each a grid of at most one sample per pixel, whose
online log-sum-exp states merge exactly (:meth:`SmoothState.merge`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ..engine._grid import grid_smooth
from ..engine._lattice import window_offsets
from ..engine._state import SmoothState
from ..kernels.quadratic import classic_kernel, steering_kernel
from ._io import Image, check_positive, data_range_of
from ._poly import solve_moments
from .regression import check_order, default_radius
from .steering import steering_matrices

__all__ = ["reconstruct"]

METHODS = ("classic", "steering")


def _samples(points: Any, values: Any, shape: Any) -> tuple[torch.Tensor, Image, tuple[int, int]]:
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise NadarayaError(f"shape must be (height, width); got {shape!r}.") from None
    if len(shape) != 2 or min(shape) < 1:
        raise NadarayaError(f"shape must be two positive integers (height, width); got {shape}.")
    is_torch = isinstance(values, torch.Tensor)
    vals = values.detach() if is_torch else torch.from_numpy(np.ascontiguousarray(
        np.asarray(values)))
    if vals.dtype == torch.bool or vals.is_complex():
        raise NadarayaError("values must be real numbers.")
    in_dtype = values.dtype if is_torch else np.asarray(values).dtype
    if vals.ndim not in (1, 2):
        raise NadarayaError(
            f"values must have shape (n,) or (n, channels); got {tuple(vals.shape)}."
        )
    gray = vals.ndim == 1
    dtype = torch.float64 if vals.dtype == torch.float64 else torch.float32
    vals = (vals[:, None] if gray else vals).to(dtype)
    pts = points.detach() if isinstance(points, torch.Tensor) else torch.from_numpy(
        np.asarray(points, dtype=np.float64))
    pts = pts.to(dtype=torch.float64, device=vals.device)
    if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] != vals.shape[0]:
        raise NadarayaError(
            f"points must have shape (n, 2) as (row, column), one per value ({vals.shape[0]}); "
            f"got {tuple(pts.shape)}."
        )
    if pts.shape[0] == 0:
        raise NadarayaError("points is empty; give at least one sample.")
    for name, t in (("points", pts), ("values", vals)):
        if not bool(torch.isfinite(t).all()):
            raise NadarayaError(f"{name} contains NaN or infinity; drop those samples first.")
    lo = -0.5
    top = torch.tensor(shape, dtype=pts.dtype, device=pts.device) - 0.5
    if bool(((pts < lo) | (pts > top)).any()):
        raise NadarayaError(
            f"points must lie on the grid, rows in [-0.5, {shape[0] - 0.5}] and columns in "
            f"[-0.5, {shape[1] - 0.5}]; some are outside. Drop them or enlarge shape."
        )
    image = Image(vals.T.reshape(-1, 1, vals.shape[0]), gray, in_dtype, is_torch)
    return pts, image, shape


def _layers(pts: torch.Tensor, vals: torch.Tensor, shape: tuple[int, int]) -> list[dict]:
    """Split the samples into grids with at most one sample per pixel."""
    height, width = shape
    cells = pts.round().clamp(min=torch.zeros(2, dtype=pts.dtype),
                              max=torch.tensor([height - 1, width - 1], dtype=pts.dtype))
    shift = pts - cells
    flat = (cells[:, 0] * width + cells[:, 1]).long()
    order = torch.argsort(flat, stable=True)
    sorted_flat = flat[order]
    first = torch.ones_like(sorted_flat, dtype=torch.bool)
    first[1:] = sorted_flat[1:] != sorted_flat[:-1]
    start = torch.cummax(torch.where(first, torch.arange(flat.numel()), 0), 0).values
    rank = torch.empty_like(flat)
    rank[order] = torch.arange(flat.numel()) - start
    layers = []
    c = vals.shape[1]
    for layer in range(int(rank.max()) + 1):
        sel = rank == layer
        idx = flat[sel]
        v = torch.zeros(c, height * width, dtype=vals.dtype)
        v[:, idx] = vals[sel].T
        valid = torch.zeros(height * width, dtype=torch.bool)
        valid[idx] = True
        s = torch.zeros(2, height * width, dtype=vals.dtype)
        s[:, idx] = shift[sel].T.to(vals.dtype)
        layers.append({"values": v.reshape(c, height, width), "valid": valid.reshape(shape),
                       "shift": s.reshape(2, height, width), "index": idx})
    return layers


def _fit(layers: list[dict], kernels: list[Any], offsets: torch.Tensor, degree: int,
         c: int, shape: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    state: SmoothState | None = None
    for layer, kernel in zip(layers, kernels, strict=True):
        part = grid_smooth(layer["values"], kernel, offsets, key_valid=layer["valid"],
                           key_shift=layer["shift"], degree=degree)
        state = part if state is None else state.merge(part)
    coef, _, order0 = solve_moments(state, c, 2, degree)
    empty = state.empty_rows
    return coef, order0, empty


def reconstruct(points: Any, values: Any, shape: Any, method: str = "classic", *,
                h: float = 1.0, order: int = 2, radius: int | None = None,
                iterations: int = 2, empty: str = "raise", **steering: Any) -> Any:
    """Kernel regression from scattered samples onto a ``(height, width)`` grid.

    Upscaling (samples on a coarse lattice), filling dropped pixels, or truly
    irregular samples: at each pixel ``x``, a polynomial of degree ``order``
    in ``x_j - x`` is fitted to the samples ``x_j`` within ``radius`` pixels
    by weighted least squares with the classic kernel
    (``Q_x = I / (2 h^2)``) or the steering kernel (``Q_x = C_j / (2 h^2)``,
    ``C_j`` from the gradients of the previous fit, iterated).

    Parameters
    ----------
    points : array of shape (n, 2)
        Sample positions as (row, column) in pixel units, within the grid.
    values : array of shape (n,) or (n, channels)
        Sample values; the result has their dtype (uint8 is rounded).
    shape : (int, int)
        Output ``(height, width)``.
    method : {"classic", "steering"}, default "classic"
        Kernel.
    h : float, default 1.0
        Kernel scale in pixels.
    order : {0, 1, 2}, default 2
        Local polynomial degree. Where too few samples make the system
        singular, the order-0 fit (the weighted mean) is used.
    radius : int, optional
        Half-side of the window; default ``ceil(3 h)``.
    iterations : int, default 2
        Steering fits (``method="steering"``).
    empty : {"raise", "nan", "nearest"}, default "raise"
        A pixel with no sample within ``radius``: raise, NaN, or the value of
        the nearest sample.
    **steering
        ``window``, ``lambda_elongation``, ``lambda_scale``, ``alpha``,
        ``data_range`` as in :func:`steering_kernel_regression`.

    Returns
    -------
    ndarray or torch.Tensor of shape (height, width) or (height, width, channels)

    Examples
    --------
    Fill randomly dropped pixels:

    >>> import numpy as np
    >>> from nadaraya.image import reconstruct
    >>> img = np.add.outer(np.arange(20.0), np.arange(30.0))
    >>> keep = np.random.default_rng(0).random(img.shape) < 0.3
    >>> out = reconstruct(np.argwhere(keep), img[keep], img.shape, h=1.0, radius=4)
    >>> bool(np.abs(out - img).max() < 1e-6)
    True
    """
    if method not in METHODS:
        raise NadarayaError(f"method must be one of {', '.join(map(repr, METHODS))}; "
                            f"got {method!r}.")
    if empty not in ("raise", "nan", "nearest"):
        raise NadarayaError(f"empty must be 'raise', 'nan' or 'nearest'; got {empty!r}.")
    unknown = set(steering) - {"window", "lambda_elongation", "lambda_scale", "alpha",
                               "data_range"}
    if unknown:
        raise NadarayaError(f"unknown keyword argument(s) {sorted(unknown)} for reconstruct.")
    h = check_positive(h, "h", "Pass the kernel scale in pixels.")
    order = check_order(order)
    if radius is None:
        radius = default_radius(h)
    if not isinstance(radius, int) or radius < 1:
        raise NadarayaError(f"radius must be an integer >= 1; got {radius!r}.")
    pts, img, shape = _samples(points, values, shape)
    if empty == "nan" and img.integer:
        raise NadarayaError("empty='nan' needs float values (integers cannot hold NaN); "
                            "pass values.astype(float) or empty='nearest'.")
    vals = img.data[:, 0, :].T
    device = vals.device
    c = vals.shape[1]
    layers = _layers(pts.cpu(), vals.cpu(), shape)
    for layer in layers:
        for key in ("values", "valid", "shift"):
            layer[key] = layer[key].to(device)
    offsets = window_offsets(radius, 2, device=device)
    degree = order if method == "classic" else max(order, 1)
    coef, order0, hole = _fit(layers, [classic_kernel(h)] * len(layers), offsets,
                              max(degree, 2) if method == "steering" else degree, c, shape)
    if method == "steering":
        to255 = 255.0 / data_range_of(img, steering.pop("data_range", None))
        for _ in range(iterations):
            grad = coef[:, 1:3, :].permute(1, 2, 0).reshape(2, c, *shape)
            grad = torch.nan_to_num(grad)
            cov = steering_matrices(grad * to255, **steering)
            kernels = []
            for layer in layers:
                field = torch.where(layer["valid"][..., None, None], cov,
                                    torch.eye(2, dtype=cov.dtype, device=device))
                kernels.append(steering_kernel(h, field))
            coef, order0, hole = _fit(layers, kernels, offsets, degree, c, shape)
    out = (order0 if order == 0 else coef[:, 0, :]).clone()
    if bool(hole.any()):
        if empty == "raise":
            raise NadarayaError(
                f"{int(hole.sum())} pixel(s) have no sample within radius {radius}; raise "
                "radius (or h), or pass empty='nan' or empty='nearest'."
            )
        if empty == "nan":
            out[hole] = torch.nan
        else:
            from scipy.spatial import cKDTree

            grid = torch.nonzero(hole.reshape(shape)).double().cpu().numpy()
            _, nearest = cKDTree(pts.cpu().numpy()).query(grid)
            out[hole] = vals[torch.as_tensor(nearest, device=device)]
    result = out.T.reshape(c, *shape)
    return img.back(result)
