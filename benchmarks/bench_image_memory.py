"""Peak memory of the image filters on large gray images, beside their peers', in one run.

Each case runs in a fresh Python process, measured as ``benchmarks/_peak.py``
says (shared with ``bench_peak_memory.py``): the child builds a ``size`` x
``size`` uint8 image (scikit-image's ``camera`` tiled, plus Gaussian noise of
s.d. 25), runs the filter once on a 64 x 64 image, resets the kernel's peak
resident set size and runs it on the full image. The peak is ``VmHWM`` after
the call minus ``VmRSS`` before it: every byte the call held at once, its
output included, its input not.

Cases: ``nlm`` (non-local means, patch 7, search radius 7), ``skr`` (steering
kernel regression, its defaults with ``sigma`` given), ``bilateral``
(sigma_color 62.5, sigma_spatial 2.5) with the working-memory budget
``--budget``; the peers ``skimage-nlm`` (``denoise_nl_means``, patch 7,
distance 7, fast mode, on the image as float64 as it asks) and ``opencv-nlm``
(``fastNlMeansDenoising``, template 7, search 15, on the uint8 image). The
table gives the peak in MiB, the peak per pixel in bytes, and the peak
extrapolated to 8000 x 8000 by the per-pixel figure (the budget is fixed, so
this is an upper bound for ours).

Run::

    python benchmarks/bench_image_memory.py --size 2000 --budget 256
    python benchmarks/bench_image_memory.py --size 8000 --cases nlm,opencv-nlm
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from _machine import header
from _peak import peak_of, run_child

SIGMA = 25.0
DEFAULT = ("nlm", "skr", "bilateral", "skimage-nlm", "opencv-nlm")


def noisy_uint8(size: int, seed: int = 0) -> np.ndarray:
    """``camera`` tiled to ``size`` x ``size`` plus noise of s.d. 25, uint8."""
    from skimage.data import camera

    base = camera().astype(np.float32)
    reps = -(-size // base.shape[0])
    img = np.tile(base, (reps, reps))[:size, :size]
    rng = np.random.default_rng(seed)
    noisy = img + SIGMA * rng.standard_normal(img.shape, dtype=np.float32)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def _case(name: str) -> Callable[[np.ndarray], Any]:
    """The call of case ``name`` on a uint8 image."""
    if name == "nlm":
        from nadaraya.image import non_local_means

        return lambda x: non_local_means(x, 0.75 * SIGMA, 7, 7, sigma=1.15 * SIGMA)
    if name == "skr":
        from nadaraya.image import steering_kernel_regression

        return lambda x: steering_kernel_regression(x, sigma=SIGMA)
    if name == "bilateral":
        from nadaraya.image import bilateral

        return lambda x: bilateral(x, 2.5 * SIGMA, 2.5)
    if name == "skimage-nlm":
        from skimage.restoration import denoise_nl_means

        return lambda x: denoise_nl_means(x.astype(np.float64) / 255.0, patch_size=7,
                                          patch_distance=7, h=0.75 * SIGMA / 255.0,
                                          sigma=SIGMA / 255.0, fast_mode=True)
    if name == "opencv-nlm":
        import cv2

        return lambda x: cv2.fastNlMeansDenoising(x, None, 0.75 * SIGMA * 1.5, 7, 15)
    raise SystemExit(f"unknown case {name!r}; cases: {', '.join(DEFAULT)}")


def child(name: str, size: int, budget: float) -> dict[str, Any]:
    run = _case(name)
    img, small = noisy_uint8(size), noisy_uint8(64)
    result, out = peak_of(lambda: run(img), lambda: run(small), budget)
    return {**result, "out": int(np.asarray(out).nbytes)}


def measure(name: str, size: int, budget: float) -> dict[str, Any]:
    return run_child(__file__, name, ["--size", str(size), "--budget", str(budget)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2000, help="image side in pixels")
    parser.add_argument("--budget", type=float, default=256.0, help="working memory, MiB")
    parser.add_argument("--cases", default=",".join(DEFAULT), help="comma-separated cases")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.size, args.budget)))
        return
    pixels = args.size * args.size
    print(header(("nadaraya", "torch", "scikit-image", "opencv-python-headless")))
    print(f"peak memory above the baseline, {args.size} x {args.size} gray uint8, "
          f"budget {args.budget:g} MiB (ours)")
    print(f"{'case':<12} {'peak MiB':>9} {'B/pixel':>8} {'at 8000^2 MiB':>14} {'seconds':>8}")
    for name in args.cases.split(","):
        r = measure(name, args.size, args.budget)
        per = r["peak"] / pixels
        note = "" if r["reset"] else "  (whole child: no peak reset)"
        print(f"{name:<12} {r['peak'] / 2**20:9.1f} {per:8.1f} {per * 8000**2 / 2**20:14.0f} "
              f"{r['seconds']:8.1f}{note}")


if __name__ == "__main__":
    main()
