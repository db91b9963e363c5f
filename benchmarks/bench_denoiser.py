"""Non-local Bayes against BM3D, scikit-image and OpenCV: images x sigma x method.

* Data: scikit-image's shipped images (``camera``, ``astronaut``, ``coffee``,
  ``chelsea``, ``brick``, ``grass`` by default) at their shipped sizes,
  converted to gray (``rgb2gray``, 0-255) unless ``--colour``; Gaussian noise of
  standard deviation sigma on the 0-255 scale, fixed seed, not clipped,
  float32. OpenCV's ``fastNlMeansDenoising`` takes 8-bit images only: it gets
  the noisy image rounded and clipped to uint8.
* Methods, each with fixed parameters set from sigma (no oracle sweep):
  ``denoise(method="nlbayes")`` and ``denoise(method="nlm")`` (ours), BM3D
  (the ``bm3d`` package, ``bm3d_rgb`` in colour), scikit-image
  ``denoise_nl_means`` (fast mode, ``h = 0.8 sigma``, the value its gallery
  uses) and OpenCV ``fastNlMeansDenoising`` (``h = sigma``;
  ``fastNlMeansDenoisingColored`` in colour).
* PSNR and SSIM on the 0-255 scale (SSIM: scikit-image's
  ``structural_similarity``), seconds of one run; the last columns are the
  PSNR difference and the time ratio to BM3D on the same image and sigma.
* Threads: ``--threads`` (default 1) for torch, OpenCV and BM3D alike (BM3D's
  profile ``num_threads``; its default would take every core).

Run::

    python benchmarks/bench_denoiser.py                       # the full gray table
    python benchmarks/bench_denoiser.py --colour --images astronaut coffee chelsea
    python benchmarks/bench_denoiser.py --crop 128 --sigmas 25
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from _machine import header
from nadaraya.image import denoise

IMAGES = ("camera", "astronaut", "coffee", "chelsea", "brick", "grass")


def load(name: str, colour: bool, crop: int | None) -> np.ndarray:
    """A shipped image as float64 on the 0-255 scale, gray unless ``colour``."""
    import skimage.data
    from skimage.color import gray2rgb, rgb2gray

    img = getattr(skimage.data, name)()
    if img.ndim == 3 and img.shape[-1] == 4:
        img = img[..., :3]
    if colour:
        img = gray2rgb(img) if img.ndim == 2 else img
        out = img.astype(np.float64)
    else:
        out = rgb2gray(img) * 255.0 if img.ndim == 3 else img.astype(np.float64)
    if crop:
        r, c = (out.shape[0] - crop) // 2, (out.shape[1] - crop) // 2
        out = out[max(r, 0):max(r, 0) + crop, max(c, 0):max(c, 0) + crop]
    return out


def methods(noisy: np.ndarray, sigma: float, colour: bool,
            threads: int = 1) -> dict[str, Callable[[], Any]]:
    """Name -> a call denoising ``noisy`` (float32, 0-255) at noise level ``sigma``.

    BM3D runs on ``threads`` threads (its profile's ``num_threads``; the
    package's default, 0, takes every core).
    """
    out: dict[str, Callable[[], Any]] = {
        "nadaraya nlbayes": lambda: denoise(noisy, "nlbayes", sigma, data_range=255.0),
        "nadaraya nlm": lambda: denoise(noisy, "nlm", sigma, data_range=255.0),
    }
    try:
        import bm3d

        profile = bm3d.BM3DProfile()
        profile.num_threads = threads
        out["BM3D"] = (lambda: bm3d.bm3d_rgb(noisy / 255.0, sigma / 255.0, profile) * 255.0) \
            if colour else (lambda: bm3d.bm3d(noisy, sigma_psd=sigma, profile=profile))
    except ImportError:
        print("  (bm3d not installed: skipped)")
    from skimage.restoration import denoise_nl_means

    axis = -1 if colour else None
    out["skimage nl_means"] = lambda: denoise_nl_means(
        noisy, h=0.8 * sigma, sigma=sigma, patch_size=7, patch_distance=11, fast_mode=True,
        channel_axis=axis)
    try:
        import cv2

        u8 = np.clip(np.round(noisy), 0, 255).astype(np.uint8)
        if colour:
            out["OpenCV fastNlMeans"] = lambda: cv2.fastNlMeansDenoisingColored(
                u8, None, sigma, sigma, 7, 21)
        else:
            out["OpenCV fastNlMeans"] = lambda: cv2.fastNlMeansDenoising(u8, None, sigma, 7, 21)
    except ImportError:
        print("  (opencv not installed: skipped)")
    return out


def score(clean: np.ndarray, out: np.ndarray, colour: bool) -> tuple[float, float]:
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    out = np.asarray(out, dtype=np.float64)
    return (float(peak_signal_noise_ratio(clean, out, data_range=255.0)),
            float(structural_similarity(clean, out, data_range=255.0,
                                        channel_axis=-1 if colour else None)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", nargs="+", default=list(IMAGES))
    parser.add_argument("--sigmas", nargs="+", type=float, default=[10.0, 25.0, 50.0])
    parser.add_argument("--colour", action="store_true", help="keep the images in colour")
    parser.add_argument("--crop", type=int, help="a centred square crop of this side")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="+", help="run only these methods (and BM3D)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        import cv2

        cv2.setNumThreads(args.threads)
    except ImportError:
        pass
    rows = []
    print(header(("nadaraya", "torch", "bm3d", "scikit-image", "opencv-python-headless")))
    print(f"{'image':10} {'shape':>13} {'sigma':>5}  {'method':20} {'PSNR':>6} {'SSIM':>6} "
          f"{'s':>7} {'dB-BM3D':>8} {'t/BM3D':>7}")
    for name in args.images:
        clean = load(name, args.colour, args.crop)
        for sigma in args.sigmas:
            rng = np.random.default_rng(0)
            noisy = (clean + sigma * rng.standard_normal(clean.shape)).astype(np.float32)
            found = {}
            for method, call in methods(noisy, sigma, args.colour, args.threads).items():
                if args.only and method != "BM3D" and method not in args.only:
                    continue
                start = time.perf_counter()
                out = call()
                seconds = time.perf_counter() - start
                found[method] = (*score(clean, out, args.colour), seconds)
            ref = found.get("BM3D")
            for method, (p, s, t) in found.items():
                vs = f"{p - ref[0]:+8.2f} {t / ref[2]:7.2f}" if ref else ""
                print(f"{name:10} {clean.shape!s:>13} {sigma:5.0f}  {method:20} {p:6.2f} "
                      f"{s:6.3f} {t:7.2f} {vs}", flush=True)
                rows.append((name, sigma, method, p, s, t))
    ours = [r for r in rows if r[2] == "nadaraya nlbayes"]
    bm = {(r[0], r[1]): r for r in rows if r[2] == "BM3D"}
    if ours and bm:
        gaps = [r[3] - bm[r[0], r[1]][3] for r in ours if (r[0], r[1]) in bm]
        times = [r[5] / bm[r[0], r[1]][5] for r in ours if (r[0], r[1]) in bm]
        print(f"\nnlbayes - BM3D: PSNR mean {np.mean(gaps):+.2f} dB (min {min(gaps):+.2f}, max "
              f"{max(gaps):+.2f}); time ratio median {np.median(times):.2f}")


if __name__ == "__main__":
    main()
