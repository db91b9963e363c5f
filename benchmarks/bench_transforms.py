"""Certified transforms and exact sweeps against their peers, in one run, as ratios.

The targets of the speed-at-scale issue. Data: keys x ~ U(0, 6)^d, values
y = 2 sin x_1 (times cos x_2 in 2-D and 3-D) + N(0, 1), queries drawn the
same way, n = m. Cases (``--cases``):

* ``gauss1d``: 1-D Gaussian, n = m = 1e6, h in {0.003, 0.03, 0.3}, ours at
  tolerance 1e-10 and at 1e-4 (the accuracy binning gives).
* ``gauss1d-1e7``: the same at n = m = 1e7.
* ``gauss2d``: 2-D Gaussian, n = m = 1e6, h = 0.1, tolerance 1e-8.
* ``gauss3d``: 3-D Gaussian, n = m = 1e6, h = 0.3, tolerance 1e-8.
* ``laplace1d``, ``epan1d``: 1-D Laplacian and Epanechnikov, n = m = 1e6,
  h in {0.03, 0.3}, exact (``tolerance=None``).
* ``memory``: ours alone at n = m = 1e7, h in {0.003, 0.03, 0.3}: Gaussian
  at 1e-10 and 1e-4 (the method ``smooth`` chooses), Gaussian binned at 1e-4
  (``engine="binned"``), Laplacian and Epanechnikov exact (the sweeps); each
  row is followed by the memory it held against the issue's target
  (:data:`TARGET_MB`, 500 MB). ``--kernels laplacian,epanechnikov`` keeps the
  sweeps alone.

Ours is the public API, ``nadaraya.smooth(queries, keys, values, kernel,
bandwidth=h, tolerance=tol)``; ``nadaraya.explain(..., tolerance=tol)`` names
the method it chose. Where ``explain`` picks an O(n m) engine for more than
``--max-pairs`` kernel evaluations, ours is not run and the line says why.
The peers (``benchmarks/_peers.py``) compute the same two sums, sum K and
sum K y, on the same data; the exact ones (pykeops, torch SDPA, statsmodels
``KernelReg``) on the first of the sampled queries that their evaluation
budget allows, their time scaled to all queries (said on their line).

Errors: ``m`` queries are sampled (2,000 by default) and their exact sums
computed in float64 with torch, in chunks, over every key whose term is not
exactly zero in float64 (a Gaussian term beyond 38.7 h, a Laplacian one
beyond 746 h and an Epanechnikov one beyond h round to 0, so skipping those
keys changes no sum). ``err`` is the largest ``|mean - exact mean| / max|y|``
over those queries, the measure the ``tolerance`` bounds, printed beside it;
``sumK`` the largest relative error of sum K, where a method gives it.

Each measurement runs in a fresh process after a warm-up call on a small
problem (KeOps compiles its formula then). ``time`` is the wall clock,
``cpu`` the CPU time of all threads (2 cores here); ``vs ours`` is the
peer's time over ours: against ours at the loosest tolerance for binned
peers, at the tightest for exact ones. ``peak`` is the process's peak
resident set (``resource.getrusage`` maxrss, reset before the call through
``/proc/self/clear_refs``; this driver stays small, since a child's maxrss
starts at its parent's), ``held`` that peak less the resident set before
the call: what the call itself held, its output included.

Run through ``./scripts/bench`` (which installs the peers into
``.venv-bench``)::

    ./scripts/bench --quick                       # every case, small sizes
    ./scripts/bench --cases gauss1d,laplace1d     # at the issue's sizes
    ./scripts/bench --cases gauss1d --sizes 1e5 --peers kdepy,keops
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from _machine import header
from _peers import PEERS

# a key whose scaled distance exceeds this adds exactly 0 to the float64 sums
CUTOFF = {"gaussian": 38.7, "laplacian": 746.0, "epanechnikov": 1.0}
# engines whose cost is O(n m) (neighbors: O(m x neighbours), as much at wide bandwidths)
QUADRATIC = ("dense", "streamed", "fused", "pruned", "autograd", "neighbors")


# the memory a call at n = m = 1e7 may hold (the target), in MB of 10^6 bytes
TARGET_MB = 500.0


@dataclass(frozen=True)
class Case:
    title: str
    d: int
    # (kernel, tolerances) or (kernel, tolerances, engine); the engine is "auto" by default
    groups: tuple[tuple[Any, ...], ...]
    bandwidths: tuple[float, ...]
    size: float
    quick_size: float
    peers: bool = True
    target: bool = False  # print each row's held memory against TARGET_MB


CASES = {
    "gauss1d": Case("1-D Gaussian", 1, (("gaussian", (1e-10, 1e-4)),), (0.003, 0.03, 0.3),
                    1e6, 1e4),
    "gauss1d-1e7": Case("1-D Gaussian", 1, (("gaussian", (1e-10, 1e-4)),),
                        (0.003, 0.03, 0.3), 1e7, 1e5),
    "gauss2d": Case("2-D Gaussian", 2, (("gaussian", (1e-8,)),), (0.1,), 1e6, 1e4),
    "gauss3d": Case("3-D Gaussian", 3, (("gaussian", (1e-8,)),), (0.3,), 1e6, 1e4),
    "laplace1d": Case("1-D Laplacian, exact", 1, (("laplacian", (None,)),), (0.03, 0.3),
                      1e6, 1e4),
    "epan1d": Case("1-D Epanechnikov, exact", 1, (("epanechnikov", (None,)),), (0.03, 0.3),
                   1e6, 1e4),
    "memory": Case("peak memory, ours alone", 1,
                   (("gaussian", (1e-10, 1e-4)), ("gaussian", (1e-4,), "binned"),
                    ("laplacian", (None,)), ("epanechnikov", (None,))),
                   (0.003, 0.03, 0.3), 1e7, 1e5, peers=False, target=True),
}


# -- data (each process makes the same arrays from the same seed) -------------------------------
def make_data(d: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries ``(m, d)``, keys ``(n, d)``, values ``(n,)``, float64."""
    rng = np.random.default_rng(0)
    keys = rng.uniform(0, 6, (n, d))
    values = 2 * np.sin(keys[:, 0])
    if d > 1:
        values *= np.cos(keys[:, 1])
    values += rng.normal(size=n)
    return rng.uniform(0, 6, (m, d)), keys, values


def sample_rows(m: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.sort(rng.choice(m, size=min(count, m), replace=False))


# -- what a child process runs -------------------------------------------------------------------
def oracle(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float) -> dict[str, Any]:
    """Exact float64 sums at the queries ``q`` (torch, chunked), every nonzero term."""
    import torch

    order = np.argsort(k[:, 0], kind="stable")
    first = k[order, 0]
    keys, values = torch.from_numpy(k[order]), torch.from_numpy(y[order])
    reach = CUTOFF[kernel] * h
    total, acc = np.zeros(len(q)), np.zeros(len(q))
    block = max(1, 2**22 // (16 * k.shape[1]))
    by_first = np.argsort(q[:, 0], kind="stable")  # neighbouring queries share their keys
    for s in range(0, len(q), 16):
        rows = by_first[s:s + 16]
        qc = torch.from_numpy(q[rows])
        lo = int(np.searchsorted(first, q[rows, 0].min() - reach, "left"))
        hi = int(np.searchsorted(first, q[rows, 0].max() + reach, "right"))
        for j in range(lo, hi, block):
            e = min(j + block, hi)
            r2 = (qc[:, None, :] - keys[None, j:e, :]).square_().sum(-1).div_(h * h)
            if kernel == "gaussian":
                w = r2.mul_(-0.5).exp_()
            elif kernel == "laplacian":
                w = r2.sqrt_().neg_().exp_()
            else:
                w = r2.neg_().add_(1.0).clamp_(min=0.0)
            total[rows] += w.sum(1).numpy()
            acc[rows] += (w @ values[j:e]).numpy()
    return {"mean": acc / total, "total": total}


def ours(q: np.ndarray, k: np.ndarray, y: np.ndarray, kernel: str, h: float,
         tol: float | None, engine: str = "auto", **_: Any) -> dict[str, Any]:
    import nadaraya

    kw = {} if tol is None else {"tolerance": tol}
    return {"mean": np.asarray(nadaraya.smooth(q, k, y, kernel, bandwidth=h, engine=engine,
                                               **kw)),
            "total": None}


def describe_ours(q: np.ndarray, k: np.ndarray, y: np.ndarray, spec: dict[str, Any]
                  ) -> tuple[str, str | None]:
    """The method ``explain`` names (and its plan), and why ours is not run, if it is not."""
    import nadaraya

    tol = spec["tol"]
    if tol is not None and "tolerance" not in inspect.signature(nadaraya.smooth).parameters:
        return "", "tolerance= not available in this nadaraya"
    kw = {} if tol is None else {"tolerance": tol}
    ex = nadaraya.explain(q, k, y, spec["kernel"], bandwidth=spec["h"],
                          engine=spec.get("engine", "auto"), **kw)
    what = " ".join([ex.engine, *_plan_facts(getattr(ex, "plan", None))])
    pairs = float(spec["n"]) * spec["m"]
    if ex.engine in QUADRATIC and pairs > spec["max_pairs"]:
        others = "; ".join(f"{name}: {why}" for name, why in ex.reasons.items()
                           if name != ex.engine and not why.startswith("not "))
        return what, (f"not run: the {ex.engine!r} engine is O(n m), {pairs:.0e} pairs > "
                      f"--max-pairs {spec['max_pairs']:.0e}" + (f" ({others})" if others else ""))
    return what, None


def _plan_facts(plan: Any) -> list[str]:
    """The short facts of a method's plan (order, cell size, grid, bound), as ``key=value``."""
    if not isinstance(plan, dict):
        return [] if plan is None else [str(plan)[:80]]
    facts = []
    for key, value in plan.items():
        if key == "method" or isinstance(value, bool):
            continue
        if isinstance(value, float):
            facts.append(f"{key}={value:.3g}")
        elif isinstance(value, int) or (isinstance(value, str) and len(value) <= 24):
            facts.append(f"{key}={value}")
        elif isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            facts.append(f"{key}={'x'.join(map(str, value))}")
    return facts


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement; the sums at the sampled queries go to ``spec["out"]``."""
    import torch  # noqa: F401  (its import outside the timing)

    q, k, y = make_data(spec["d"], spec["n"], spec["m"])
    sample = sample_rows(spec["m"], spec["samples"])
    method, kernel, h = spec["method"], spec["kernel"], spec["h"]
    if method == "oracle":
        t0 = time.perf_counter()
        res = oracle(q[sample], k, y, kernel, h)
        np.savez(spec["out"], mean=res["mean"], total=res["total"])
        return {"time": time.perf_counter() - t0, "scale": float(np.abs(y).max())}
    rec: dict[str, Any] = {}
    rows = None  # all queries; else the sampled ones an exact peer's budget allows
    if method == "ours":
        rec["what"], why = describe_ours(q, k, y, spec)
        if why:
            return {**rec, "skip": why}
        run = ours
    else:
        peer = PEERS[method]
        try:
            __import__(peer.module)
        except ImportError as exc:
            return {"skip": f"missing ({exc}); ./scripts/bench installs {peer.package}"}
        if peer.missing is not None and (why := peer.missing()):
            return {"skip": why}
        run = peer.run
        if peer.kind == "exact":
            rows = sample[:max(1, min(len(sample), int(peer.budget // spec["n"])))]
    kw = {"tol": spec["tol"], "grid_per_h": spec["grid_per_h"], "max_cells": spec["max_cells"]}
    if method == "ours":
        kw["engine"] = spec.get("engine", "auto")
    few = min(2000, spec["n"])
    run(q[:few], k[:few], y[:few], kernel, max(h, 0.3), **kw)  # warm-up
    reset = _reset_peak()
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(q if rows is None else q[rows], k, y, kernel, h, **kw)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    # a peer in another process (R) times its own computation
    elapsed, cpu = res.get("time", elapsed), res.get("cpu", cpu)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {}
    for key in ("mean", "total"):
        at = np.full(len(sample), np.nan)
        if res.get(key) is not None:
            got = np.asarray(res[key], dtype=float)
            if rows is None:
                at[:] = got[sample]
            else:
                at[:len(rows)] = got
        out[key] = at
    np.savez(spec["out"], **out)
    scale = 1.0 if rows is None else spec["m"] / len(rows)
    rec.update(time=elapsed * scale, cpu=cpu * scale, peak=peak, held=max(0.0, peak - base),
               note=res.get("note", ""), reset=reset)
    if rows is not None:
        rec["note"] = "; ".join(x for x in (
            f"{len(rows)} of {spec['m']:.0e} queries, time x {scale:.3g}", rec["note"]) if x)
    return rec


# -- the driver ----------------------------------------------------------------------------------
def measure(spec: dict[str, Any], timeout: float, tmp: Path) -> dict[str, Any]:
    spec = {**spec, "out": str(tmp / "sums.npz")}
    Path(spec["out"]).unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"skip": f"timed out after {timeout:.0f} s (--timeout)"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines()
                if ln.strip() and not ln.startswith("[KeOps]")][-1:] or ["?"]
        return {"skip": f"failed (exit {proc.returncode}): {tail[0][:160]}"}
    rec = json.loads(lines[-1])
    if "skip" not in rec:
        with np.load(spec["out"]) as f:
            rec.update(mean=f["mean"], total=f["total"])
    return rec


def errors(rec: dict[str, Any], exact: dict[str, Any] | None, scale: float) -> tuple[str, str]:
    if exact is None or "mean" not in rec:
        return "-", "-"
    out = []
    for key, norm in (("mean", np.full_like(exact["mean"], scale)), ("total", exact["total"])):
        ok = ~np.isnan(rec[key])
        out.append(f"{np.max(np.abs(rec[key][ok] - exact[key][ok]) / norm[ok]):.1e}"
                   if ok.any() else "-")
    return out[0], out[1]


def row(label: str, rec: dict[str, Any], exact: dict[str, Any] | None, scale: float,
        ours_time: float | None, tol: float | None = None) -> str:
    if "skip" in rec:
        what = f"  [{rec['what']}]" if rec.get("what") else ""
        return f"  {label:<22} {rec['skip']}{what}"
    err, total_err = errors(rec, exact, scale)
    if tol is not None and err != "-":
        err += f" (tol {tol:.0e})"
    ratio = f"{rec['time'] / ours_time:8.2f}" if ours_time else "       -"
    mark = "" if rec.get("reset", True) else " (peak since start)"
    note = rec.get("what") or rec.get("note", "")
    return (f"  {label:<22} {rec['time']:9.3f} {rec['cpu']:9.2f} {ratio}  {err:<19} "
            f"{total_err:<8} {rec['peak']:7.0f} {rec['held']:7.0f}{mark}  {note}")


HEADER = (f"  {'method':<22} {'time s':>9} {'cpu s':>9} {'vs ours':>8}  {'err/max|y|':<19} "
          f"{'sumK':<8} {'peak MB':>7} {'held MB':>7}  method / note")


def run_case(name: str, case: Case, args: argparse.Namespace, tmp: Path) -> None:
    sizes = args.sizes or [case.quick_size if args.quick else case.size]
    peers = [p for p in PEERS.values() if case.peers and p.name in args.peers]
    for size in sizes:
        n = m = int(size)
        for kernel, tolerances, *more in case.groups:
            engine = more[0] if more else "auto"
            if args.kernels and kernel not in args.kernels:
                continue
            if args.tolerances and tolerances != (None,):
                tolerances = tuple(args.tolerances)
            for h in args.bandwidths or case.bandwidths:
                using = "" if engine == "auto" else f", engine={engine!r}"
                print(f"\n== {name}: {case.title}, kernel {kernel}{using}, h = {h:g}, "
                      f"n = m = {n:.0e}, d = {case.d}", flush=True)
                spec = {"d": case.d, "n": n, "m": m, "kernel": kernel, "h": h, "tol": None,
                        "engine": engine, "samples": args.samples,
                        "grid_per_h": args.grid_per_h, "max_cells": args.max_cells,
                        "max_pairs": args.max_pairs}
                exact, scale = None, 1.0
                if case.peers:
                    rec = measure({**spec, "method": "oracle"}, args.timeout * 3, tmp)
                    if "skip" in rec:
                        print(f"  oracle: {rec['skip']}; no errors below")
                    else:
                        exact, scale = rec, rec["scale"]
                        print(f"  oracle: exact float64 sums at {len(rec['mean'])} sampled "
                              f"queries, {rec['time']:.1f} s")
                print(HEADER)
                times: dict[float | None, float] = {}
                for tol in tolerances:
                    rec = measure({**spec, "method": "ours", "tol": tol}, args.timeout, tmp)
                    label = "ours exact" if tol is None else f"ours tol={tol:.0e}"
                    print(row(label, rec, exact, scale, None, tol), flush=True)
                    if case.target:
                        print(memory_row(rec, n), flush=True)
                    if "time" in rec:
                        times[tol] = rec["time"]
                given = [t for t in tolerances if t is not None]
                loose, tight = max(given, default=None), min(given, default=None)
                for peer in peers:
                    if kernel not in peer.kernels or case.d not in peer.dims:
                        continue
                    rec = measure({**spec, "method": peer.name}, args.timeout, tmp)
                    ref = times.get(loose if peer.kind == "binned" else tight)
                    print(row(peer.name, rec, exact, scale, ref), flush=True)


def memory_row(rec: dict[str, Any], n: int) -> str:
    """The memory a run held against :data:`TARGET_MB` (a target set at n = m = 1e7)."""
    if "held" not in rec:
        return "  memory: -"
    held = rec["held"] * 2**20 / 1e6
    line = (f"  memory: held {held:.0f} MB (the inputs: {3 * 8 * n / 1e6:.0f} MB); "
            f"target <= {TARGET_MB:.0f} MB at n = m = 1e7")
    if n != 10**7:
        return line + f" (not this size: n = m = {n:.0e})"
    verdict = "within" if held <= TARGET_MB else "OVER"
    return line + f": {verdict}, {held / TARGET_MB:.2f} of it"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated from {','.join(CASES)} (default all)")
    parser.add_argument("--sizes", type=_floats, default=None,
                        help="n = m values for every case chosen (default: each case's own)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (1e4; 1e5 for the 1e7 cases): checks that all runs")
    parser.add_argument("--bandwidths", type=_floats, default=None,
                        help="h values for every case chosen (default: each case's own)")
    parser.add_argument("--kernels", default=None,
                        help="comma-separated kernels to run, of gaussian, laplacian, "
                             "epanechnikov (default: each case's own; --cases memory "
                             "--kernels laplacian,epanechnikov runs the sweeps alone)")
    parser.add_argument("--tolerances", type=_floats, default=None,
                        help="our tolerances for the Gaussian cases (default: each case's own)")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated from {','.join(PEERS)}, or none (default all)")
    parser.add_argument("--samples", type=int, default=2000,
                        help="queries sampled for the errors (default 2000)")
    parser.add_argument("--grid-per-h", type=float, default=8.0,
                        help="grid steps per bandwidth of the binned peers (default 8)")
    parser.add_argument("--max-cells", type=float, default=2**24,
                        help="largest grid of the binned peers, in cells (default 2^24)")
    parser.add_argument("--max-pairs", type=float, default=None,
                        help="ours is not run where explain() picks an O(n m) engine for more "
                             "kernel evaluations than this (default 1e11; 1e9 with --quick)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds for one measurement; the oracle gets three times as long")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    args.peers = [] if args.peers == "none" else args.peers.split(",")
    args.kernels = args.kernels.split(",") if args.kernels else None
    if args.max_pairs is None:
        args.max_pairs = 1e9 if args.quick else 1e11
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    unknown += [p for p in args.peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown case or peer {unknown}; cases: {', '.join(CASES)}; "
                     f"peers: {', '.join(PEERS)}")
    print(header(("nadaraya", "torch", "KDEpy", "fastkde", "pykeops", "statsmodels")))
    print("peers:")
    for peer in PEERS.values():
        where = f"{'/'.join(peer.kernels)}, d in {set(peer.dims)}"
        print(f"  {peer.name:<22} {peer.kind} ({where}): {peer.note}")
    print("vs ours: a peer's time over ours (>1: slower than ours); binned peers against ours\n"
          "  at the loosest tolerance, exact ones at the tightest. err/max|y|: the largest error\n"
          "  of the mean at the sampled queries over max|y| (what the tolerance bounds); sumK:\n"
          "  the largest relative error of sum K.")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            try:
                run_case(name, CASES[name], args, Path(tmp))
            except Exception as exc:  # one case failing leaves the others to run
                print(f"  case {name} failed: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
