"""Kernel sums on one GPU: ours (exact and certified) against KeOps and SDPA, in one run.

Data as in ``bench_transforms.py``: keys x ~ U(0, 6)^d, values
y = 2 sin x_1 (times cos x_2 in 2-D) + N(0, 1), queries drawn the same way,
n = m, all tensors on the GPU. Each case prints ours and the peers computing
the same two sums (sum K and sum K y, the Nadaraya–Watson mean) on the same
tensors, as seconds and as ratios to ours:

* ``exact``: 1-D Gaussian, n = m = 1e5 (``--exact-size``), h = 0.3, no
  tolerance: ours in float32 and float64 (the engine ``smooth`` picks), KeOps
  (``pykeops.torch``, the same dtype), torch SDPA with the Gaussian's key bias
  (float32, the memory-efficient kernel).
* ``certified``: ours with ``tolerance`` (the binned method on the GPU) for
  the 1-D Gaussian at n = m = 1e6 and 1e7 (h = 0.03), the 2-D Gaussian and
  the 1-D Laplacian at 1e6; KeOps' exact sums at 1e6 (at 1e7 they are
  1e14 kernel evaluations: not run).

``err``: the largest ``|mean - exact| / max|y|`` over 2,000 sampled queries,
the exact means computed in float64 by the streamed engine on the GPU; for
certified runs it is printed beside the tolerance it must stay within, and
beside the exact engine's own error in the same dtype, which comes on top of
the tolerance (the bound is on the sums of the points as that dtype holds them).
Times: the median of ``--repeats`` runs after a warm-up run (KeOps compiles
its formula then), synchronized with the device.

Run::

    python benchmarks/bench_gpu.py                    # on a CUDA machine
    python benchmarks/bench_gpu.py --device cpu --exact-size 2000 --sizes 20000 \\
        --repeats 1                                   # a dry run on the CPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import nadaraya

Means = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _data(n: int, d: int, dtype: torch.dtype, device: torch.device,
          seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.rand(n, d, generator=g, dtype=torch.float64) * 6
    q = torch.rand(n, d, generator=g, dtype=torch.float64) * 6
    y = 2 * torch.sin(x[:, 0]) + torch.randn(n, generator=g, dtype=torch.float64)
    if d > 1:
        y = y * torch.cos(x[:, 1])
    return tuple(t.to(device=device, dtype=dtype) for t in (q, x, y))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(run: Callable[[], torch.Tensor], device: torch.device,
          repeats: int) -> tuple[float, torch.Tensor]:
    out = run()  # warm-up: compilation, caches, allocator
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        out = run()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _keops(kernel: str, h: float) -> Means | None:
    try:
        from pykeops.torch import LazyTensor
    except ImportError:
        return None

    def means(q: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        qi = LazyTensor((q / h)[:, None, :].contiguous())
        kj = LazyTensor((k / h)[None, :, :].contiguous())
        vj = LazyTensor(torch.stack([torch.ones_like(y), y], 1)[None, :, :].contiguous())
        r2 = ((qi - kj) ** 2).sum(-1)
        w = (-0.5 * r2).exp() if kernel == "gaussian" else (-r2.sqrt()).exp()
        sums = (w * vj).sum(dim=1)
        return sums[:, 1] / sums[:, 0]

    return means


def _sdpa(h: float) -> Means:
    def means(q: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        centre = k.mean(0)  # smaller norms, less cancellation in q.k - ||k||^2 / 2
        kt, qt = (k - centre) / h, (q - centre) / h
        # SDPA wants the head size padded to a multiple of 8 on CUDA
        pad = (-kt.shape[1]) % 8
        kt, qt = F.pad(kt, (0, pad)), F.pad(qt, (0, pad))
        v = F.pad(y[:, None], (0, 7))
        bias = -(kt * kt).sum(1) / 2
        out = []
        rows = max(1, 2**26 // k.shape[0])
        for s in range(0, qt.shape[0], rows):
            qs = qt[s:s + rows]
            mask = bias[None, :].expand(qs.shape[0], -1)
            o = F.scaled_dot_product_attention(qs[None, None], kt[None, None], v[None, None],
                                               attn_mask=mask[None, None], scale=1.0)
            out.append(o[0, 0, :, 0])
        return torch.cat(out)

    return means


class _Errors:
    """``err`` of the sampled queries' means against exact float64 means of the same data.

    The exact means are computed once for each dtype the data is cast to (the cast
    rounds the points, so each dtype has its own), whatever the number of methods.
    """

    def __init__(self, kernel: str, h: float, sample: torch.Tensor) -> None:
        self.kernel, self.h, self.sample = kernel, h, sample
        self.exact: dict[torch.dtype, torch.Tensor] = {}

    def __call__(self, got: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                 y: torch.Tensor) -> float:
        """``got``: the means at the sampled queries of ``q``, the data ``q, k, y``."""
        if q.dtype not in self.exact:
            self.exact[q.dtype] = nadaraya.smooth(
                q[self.sample].double(), k.double(), y.double(), self.kernel,
                bandwidth=self.h, engine="streamed")
        return float((got.double() - self.exact[q.dtype]).abs().max()
                     / y.double().abs().max())


def _line(label: str, seconds: float, ours: float | None, err: float | None,
          note: str = "") -> None:
    ratio = f"{seconds / ours:8.2f}" if ours else "       -"
    e = f"{err:9.1e}" if err is not None else "        -"
    print(f"  {label:34s} {seconds:9.4f} {ratio} {e}  {note}", flush=True)


def _case(title: str, n: int, d: int, kernel: str, h: float, tolerance: float | None,
          dtypes: tuple[torch.dtype, ...], peers: bool, args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    print(f"\n{title}: n = m = {n:.0e}, d = {d}, {kernel}, h = {h}, tolerance = {tolerance}")
    print(f"  {'method':34s} {'seconds':>9s} {'vs ours':>8s} {'err':>9s}")
    q64, k64, y64 = _data(n, d, torch.float64, device, args.seed)
    sample = torch.randperm(n, generator=torch.Generator().manual_seed(1))[:2000].to(device)
    error = _Errors(kernel, h, sample)
    ours_time = None
    for dtype in dtypes:
        q, k, y = (t.to(dtype) for t in (q64, k64, y64))
        engine = nadaraya.explain(q, k, y, kernel, bandwidth=h, tolerance=tolerance).engine
        seconds, mean = _time(lambda q=q, k=k, y=y: nadaraya.smooth(
            q, k, y, kernel, bandwidth=h, tolerance=tolerance), device, args.repeats)
        err = error(mean[sample], q, k, y)
        ours_time = ours_time or seconds
        bound = ""
        if tolerance:
            # the bound is on the sums of the points as the dtype holds them: the exact
            # engines' own error in this dtype comes on top (see smooth's tolerance)
            same = nadaraya.smooth(q[sample], k, y, kernel, bandwidth=h, engine="streamed")
            floor = error(same, q, k, y)
            bound = f"(tolerance {tolerance:g} + exact {str(dtype)[6:]}'s {floor:.1e})"
        _line(f"ours {str(dtype)[6:]} [{engine}]", seconds, ours_time, err, bound)
    if not peers:
        print("  (exact peers not run: n * m is beyond their reach in this benchmark)")
        return
    keops = _keops(kernel, h)
    for dtype in (torch.float32, torch.float64) if keops else ():
        q, k, y = (t.to(dtype) for t in (q64, k64, y64))
        try:
            seconds, mean = _time(lambda q=q, k=k, y=y: keops(q, k, y), device, args.repeats)
        except Exception as failure:  # KeOps compiles at run time: report, go on
            print(f"  keops {str(dtype)[6:]}: failed ({type(failure).__name__}: "
                  f"{str(failure)[:120]})")
            continue
        _line(f"keops {str(dtype)[6:]}", seconds, ours_time, error(mean[sample], q, k, y))
    if keops is None:
        print("  keops: not installed (pip install pykeops)")
    if kernel == "gaussian":
        q, k, y = (t.float() for t in (q64, k64, y64))
        seconds, mean = _time(lambda: _sdpa(h)(q, k, y), device, args.repeats)
        _line("torch sdpa + key bias float32", seconds, ours_time,
              error(mean[sample], q, k, y))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--exact-size", type=int, default=10**5)
    parser.add_argument("--sizes", type=lambda s: [int(float(x)) for x in s.split(",")],
                        default=[10**6, 10**7])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", default="exact,certified")
    args = parser.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device {name}, torch {torch.__version__}, nadaraya {nadaraya.__version__}")
    cases = args.cases.split(",")
    if "exact" in cases:
        _case("exact", args.exact_size, 1, "gaussian", 0.3, None,
              (torch.float32, torch.float64), True, args)
    if "certified" in cases:
        first, *rest = args.sizes
        for tol in (1e-4, 1e-8):
            _case("certified", first, 1, "gaussian", 0.03, tol, (torch.float32,), True, args)
        for n in rest:
            _case("certified", n, 1, "gaussian", 0.03, 1e-4, (torch.float32,), False, args)
        _case("certified", first, 2, "gaussian", 0.1, 1e-4, (torch.float32,), True, args)
        _case("certified", first, 1, "laplacian", 0.03, 1e-6, (torch.float32,), True, args)


if __name__ == "__main__":
    main()
