"""Engine benchmark: nadaraya.smooth against its peers, in one run, as ratios.

Tasks (the engine issue):

* ``1d``: Gaussian, h = 0.3, x ~ U(0, 6), y = 2 sin x + N(0, 1), m = n in
  ``--sizes``. Peers: statsmodels ``KernelReg``, the scikit-learn chunked
  ``rbf_kernel`` recipe, KeOps on CPU (pykeops, if installed), raw torch
  ``scaled_dot_product_attention`` with the Gaussian's key bias.
* ``narrow``: the 1-D task at h = 0.05 (about the bandwidth leave-one-out
  cross-validation picks at n = 1e5), where most of the Gaussian's weights
  are below rounding: the pruned engine's ground. Same peers.
* ``d16``, ``d64``: the same in 16 and 64 dimensions, x ~ N(0, I), h = sqrt(d) / 2.
* ``knn``: uniform kernel + ``KNearest(32)``, n = m = 1e6, d = 2, against
  scikit-learn ``KNeighborsRegressor``; and the Epanechnikov kernel with a
  bandwidth holding about 32 keys.
* ``big``: the 1-D task with n = 1e6 keys for nadaraya alone: time and peak
  memory for ``--big-queries`` of the queries (all 1e6 by default; fewer
  give the time per query, and the full time is that times 1e6).

Every measurement runs in a fresh subprocess (peak memory is that process's
peak resident set, shown beside the resident set after imports and data;
the CPU seconds of all its threads are shown beside the wall clock, steadier
on a shared machine),
after a small warm-up call (KeOps compiles on its first call). A peer whose
time projected from the previous size (O(n m)) exceeds ``--cap`` seconds is
skipped and says so. Agreement is the largest difference to nadaraya's
float64 result, relative to the largest absolute value of that result.

Run ``python benchmarks/bench_engine.py --help`` for the options; the closing
note of the engine issue used::

    python benchmarks/bench_engine.py --tasks 1d,d16,d64,knn,big

``--engine`` makes nadaraya run one engine (the float32 time of each, with no
peers: ``--tasks 1d --sizes 1e5 --peers none --engine streamed``);
``benchmarks/bench_accuracy.py`` gives every engine's float32 error.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

H_1D = 0.3
H_NARROW = 0.05
TASKS = ("1d", "narrow", "d16", "d64", "knn", "big")


# -- data ---------------------------------------------------------------------
def make_data(task: str, n: int, dtype: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Keys (n, d), values (n,), bandwidth; queries are the keys."""
    rng = np.random.default_rng(0)
    if task in ("1d", "big", "narrow"):
        x = rng.uniform(0, 6, (n, 1))
        y = 2 * np.sin(x[:, 0]) + rng.normal(size=n)
        h = H_NARROW if task == "narrow" else H_1D
    elif task in ("d16", "d64"):
        d = int(task[1:])
        x = rng.normal(size=(n, d))
        y = np.sin(x[:, 0]) + rng.normal(size=n)
        h = np.sqrt(d) / 2
    else:  # knn / compact: unit square
        x = rng.uniform(0, 1, (n, 2))
        y = np.sin(6 * x[:, 0]) * np.cos(6 * x[:, 1]) + 0.1 * rng.normal(size=n)
        h = float(np.sqrt(32 / (np.pi * n)))  # about 32 keys inside radius h
    return x.astype(dtype), y.astype(dtype), h


# -- methods (run inside the worker) ----------------------------------------------
def ours(x: np.ndarray, y: np.ndarray, h: float, kind: str,
         queries: np.ndarray | None = None, engine: str = "auto") -> tuple[np.ndarray, str]:
    import nadaraya
    from nadaraya.masks import KNearest

    q = x if queries is None else queries
    if kind == "knn":
        args: tuple[Any, ...] = ("uniform", KNearest(32))
        kw: dict[str, Any] = {"bandwidth": 1e30}
    elif kind == "compact":
        args, kw = ("epanechnikov",), {"bandwidth": h}
    else:
        args, kw = ("gaussian",), {"bandwidth": h}
    kw["engine"] = engine
    used = nadaraya.explain(q, x, y, *args, **kw).engine
    return nadaraya.smooth(q, x, y, *args, **kw, empty="nearest"), used


def statsmodels_kernelreg(x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    kr = KernelReg(y, x, "c" * x.shape[1], reg_type="lc", bw=[h] * x.shape[1])
    return kr.fit(x)[0]


def sklearn_chunked(x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    from sklearn.metrics.pairwise import rbf_kernel

    out = np.empty(x.shape[0], dtype=x.dtype)
    step = 1024
    for s in range(0, x.shape[0], step):
        w = rbf_kernel(x[s:s + step], x, gamma=1.0 / (2 * h * h))
        out[s:s + step] = (w @ y) / w.sum(1)
    return out


def keops(x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    from pykeops.numpy import LazyTensor

    xi = LazyTensor(x[:, None, :])
    xj = LazyTensor(x[None, :, :])
    yj = LazyTensor(y[None, :, None])
    scores = -((xi - xj) ** 2).sum(-1) / x.dtype.type(2 * h * h)
    return scores.sumsoftmaxweight(yj, axis=1)[:, 0]


def torch_sdpa(x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    q = torch.from_numpy(x)
    v = torch.from_numpy(y)[:, None]
    bias = -(q * q).sum(1) / (2 * h * h)  # -||k||^2 / 2h^2; the query term cancels
    mask = bias[None, :].expand(q.shape[0], -1)
    # 4-D (batch, heads, length, features): the layout of the fused CPU kernel
    out = F.scaled_dot_product_attention(q[None, None], q[None, None], v[None, None],
                                         attn_mask=mask[None, None], scale=1.0 / (h * h))
    return out[0, 0, :, 0].numpy()


def sklearn_knn(x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    from sklearn.neighbors import KNeighborsRegressor

    return KNeighborsRegressor(n_neighbors=32, n_jobs=-1).fit(x, y).predict(x)


PEERS = {
    "statsmodels": statsmodels_kernelreg,
    "sklearn-rbf": sklearn_chunked,
    "keops-cpu": keops,
    "torch-sdpa": torch_sdpa,
    "sklearn-knn": sklearn_knn,
}


def worker(method: str, task: str, n: int, dtype: str, out_path: str,
           n_queries: int | None = None, engine: str = "auto") -> None:
    """Run one measurement and print a JSON line."""
    import torch  # noqa: F401  (import cost outside the timing)

    x, y, h = make_data(task, n, dtype)
    if n_queries is not None and task == "big":
        big_queries = x[:n_queries]
        result, used = ours(x[:64], y[:64], h, "gaussian", engine=engine)  # warm-up
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0, c0 = time.perf_counter(), time.process_time()
        result, used = ours(x, y, h, "gaussian", queries=big_queries, engine=engine)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        np.save(out_path, np.asarray(result, dtype=np.float64))
        print(json.dumps({"time": elapsed, "cpu": cpu, "peak_mb": peak, "base_mb": base,
                          "engine": f"{used}, {n_queries} queries"}))
        return
    xs, ys, _ = make_data(task, 64, dtype)
    kind = {"knn": "knn", "compact": "compact"}.get(method.split(":")[-1], "gaussian")
    run = (lambda a, b: ours(a, b, h if a is x else max(h, 0.3), kind,
                             engine=engine)) if method.startswith(
        "nadaraya") else (lambda a, b: (PEERS[method](a, b, h if a is x else max(h, 0.3)), ""))
    run(xs, ys)  # warm-up: compilation, thread pools, first-call costs
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    result, used = run(x, y)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.save(out_path, np.asarray(result, dtype=np.float64))
    print(json.dumps({"time": elapsed, "cpu": cpu, "peak_mb": peak, "base_mb": base,
                      "engine": used}))


# -- driver -------------------------------------------------------------------
def measure(method: str, task: str, n: int, dtype: str, timeout: float,
            tmp: Path, n_queries: int | None = None, engine: str = "auto") -> dict[str, Any]:
    out = tmp / f"{method.replace(':', '_')}_{task}_{n}_{dtype}.npy"
    cmd = [sys.executable, __file__, "--worker", method, task, str(n), dtype, str(out),
           str(n_queries or 0), engine]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": f"failed: {tail[0][:80]}"}
    rec = json.loads(lines[-1])
    rec["result"] = np.load(out)
    return rec


def run_task(task: str, sizes: list[int], peers: list[str], cap: float,
             tmp: Path, big_queries: int | None = None,
             engine: str = "auto") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if task == "big":
        plan = [("nadaraya", "float32"), ("nadaraya", "float64")]
        sizes = [1_000_000]
    elif task == "knn":
        plan = [("nadaraya:knn", "float64"), ("sklearn-knn", "float64"),
                ("nadaraya:compact", "float64")]
        sizes = [1_000_000]
    else:
        plan = [("nadaraya", "float64"), ("nadaraya", "float32")]
        plan += [(p, dt) for p in ("statsmodels", "sklearn-rbf") if p in peers
                 for dt in ("float64",)]
        plan += [(p, dt) for p in ("keops-cpu", "torch-sdpa") if p in peers
                 for dt in ("float64", "float32")]
    last: dict[tuple[str, str], tuple[int, float]] = {}
    for n in sizes:
        reference = None
        for method, dtype in plan:
            key = (method, dtype)
            if key in last:
                n0, t0 = last[key]
                projected = t0 * (n / n0) ** 2
                if projected > cap:
                    rows.append({"task": task, "n": n, "method": method, "dtype": dtype,
                                 "error": f"skipped: projected {projected:.0f} s > cap"})
                    last[key] = (n, projected)
                    continue
            timeout = max(cap * 1.5, 60) if task != "big" else 3600
            rec = measure(method, task, n, dtype, timeout, tmp,
                          big_queries if task == "big" else None,
                          engine if method.startswith("nadaraya") else "auto")
            rec.update(task=task, n=n, method=method, dtype=dtype)
            if "result" in rec:
                last[key] = (n, rec["time"])
                if reference is None and method.startswith("nadaraya") and dtype == "float64":
                    reference = rec["result"]
                if reference is not None and method != "nadaraya:compact":
                    scale = max(np.abs(reference).max(), 1e-300)
                    rec["agree"] = float(np.abs(rec["result"] - reference).max() / scale)
            rows.append(rec)
            print(format_row(rec, rows), flush=True)
    return rows


def _ours_time(row: dict[str, Any], rows: list[dict[str, Any]]) -> float | None:
    for r in rows:
        if (r["task"], r["n"], r["dtype"]) == (row["task"], row["n"], row["dtype"]) and \
                r["method"].startswith("nadaraya") and "time" in r and \
                r["method"] != "nadaraya:compact":
            return r["time"]
    return None


def format_row(r: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    head = f"{r['task']:<5} {r['n']:>8.0e} {r['method']:<17} {r['dtype']:<8}"
    if "error" in r:
        return f"{head} {r['error']}"
    ours_t = _ours_time(r, rows)
    ratio = f"{r['time'] / ours_t:7.2f}x" if ours_t else "      - "
    agree = f"{r['agree']:.1e}" if "agree" in r else "   -   "
    eng = r.get("engine") or ""
    cpu = f"(cpu {r['cpu']:8.2f} s)" if "cpu" in r else ""
    return (f"{head} {r['time']:9.3f} s {cpu} {ratio}  peak {r['peak_mb']:7.0f} MB "
            f"(after data {r['base_mb']:5.0f})  agree {agree}  {eng}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="1d,d16,d64,knn",
                        help=f"comma-separated from {','.join(TASKS)}")
    parser.add_argument("--sizes", default="1e3,1e4,1e5",
                        help="m = n values for 1d and narrow")
    parser.add_argument("--dim-sizes", default="1e4,1e5", help="m = n values for d16/d64")
    parser.add_argument("--peers", default=",".join(PEERS), help="peers to run")
    parser.add_argument("--cap", type=float, default=300.0,
                        help="skip a peer whose projected time exceeds this (s)")
    parser.add_argument("--big-queries", type=float, default=None,
                        help="queries for the big task (default: all 1e6)")
    parser.add_argument("--engine", default="auto",
                        help="engine nadaraya runs (default auto; see nadaraya.engine.ENGINES)")
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        method, task, n, dtype, out, nq, engine = args.worker
        worker(method, task, int(float(n)), dtype, out, int(nq) or None, engine)
        return
    peers = args.peers.split(",")
    print("task  n        method            dtype         time (cpu time)            ratio  "
          "memory                          agreement  engine")
    print("(ratio = time / nadaraya's time at the same size and dtype; >1 means slower "
          "than nadaraya)")
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks.split(","):
            if task not in TASKS:
                raise SystemExit(f"unknown task {task!r}; choose from {TASKS}")
            sizes = args.sizes if task in ("1d", "narrow") else args.dim_sizes
            run_task(task, [int(float(s)) for s in sizes.split(",")], peers, args.cap,
                     Path(tmp), int(args.big_queries) if args.big_queries else None,
                     args.engine)


if __name__ == "__main__":
    main()
