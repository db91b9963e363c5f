"""Reconstruction from irregular samples: ``nadaraya.image.reconstruct`` against scipy.

* Data: scikit-image's ``camera`` (512 x 512 gray, in [0, 255]), as float64;
  ``--size`` crops its centre (256 by default, 512 for the whole image).
* Tasks: upscaling (the samples are every ``--factor``-th pixel of each
  row and column, the grid is the full image) and filling 50 % missing
  pixels (kept at random, fixed seed; the kept ones are the samples).
* Ours: ``reconstruct`` with its defaults (order 2, guarded by the variance
  inflation and clamped to the samples' range in each window), order 0, and
  the unguarded order 2 (``clip=False, inflation=inf``); ``h`` per task:
  0.6 times the sample spacing for upscaling, 1.0 for the missing pixels.
* Peers: ``scipy.interpolate.griddata`` (linear and cubic; pixels outside the
  samples' convex hull get the nearest sample) and ``RBFInterpolator``
  (thin-plate spline on the 32 nearest samples, its ``neighbors`` option;
  the whole-data RBF is O(n^3) and out of reach at these sizes).
* Reported: PSNR on the 0-255 scale over every pixel, the range of the
  result (an interpolator that leaves [0, 255] overshoots), the wall time
  (best of ``--repeat``) and its ratio to our default's time, all measured
  in the same run.

Run::

    python benchmarks/bench_reconstruct.py               # 256 x 256 crop
    python benchmarks/bench_reconstruct.py --size 512 --repeat 3
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from _machine import header
from nadaraya.image import psnr, reconstruct


def _timed(run: Callable[[], np.ndarray], repeat: int) -> tuple[np.ndarray, float]:
    best, out = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    assert out is not None
    return out, best


def _griddata(points: np.ndarray, values: np.ndarray, shape: tuple[int, int],
              method: str) -> np.ndarray:
    from scipy.interpolate import griddata

    grid = np.indices(shape).reshape(2, -1).T
    out = griddata(points, values, grid, method=method)
    missing = np.isnan(out)
    if missing.any():  # outside the convex hull: the nearest sample
        out[missing] = griddata(points, values, grid[missing], method="nearest")
    return out.reshape(shape)


def _rbf(points: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    from scipy.interpolate import RBFInterpolator

    grid = np.indices(shape).reshape(2, -1).T.astype(np.float64)
    rbf = RBFInterpolator(points.astype(np.float64), values, neighbors=32,
                          kernel="thin_plate_spline")
    return rbf(grid).reshape(shape)


def _tasks(image: np.ndarray, factor: int, rng: np.random.Generator
           ) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    rows, cols = np.indices(image.shape)
    lattice = (rows % factor == 0) & (cols % factor == 0)
    keep = rng.random(image.shape) < 0.5
    return {f"upscale x{factor}": (np.argwhere(lattice), image[lattice], 0.6 * factor),
            "50% missing": (np.argwhere(keep), image[keep], 1.0)}


def _methods(points: np.ndarray, values: np.ndarray, shape: tuple[int, int], h: float
             ) -> dict[str, Callable[[], Any]]:
    """Ours first (the ratios' reference), then the peers."""
    return {
        "nadaraya default (order 2, guarded)": lambda: reconstruct(points, values, shape, h=h),
        "nadaraya order 0": lambda: reconstruct(points, values, shape, h=h, order=0),
        "nadaraya order 2 unguarded": lambda: reconstruct(
            points, values, shape, h=h, clip=False, inflation=math.inf),
        "scipy griddata linear": lambda: _griddata(points, values, shape, "linear"),
        "scipy griddata cubic": lambda: _griddata(points, values, shape, "cubic"),
        "scipy RBFInterpolator tps, 32 nb": lambda: _rbf(points, values, shape),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="side of the centre crop")
    parser.add_argument("--factor", type=int, default=2, help="upscaling factor")
    parser.add_argument("--repeat", type=int, default=1, help="timings: best of this many")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from skimage import data

    camera = data.camera().astype(np.float64)
    lo = (camera.shape[0] - args.size) // 2
    image = camera[lo:lo + args.size, lo:lo + args.size]
    shape = image.shape
    rng = np.random.default_rng(0)
    reconstruct(np.array([[0, 0], [3, 3]]), np.array([1.0, 2.0]), (4, 4))  # first-use costs
    print(header(("nadaraya", "torch", "scipy", "scikit-image")))
    print(f"camera {shape[0]} x {shape[1]}, threads {args.threads}, best of {args.repeat}")
    print(f"{'task':<13} {'method':<34} {'PSNR dB':>8} {'min':>8} {'max':>8} {'time s':>8} "
          f"{'/ ours':>7}")
    for task, (points, values, h) in _tasks(image, args.factor, rng).items():
        ours = None
        for name, run in _methods(points, values, shape, h).items():
            out, seconds = _timed(run, args.repeat)
            ours = seconds if ours is None else ours
            score = psnr(image, out, data_range=255.0)
            print(f"{task:<13} {name:<34} {score:8.2f} {out.min():8.1f} {out.max():8.1f} "
                  f"{seconds:8.3f} {seconds / ours:7.2f}")

if __name__ == "__main__":
    main()
