"""Image denoising: nadaraya's filters against OpenCV, scikit-image and BM3D.

* Data: scikit-image's ``camera`` (512 x 512 gray, shipped in the wheel),
  plus Gaussian noise of standard deviation sigma in {10, 25, 50} on the
  0-255 scale, fixed seed, not clipped, float32. OpenCV's fastNlMeansDenoising
  accepts only 8-bit images: it gets the noisy image rounded and clipped to
  uint8. The bilateral filters also run on that uint8 image (OpenCV's
  8-bit path, its fastest).
* Each method gets a small parameter sweep per sigma; the best PSNR against
  the clean image is kept (an oracle choice, the same for every method), and
  that setting is timed again (best of ``--repeat`` runs, the sweep's run
  included). Our non-local means is swept twice: search radius 7 (the
  default of ``nadaraya denoise``) and 10.
* Steering kernel regression with its defaults (a non-local means pilot,
  timed with it) and, at sigma 25, in the paper's iterative setup (Takeda,
  Farsiu and Milanfar's denoising demo for that noise level: second order,
  every iteration smoothing the previous estimate).
* PSNR and SSIM (scikit-image's ``structural_similarity``) on the 0-255 scale.
* Peers: OpenCV ``bilateralFilter`` and ``fastNlMeansDenoising``, scikit-image
  ``denoise_nl_means`` fast and slow mode, a Gaussian blur (OpenCV), BM3D
  (the ``bm3d`` package) when installed.
* With a CUDA device: global non-local means (every pixel attends to every
  pixel) on the 512 x 512 image, timed.

The table ends with ratios against the peers measured in the same run.
Threads: ``--threads`` (default 1) is given to torch and OpenCV alike; on a
shared machine one thread per library gives the steadiest timings.

Run::

    python benchmarks/bench_image.py                 # sigma 10, 25, 50
    python benchmarks/bench_image.py --sigmas 25 --quick
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import nadaraya
from nadaraya.image import (
    bilateral,
    kernel_regression,
    non_local_means,
    psnr,
    steering_kernel_regression,
)
from nadaraya.image.steering import default_h, default_range


@dataclass
class Result:
    method: str
    sigma: float
    params: dict[str, Any]
    psnr: float
    ssim: float
    seconds: float
    note: str = ""
    sweep: list[tuple[dict[str, Any], float]] = field(default_factory=list)


def _ssim(clean: np.ndarray, out: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return float(structural_similarity(clean, np.asarray(out, np.float64), data_range=255))


def _timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    out = fn()
    return np.asarray(out), time.perf_counter() - start


def sweep(name: str, sigma: float, clean: np.ndarray, grid: Iterable[dict[str, Any]],
          run: Callable[..., np.ndarray], repeat: int, scale: float = 1.0,
          note: str = "") -> Result:
    """Run ``run(**params)`` for each setting; keep the best PSNR, time it again."""
    best = None
    tried = []
    for params in grid:
        out, seconds = _timed(lambda p=params: run(**p))
        score = psnr(clean, np.asarray(out, np.float64) * scale, data_range=255)
        tried.append((params, score))
        if best is None or score > best[1]:
            best = (params, score, out, seconds)
    params, score, out, seconds = best
    for _ in range(repeat - 1):
        _, again = _timed(lambda: run(**params))
        seconds = min(seconds, again)
    result = Result(name, sigma, params, score, _ssim(clean, np.asarray(out) * scale), seconds,
                    note, tried)
    print(f"  {name:<28} {score:7.3f} dB {seconds:8.3f} s  {_fmt(params)}", flush=True)
    return result


def _fmt(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in params.items())


def _grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*axes.values())]


def run_sigma(sigma: float, clean: np.ndarray, args: argparse.Namespace) -> list[Result]:
    rng = np.random.default_rng(args.seed)
    noisy = (clean + sigma * rng.standard_normal(clean.shape)).astype(np.float32)
    noisy8 = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    print(f"sigma {sigma:g}: noisy {psnr(clean, noisy, data_range=255):.3f} dB", flush=True)
    results: list[Result] = []
    rep = args.repeat
    quick = args.quick

    def add(result: Result | None) -> None:
        if result is not None:
            results.append(result)

    # -- bilateral -----------------------------------------------------------
    bil_grid = _grid(sigma_space=[1.5, 2.5, 3.5] if quick else [1.5, 2.5, 3.5, 5.0],
                     sigma_color=[f * sigma for f in ((1.5, 2.5) if quick else (1.0, 1.5, 2.0,
                                                                                  2.5, 3.0))])
    try:
        import cv2

        cv2.setNumThreads(args.threads)
        add(sweep("OpenCV bilateral (uint8)", sigma, clean, bil_grid,
                  lambda sigma_space, sigma_color: cv2.bilateralFilter(
                      noisy8, 0, sigma_color, sigma_space), rep))
    except ImportError:
        cv2 = None
        print("  (opencv-python-headless not installed: OpenCV peers skipped)")
    add(sweep("nadaraya bilateral (uint8)", sigma, clean, bil_grid,
              lambda sigma_space, sigma_color: bilateral(noisy8, sigma_color, sigma_space), rep))
    if cv2 is not None:
        add(sweep("OpenCV bilateral (float32)", sigma, clean, bil_grid,
                  lambda sigma_space, sigma_color: cv2.bilateralFilter(
                      noisy, 0, sigma_color, sigma_space), rep))
    add(sweep("nadaraya bilateral (float32)", sigma, clean, bil_grid,
              lambda sigma_space, sigma_color: bilateral(noisy, sigma_color, sigma_space), rep))

    # -- non-local means ------------------------------------------------------
    if cv2 is not None:
        add(sweep("OpenCV fastNlMeans (uint8)", sigma, clean,
                  _grid(h=[f * sigma for f in (0.6, 0.8, 1.0, 1.2)]),
                  lambda h: cv2.fastNlMeansDenoising(noisy8, None, h, 7, 21), rep))
    for radius in [7] if quick else [7, 10]:
        add(sweep("nadaraya non_local_means" + ("" if radius == 7 else f" r={radius}"), sigma,
                  clean, _grid(search_radius=[radius], h=[f * sigma for f in (0.6, 0.75, 0.9)],
                               sigma=[f * sigma for f in (1.0, 1.15)]),
                  lambda search_radius, h, sigma: non_local_means(noisy, h, 7, search_radius,
                                                                  sigma=sigma), rep))
    try:
        from skimage.restoration import denoise_nl_means

        unit = noisy / 255.0
        add(sweep("scikit-image NLM fast", sigma, clean,
                  _grid(patch_distance=[6, 11], h=[f * sigma / 255 for f in (0.6, 0.8, 1.0)]),
                  lambda patch_distance, h: denoise_nl_means(
                      unit, 7, patch_distance, h, True, sigma / 255), 1, scale=255.0))
        if not args.skip_slow:
            add(sweep("scikit-image NLM slow", sigma, clean,
                      _grid(h=[f * sigma / 255 for f in ((0.6,) if quick else (0.5, 0.6, 0.75))]),
                      lambda h: denoise_nl_means(unit, 7, 11, h, False, sigma / 255), 1,
                      scale=255.0))
    except ImportError:
        print("  (scikit-image not installed: its peers skipped)")

    # -- kernel regression ----------------------------------------------------
    add(sweep("nadaraya kernel_regression", sigma, clean,
              _grid(order=[0, 2], h=[0.8, 1.0, 1.3, 1.7, 2.2]),
              lambda order, h: kernel_regression(noisy, h, order), rep))
    # steering kernel regression with its defaults (a non-local means pilot for the
    # first gradients and the photometric factor; the time includes the pilot)
    h0 = default_h(sigma)
    add(sweep("nadaraya steering (SKR)", sigma, clean,
              _grid(h=[h0] if quick else [h0 - 0.5, h0, h0 + 0.5],
                    range_factor=[default_range(sigma)] if quick else [0.6, 0.8]),
              lambda h, range_factor: steering_kernel_regression(
                  noisy, h, sigma=sigma, range_sigma=range_factor * sigma), rep,
              note="time includes the pilot"))
    # the paper's iterative steering kernel regression (Takeda, Farsiu and Milanfar's
    # denoising demo for sigma 25: second order, h = 2.4, 21 x 21 windows, gradients
    # of a classic fit of the noisy image to start, each iteration smoothing the
    # previous estimate); its h and first gradients are set for sigma 25 only
    if sigma == 25:
        add(sweep("nadaraya ISKR (paper setup)", sigma, clean,
                  _grid(iterations=[8] if quick else [6, 9, 12], window=[2]),
                  lambda iterations, window: steering_kernel_regression(
                      noisy, 2.4, iterations, pilot="image", order=2, alpha=0.5,
                      window=window, radius=10, range_sigma=None), rep))

    # -- baselines --------------------------------------------------------------
    if cv2 is not None:
        add(sweep("Gaussian blur (OpenCV)", sigma, clean, _grid(s=[0.8, 1.0, 1.3, 1.7, 2.2]),
                  lambda s: cv2.GaussianBlur(noisy, (0, 0), s), rep))
    if not args.skip_bm3d:
        try:
            import bm3d
        except ImportError:
            print("  (bm3d not installed: skipped)")
        else:
            add(sweep("BM3D", sigma, clean, [{"sigma_psd": sigma}],
                      lambda sigma_psd: bm3d.bm3d(noisy, sigma_psd=sigma_psd), 1))
    if torch.cuda.is_available():
        gpu = torch.from_numpy(noisy).cuda()

        def global_nlm(h: float) -> np.ndarray:
            out = non_local_means(gpu, h, 7, None)
            torch.cuda.synchronize()
            return out.cpu().numpy()

        add(sweep("nadaraya global NLM (CUDA)", sigma, clean,
                  _grid(h=[f * sigma for f in (0.6, 0.8, 1.0)]), global_nlm, rep))
    return results


PEERS = [
    ("nadaraya bilateral (uint8)", "OpenCV bilateral (uint8)"),
    ("nadaraya bilateral (float32)", "OpenCV bilateral (float32)"),
    ("nadaraya non_local_means", "scikit-image NLM slow"),
    ("nadaraya non_local_means", "scikit-image NLM fast"),
    ("nadaraya non_local_means", "OpenCV fastNlMeans (uint8)"),
    ("nadaraya non_local_means r=10", "scikit-image NLM slow"),
    ("nadaraya steering (SKR)", "BM3D"),
    ("nadaraya steering (SKR)", "nadaraya non_local_means"),
    ("nadaraya ISKR (paper setup)", "nadaraya steering (SKR)"),
]


def report(results: list[Result]) -> None:
    print()
    print(f"{'method':<30} {'sigma':>5} {'PSNR dB':>8} {'SSIM':>6} {'time s':>8}  best parameters")
    for r in results:
        print(f"{r.method:<30} {r.sigma:5g} {r.psnr:8.3f} {r.ssim:6.3f} {r.seconds:8.3f}  "
              f"{_fmt(r.params)}")
    print()
    print(f"{'ours / peer':<58} {'sigma':>5} {'dPSNR dB':>9} {'time ratio':>10}")
    by = {(r.method, r.sigma): r for r in results}
    for ours, peer in PEERS:
        for sigma in sorted({r.sigma for r in results}):
            a, b = by.get((ours, sigma)), by.get((peer, sigma))
            if a is None or b is None:
                continue
            print(f"{ours + ' / ' + peer:<58} {sigma:5g} {a.psnr - b.psnr:+9.3f} "
                  f"{a.seconds / b.seconds:10.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[10.0, 25.0, 50.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2,
                        help="timing runs of the best setting (best kept; default 2)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for torch and OpenCV (default 1)")
    parser.add_argument("--quick", action="store_true", help="smaller sweeps")
    parser.add_argument("--skip-slow", action="store_true",
                        help="skip scikit-image's slow NLM (about 15 s per run)")
    parser.add_argument("--skip-bm3d", action="store_true", help="skip BM3D")
    args = parser.parse_args(argv)
    from skimage import data

    torch.set_num_threads(args.threads)
    clean = data.camera().astype(np.float64)
    print(f"nadaraya {nadaraya.__version__}, torch {torch.__version__}, threads {args.threads}, "
          f"camera {clean.shape}, seed {args.seed}")
    results: list[Result] = []
    for sigma in args.sigmas:
        results += run_sigma(sigma, clean, args)
    report(results)


if __name__ == "__main__":
    main()
