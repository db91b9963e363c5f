"""Kernel attention against ``scaled_dot_product_attention``: forward + backward, same run.

``kernel_attention(q, k, v, name)`` for each kernel name, timed forward and
backward (gradients of queries, keys and values) against torch's SDPA
softmax on the same tensors, measured interleaved (SDPA, then each kernel,
repeated) so that a loaded machine slows both alike. Printed: the median time
of each and its ratio to SDPA's. On CUDA also FlexAttention with the same
score modification (rbf: the key bias ``-||k||^2 / 2h^2``; laplacian:
``-||q - k|| / h`` from the score ``q.k``), compiled once.

Run::

    python benchmarks/bench_attention.py                          # B=8 H=8 L=1024 E=64 float32
    python benchmarks/bench_attention.py --length 256 --repeats 3 --dtype bfloat16
    python benchmarks/bench_attention.py --device cuda --dtype float16
    python benchmarks/bench_attention.py --forward-only
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nadaraya.nn.functional import kernel_attention

KERNELS = ("softmax", "rbf", "laplacian", "cosine", "polynomial")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}

Run = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(run: Run, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
           backward: bool) -> float:
    _sync(q.device)
    start = time.perf_counter()
    if backward:
        out = run(q, k, v)
        torch.autograd.grad(out, (q, k, v), g)
    else:
        with torch.no_grad():
            run(q, k, v)
    _sync(q.device)
    return time.perf_counter() - start


def _flex(name: str, scale: float) -> Run | None:
    """FlexAttention with the kernel's score modification, or None where it does not run."""
    try:
        from torch.nn.attention.flex_attention import flex_attention
    except ImportError:
        return None
    compiled = torch.compile(flex_attention, dynamic=False)

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if name == "softmax":
            return compiled(q, k, v, scale=scale)
        if name == "rbf":
            # -s ||q - k||^2 / 2 = s q.k - s ||k||^2 / 2 - s ||q||^2 / 2 (the last cancels)
            bias = -0.5 * scale * k.float().square().sum(-1)
            return compiled(q, k, v, scale=scale,
                            score_mod=lambda s, b, h, i, j: s - bias[b, h, j])
        if name == "laplacian":
            qn, kn = q.float().square().sum(-1), k.float().square().sum(-1)
            root = scale ** 0.5

            def mod(s: torch.Tensor, b: Any, h: Any, i: Any, j: Any) -> torch.Tensor:
                r2 = (qn[b, h, i] + kn[b, h, j] - 2.0 * s).clamp(min=0.0)
                return -root * torch.sqrt(r2)

            return compiled(q, k, v, scale=1.0, score_mod=mod)
        raise KeyError(name)

    return run if name in ("softmax", "rbf", "laplacian") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS))
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--flex", action="store_true", help="also FlexAttention (CUDA default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    shape = (args.batch, args.heads, args.length, args.features)
    backward = not args.forward_only
    q, k, v = (torch.randn(shape, device=device, dtype=dtype).requires_grad_(backward)
               for _ in range(3))
    g = torch.randn(shape, device=device, dtype=dtype)
    scale = args.features ** -0.5
    causal = args.causal

    runs: dict[str, Run] = {
        "sdpa": lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal)}
    for name in args.kernels:
        runs[name] = (lambda a, b, c, name=name:
                      kernel_attention(a, b, c, name, is_causal=causal))
    if args.flex or device.type == "cuda":
        for name in args.kernels:
            flex = _flex(name, scale)
            if flex is not None and not causal:
                runs[f"flex-{name}"] = flex
    times: dict[str, list[float]] = {name: [] for name in runs}
    failed: dict[str, str] = {}
    for name, run in runs.items():  # warm up (and compile)
        try:
            _timed(run, q, k, v, g, backward)
        except Exception as exc:  # a peer that does not run here is reported, not fatal
            failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
    for _ in range(args.repeats):
        for name, run in runs.items():
            if name not in failed:
                times[name].append(_timed(run, q, k, v, g, backward))
    what = "forward" if not backward else "forward + backward"
    print(f"{what}, B={args.batch} H={args.heads} L={args.length} E={args.features} "
          f"{args.dtype} {device} threads={args.threads} causal={causal}, "
          f"median of {args.repeats}")
    base = statistics.median(times["sdpa"])
    print(f"{'method':<18}{'seconds':>10}{'x sdpa':>9}")
    for name in runs:
        if name in failed:
            print(f"{name:<18}{'failed':>10}   {failed[name]}")
            continue
        t = statistics.median(times[name])
        print(f"{name:<18}{t:>10.4f}{t / base:>9.2f}")


if __name__ == "__main__":
    main()
