"""Peak memory of each face against the working-memory budget.

Each case runs in a fresh Python process (``--child``), with the budget set by
``nadaraya.config_context(working_memory=...)``, and its peak is measured as
``benchmarks/_peak.py`` says: ``VmHWM`` after the call minus ``VmRSS`` before
it, after a run on a small input and a reset of the peak, so every byte the
call held at once, its output included, its input not. Where the kernel
cannot reset the peak, the peak of the whole child is taken (an upper bound:
it includes building the input) and the table says so.

* Image filters: a ``size`` x ``size`` gray float32 image, scikit-image's
  ``camera`` tiled, plus Gaussian noise of s.d. 25 (0-255 scale).
  ``nlm``: non-local means, patch 7, search radius 7; ``bilateral``:
  sigma_color 62.5, sigma_spatial 2.5; ``kr``: classic kernel regression,
  order 2, h 1.5; ``skr``: steering kernel regression with its defaults
  (non-local means pilot) and ``sigma`` given; ``reconstruct``: 10 % of the
  pixels at random positions, the defaults (order 2), ``empty="nan"`` (the
  ``"nearest"`` policy adds a KD-tree over all the samples).
* The other faces, on ``--points`` points: ``smooth``, the engine (random
  2-D points, Gaussian kernel, h 0.01); ``knearest``, the same under
  ``KNearest(k)`` with ``k = n`` (a mask that hides nothing holds no table);
  ``regressor``, :class:`~nadaraya.estimators.NadarayaWatsonRegressor`
  predicting its float32 training points; ``attention``,
  :func:`~nadaraya.nn.functional.kernel_attention` (rbf, 4 heads of 64, one
  sequence of ``--tokens`` tokens, no gradient). More are a :func:`case`
  away.

The table lists the peak above the baseline next to the budget and the
output's size, and the ratio of the peak less the output to the budget.

Run::

    python benchmarks/bench_peak_memory.py                          # 4000 x 4000, 256 MiB
    python benchmarks/bench_peak_memory.py --size 2000 --budget 64 --cases nlm,skr
    python benchmarks/bench_peak_memory.py --cases smooth,knearest,regressor,attention \\
        --points 50000 --tokens 8192 --budget 64
    python benchmarks/bench_peak_memory.py --list
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from _peak import peak_of, run_child

Call = Callable[[], Any]
# name -> (build(args) -> (call on the full input, call on a small input, output bytes))
CASES: dict[str, Callable[[argparse.Namespace], tuple[Call, Call, int]]] = {}
DEFAULT = ("nlm", "bilateral", "kr", "skr", "reconstruct")
SIGMA = 25.0


def case(name: str) -> Callable[[Callable[[argparse.Namespace], tuple[Call, Call, int]]],
                                Callable[[argparse.Namespace], tuple[Call, Call, int]]]:
    """Register a case: ``build(args)`` returns the call to measure, the same call on a
    small input (run first) and the output's size in bytes."""
    def register(build: Callable[[argparse.Namespace], tuple[Call, Call, int]]
                 ) -> Callable[[argparse.Namespace], tuple[Call, Call, int]]:
        CASES[name] = build
        return build
    return register


def noisy_image(size: int, seed: int = 0) -> np.ndarray:
    """``camera`` tiled to ``size`` x ``size``, plus noise of s.d. 25; float32."""
    from skimage.data import camera

    base = camera().astype(np.float32)
    reps = -(-size // base.shape[0])
    img = np.tile(base, (reps, reps))[:size, :size]
    rng = np.random.default_rng(seed)
    return (img + SIGMA * rng.standard_normal(img.shape, dtype=np.float32)).astype(np.float32)


def _filter(name: str, function: str, **params: Any) -> None:
    """Register the image filter ``nadaraya.image.<function>`` with ``params``."""
    def build(args: argparse.Namespace) -> tuple[Call, Call, int]:
        import nadaraya.image

        run = getattr(nadaraya.image, function)
        img, small = noisy_image(args.size), noisy_image(64)
        return lambda: run(img, **params), lambda: run(small, **params), img.nbytes
    case(name)(build)


_filter("nlm", "non_local_means", h=0.75 * SIGMA, sigma=1.15 * SIGMA, patch_size=7,
        search_radius=7)
_filter("bilateral", "bilateral", sigma_color=2.5 * SIGMA, sigma_spatial=2.5)
_filter("kr", "kernel_regression", h=1.5, order=2)
_filter("skr", "steering_kernel_regression", sigma=SIGMA)


@case("reconstruct")
def _reconstruct(args: argparse.Namespace) -> tuple[Call, Call, int]:
    from nadaraya.image import reconstruct

    def samples(size: int) -> tuple[np.ndarray, np.ndarray]:
        img = noisy_image(size)
        rng = np.random.default_rng(1)
        n = size * size // 10
        pts = rng.uniform(-0.5, size - 0.5, (n, 2))
        cells = np.clip(np.rint(pts), 0, size - 1).astype(int)
        return pts, img[cells[:, 0], cells[:, 1]]

    pts, vals = samples(args.size)
    few = samples(64)
    shape = (args.size, args.size)
    # pixels without a sample within the window stay NaN: empty="nearest" would add a
    # KD-tree over all the samples
    return (lambda: reconstruct(pts, vals, shape, empty="nan"),
            lambda: reconstruct(*few, (64, 64), empty="nan"), args.size**2 * 4)


def _smooth_case(args: argparse.Namespace, k_nearest: bool) -> tuple[Call, Call, int]:
    """``smooth`` on ``--points`` random 2-D points; with ``k_nearest``, under
    ``KNearest(n)`` (k >= n: the mask hides nothing and must hold no (m, n) table)."""
    import nadaraya
    from nadaraya.masks import KNearest

    rng = np.random.default_rng(0)
    x = rng.random((args.points, 2))
    y = rng.random(args.points)

    def run(n: int) -> Any:
        mask = KNearest(n) if k_nearest else None
        return nadaraya.smooth(x[:n], x[:n], y[:n], "gaussian", mask, bandwidth=0.01)

    return lambda: run(args.points), lambda: run(500), x.shape[0] * 8


case("smooth")(lambda args: _smooth_case(args, False))
case("knearest")(lambda args: _smooth_case(args, True))


@case("regressor")
def _regressor(args: argparse.Namespace) -> tuple[Call, Call, int]:
    from nadaraya.estimators import NadarayaWatsonRegressor

    rng = np.random.default_rng(0)
    X = rng.random((args.points, 2)).astype(np.float32)
    y = np.sin(6 * X.sum(1)).astype(np.float32)
    model = NadarayaWatsonRegressor(bandwidth=0.05).fit(X, y)
    small = NadarayaWatsonRegressor(bandwidth=0.05).fit(X[:500], y[:500])
    return (lambda: model.predict(X), lambda: small.predict(X[:500]), X.shape[0] * 8)


@case("attention")
def _attention(args: argparse.Namespace) -> tuple[Call, Call, int]:
    import torch

    from nadaraya.nn.functional import kernel_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, args.tokens, 64, generator=gen) for _ in range(3))

    def run(n: int) -> Any:
        with torch.no_grad():
            return kernel_attention(q[..., :n, :], k[..., :n, :], v[..., :n, :], "rbf")

    return lambda: run(args.tokens), lambda: run(256), q.numel() * 4


# -- the child ------------------------------------------------------------------
def child(args: argparse.Namespace) -> dict[str, Any]:
    run, warm, out_bytes = CASES[args.child](args)
    result, out = peak_of(run, warm, args.budget)
    del out
    return {**result, "out_bytes": out_bytes}


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one case in a fresh process: its peak bytes above the baseline, its seconds,
    its output's bytes and whether the peak was reset before the call."""
    return run_child(__file__, name, ["--size", str(args.size), "--budget", str(args.budget),
                                      "--points", str(args.points), "--tokens",
                                      str(args.tokens)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4000, help="image side in pixels")
    parser.add_argument("--budget", type=float, default=256.0, help="working memory, MiB")
    parser.add_argument("--cases", default=",".join(DEFAULT),
                        help=f"comma-separated case names (default {','.join(DEFAULT)})")
    parser.add_argument("--points", type=int, default=20000, help="points of the smooth case")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens of the attention case")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    if args.list:
        print(", ".join(sorted(CASES)))
        return
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    print(f"peak memory above the baseline, {args.size} x {args.size} gray float32 "
          f"(smooth: {args.points} points), budget {args.budget:g} MiB")
    print(f"{'case':<12} {'budget MiB':>10} {'output MiB':>10} {'peak MiB':>9} "
          f"{'(peak-out)/budget':>18} {'seconds':>8}")
    mib = 2.0**20
    for name in names:
        r = measure(name, args)
        ratio = (r["peak"] - r["out_bytes"]) / (args.budget * mib)
        note = "" if r["reset"] else "  (peak not reset: includes building the input)"
        print(f"{name:<12} {args.budget:>10.0f} {r['out_bytes'] / mib:>10.1f} "
              f"{r['peak'] / mib:>9.1f} {ratio:>18.2f} {r['seconds']:>8.1f}{note}", flush=True)


if __name__ == "__main__":
    main()
