"""Capacity of associative memories built on ``nadaraya.smooth``.

Following Millidge et al. (2022, "Universal Hopfield Networks"): store ``N``
images, query with corrupted copies, and count a retrieval as correct when
its squared error to the stored image is below a threshold ``T``; report the
fraction correct against ``N`` for each similarity x separation.

* Data: scikit-learn's ``load_digits`` (1797 images of 8 x 8 = 64 pixels,
  scaled to [0, 1]); with ``--full`` also Fashion-MNIST (the 10 000 test
  images, 784 pixels) when its files are present offline (Debian package
  ``dataset-fashion-mnist``, or ``--fashion DIR``).
* Corruptions: ``noise``: ``clip(|x + N(0, 0.2^2)|, 0, 1)`` (as Millidge et al.);
  ``mask``: the bottom half of the image set to 0.
* Threshold: ``T = 0.25`` for digits and ``T = 2.0`` for Fashion-MNIST, below
  half the 1st percentile of the squared distance between an image and its
  nearest other image (0.34 and 4.6), so landing on another stored image
  never counts as correct.
* Memories: similarity in {dot, cosine, euclidean (-||q-k||_2), manhattan
  (-||q-k||_1)} x separation in {softmax (beta = 1000 and 10), max, identity
  (normalised), power (beta = 10, normalised)}, and the linear-regression
  memory (whitened dot product ``q^T (P^T P)^+ k``, identity, unnormalised).
* Linear-regression capacity against ``d``: hetero-associative pairs (random
  Gaussian keys in ``d`` dimensions -> digit images), queried with the keys
  themselves; ``N_max`` is the largest ``N`` recalled *perfectly* (squared
  error below 1e-10). Seed 003 predicts ``N_max = d``. The same with digit
  images as keys (64 pixels, 3 of them always blank) shows that it is the
  rank of the keys that counts.

Run::

    python benchmarks/bench_memory.py --figure capacity.png --weights-figure weights.png
    python benchmarks/bench_memory.py --full --figure capacity.png   # + Fashion-MNIST

``--weights-figure`` also draws seed 003's comparison: the weight matrices of
linear regression ``X S^-1 X^T``, Gaussian Nadaraya-Watson and softmax
attention ``softmax(X W_q W_k^T X^T / sqrt(d))`` on the iris data (standardised,
rows ordered by species).
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nadaraya.memory import AssociativeMemory, plot_weight_matrices

SIMILARITIES = ("dot", "cosine", "euclidean", "manhattan")
SEPARATIONS = (("softmax", 1000.0), ("softmax", 10.0), ("max", 1.0), ("identity", 1.0),
               ("power", 10.0))
LR_MEMORY = ("whitened", "identity", 1.0)
CORRUPTIONS = ("noise", "mask")
FASHION_DIRS = ("/usr/share/datasets/fashion-mnist",)
PERFECT = 1e-10


# -- data ---------------------------------------------------------------------
def load_digits01() -> dict[str, Any]:
    from sklearn.datasets import load_digits

    return {"name": "digits", "images": load_digits().data / 16.0, "shape": (8, 8),
            "threshold": 0.25, "queries": None}


def load_fashion(where: str | None) -> dict[str, Any] | None:
    dirs = (where,) if where else FASHION_DIRS
    for d in dirs:
        path = Path(d) / "t10k-images-idx3-ubyte.gz"
        if path.exists():
            with gzip.open(path) as f:
                raw = f.read()
            images = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 784) / 255.0
            return {"name": "fashion-mnist", "images": images, "shape": (28, 28),
                    "threshold": 2.0, "queries": 200}
    return None


def corrupt(P: np.ndarray, kind: str, shape: tuple[int, int],
            rng: np.random.Generator) -> np.ndarray:
    if kind == "noise":
        return np.clip(np.abs(P + 0.2 * rng.normal(size=P.shape)), 0.0, 1.0)
    Q = P.reshape(-1, *shape).copy()
    Q[:, shape[0] // 2:, :] = 0.0
    return Q.reshape(P.shape)


# -- experiments ----------------------------------------------------------------
def fraction_correct(mem: AssociativeMemory, stored: np.ndarray, queries: np.ndarray,
                     threshold: float) -> float:
    out = mem.retrieve(queries)
    return float(np.mean(np.sum((out - stored) ** 2, axis=1) < threshold))


def capacity(data: dict[str, Any], sizes: list[int], seed: int) -> dict[tuple, list[float]]:
    """Fraction correct for every (corruption, similarity, separation) and N."""
    rng = np.random.default_rng(seed)
    images, T = data["images"], data["threshold"]
    configs = [(s, sep, beta, True) for s in SIMILARITIES for sep, beta in SEPARATIONS]
    configs.append((*LR_MEMORY, False))
    results: dict[tuple, list[float]] = {}
    for n in sizes:
        idx = rng.choice(len(images), size=n, replace=False)
        P = images[idx]
        probe = np.arange(n) if data["queries"] is None else \
            rng.choice(n, size=min(n, data["queries"]), replace=False)
        for kind in CORRUPTIONS:
            Q = corrupt(P[probe], kind, data["shape"], rng)
            for sim, sep, beta, normalize in configs:
                mem = AssociativeMemory(P, similarity=sim, separation=sep, beta=beta,
                                        normalize=normalize)
                frac = fraction_correct(mem, P[probe], Q, T)
                results.setdefault((kind, sim, sep, beta), []).append(frac)
    return results


def lr_capacity(dims: list[int], seed: int) -> dict[str, Any]:
    """Largest N recalled perfectly by the linear-regression memory, for each d."""
    rng = np.random.default_rng(seed)
    digits = load_digits01()["images"]

    def perfect(keys: np.ndarray, values: np.ndarray) -> float:
        mem = AssociativeMemory(keys, values, similarity="whitened", separation="identity",
                                normalize=False)
        return fraction_correct(mem, values, keys, PERFECT)

    rows = {}
    for d in dims:
        fracs = {}
        for n in sorted({max(1, d // 2), d - 1, d, d + 1, 2 * d}):
            keys = rng.normal(size=(n, d))
            values = digits[rng.choice(len(digits), size=n, replace=False)]
            fracs[n] = perfect(keys, values)
        n_max = max(n for n, f in fracs.items() if f == 1.0)
        rows[d] = {"fractions": fracs, "n_max": n_max}
    # digit images as keys: many pixels are blank in most images, so N digits
    # span fewer than N dimensions well before N = 64
    fracs, ranks = {}, {}
    for n in range(40, 66, 2):
        keys = digits[rng.choice(len(digits), size=n, replace=False)]
        fracs[n] = perfect(keys, rng.normal(size=(n, 10)))
        ranks[n] = int(np.linalg.matrix_rank(keys))
    return {"random": rows, "digits": {"fractions": fracs, "ranks": ranks,
                                       "n_max": max(n for n, f in fracs.items() if f == 1.0)}}


# -- reporting ------------------------------------------------------------------
def label(sim: str, sep: str, beta: float) -> str:
    if (sim, sep, beta) == LR_MEMORY:
        return "whitened x identity (linear regression, unnormalised)"
    return f"{sim} x {sep}" + (f" (beta={beta:g})" if sep in ("softmax", "power") else "")


def table(name: str, sizes: list[int], results: dict[tuple, list[float]]) -> str:
    lines = []
    for kind in CORRUPTIONS:
        lines.append(f"\n{name}, corruption = {kind}: fraction correct against N")
        head = "| memory | " + " | ".join(f"N={n}" for n in sizes) + " |"
        lines += [head, "|" + "---|" * (len(sizes) + 1)]
        for (k, *config), fr in results.items():
            if k == kind:
                lines.append(f"| {label(*config)} | " + " | ".join(f"{f:.2f}" for f in fr)
                             + " |")
    return "\n".join(lines)


def verdicts(results: dict[tuple, list[float]]) -> list[str]:
    """The paper's two claims, checked on the mean fraction correct over N."""
    out = []
    for kind in CORRUPTIONS:
        mean = {k[1:]: float(np.mean(v)) for k, v in results.items() if k[0] == kind}
        big = ("softmax", 1000.0)
        dot = mean[("dot", *big)]
        euc, man = mean[("euclidean", *big)], mean[("manhattan", *big)]
        ok1 = min(euc, man) > dot
        out.append(f"[{kind}] Euclidean and Manhattan beat the dot product (softmax): "
                   f"{'agrees' if ok1 else 'DISAGREES'} with the paper "
                   f"(mean fraction over N {euc:.2f}, {man:.2f} vs {dot:.2f})")
        soft = np.mean([mean[(s, *big)] for s in SIMILARITIES])
        ident = np.mean([mean[(s, "identity", 1.0)] for s in SIMILARITIES])
        out.append(f"[{kind}] softmax (beta=1000) stores more than identity: "
                   f"{'agrees' if soft > ident else 'DISAGREES'} with the paper "
                   f"(mean fraction over similarities {soft:.2f} vs {ident:.2f})")
    return out


def lr_table(lr: dict[str, Any]) -> str:
    lines = ["\nlinear-regression memory, random keys in d dimensions -> digit images, "
             "perfect recall (squared error < 1e-10)",
             "| d | N_max | fraction recalled at N = d/2, d-1, d, d+1, 2d |", "|---|---|---|"]
    for d, row in lr["random"].items():
        fr = ", ".join(f"{n}:{f:.2f}" for n, f in row["fractions"].items())
        lines.append(f"| {d} | {row['n_max']} | {fr} |")
    dg = lr["digits"]
    lines += ["", "digit images as keys (d = 64 pixels) -> random codes: N_max follows the "
              "rank of the stored keys, not d",
              "| N | " + " | ".join(str(n) for n in dg["fractions"]) + " |",
              "|---|" + "---|" * len(dg["fractions"]),
              "| rank of the N keys | " + " | ".join(str(r) for r in dg["ranks"].values()) + " |",
              "| fraction perfect | " + " | ".join(f"{f:.2f}" for f in dg["fractions"].values())
              + " |",
              f"N_max = {dg['n_max']}"]
    return "\n".join(lines)


def figure(path: str, datasets: list[tuple[dict, list[int], dict]], lr: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(d, kind) for d, _, _ in datasets for kind in CORRUPTIONS]
    fig, axes = plt.subplots(len(rows), len(SIMILARITIES) + 1,
                             figsize=(4 * (len(SIMILARITIES) + 1), 3.2 * len(rows)),
                             constrained_layout=True, squeeze=False)
    styles = {("softmax", 1000.0): ("C0", "o-"), ("softmax", 10.0): ("C4", "s-"),
              ("max", 1.0): ("C1", "x:"), ("identity", 1.0): ("C2", "o-"),
              ("power", 10.0): ("C3", "o-")}
    for r, (data, kind) in enumerate(rows):
        sizes, results = next((s, res) for d, s, res in datasets if d is data)
        for c, sim in enumerate(SIMILARITIES):
            ax = axes[r, c]
            for sep, beta in SEPARATIONS:
                colour, style = styles[(sep, beta)]
                ax.plot(sizes, results[(kind, sim, sep, beta)], style, ms=4, color=colour,
                        label=label(sim, sep, beta).split(" x ")[1])
            ax.plot(sizes, results[(kind, *LR_MEMORY)], "k--", lw=1,
                    label="linear regression")
            ax.set_xscale("log")
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"{data['name']}, {kind}: {sim}", fontsize=9)
            ax.set_xlabel("N stored")
            if c == 0:
                ax.set_ylabel("fraction correct")
            if r == 0 and c == 0:
                ax.legend(fontsize=7)
        ax = axes[r, -1]
        if r == 0:
            dims = list(lr["random"])
            ax.plot(dims, [lr["random"][d]["n_max"] for d in dims], "o-", label="N_max")
            ax.plot(dims, dims, "k:", label="N = d (seed 003)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xlabel("d (key dimension)")
            ax.set_ylabel("N_max (perfect recall)")
            ax.set_title("linear-regression memory capacity", fontsize=9)
            ax.legend(fontsize=7)
        elif r == 1:
            for d, row in lr["random"].items():
                ns = list(row["fractions"])
                ax.plot(np.array(ns) / d, list(row["fractions"].values()), "o-", ms=3,
                        label=f"d={d}")
            ax.set_xlabel("N / d")
            ax.set_ylabel("fraction recalled perfectly")
            ax.set_title("linear-regression memory: recall against N / d", fontsize=9)
            ax.legend(fontsize=7)
        else:
            ax.axis("off")
    fig.savefig(path, dpi=120)
    print(f"figure written to {path}")


def weights_figure(path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from sklearn.datasets import load_iris

    iris = load_iris()
    order = np.argsort(iris.target, kind="stable")
    X = iris.data[order]
    X = (X - X.mean(0)) / X.std(0)
    fig = plot_weight_matrices(X, bandwidth=1.0)
    fig.suptitle("iris (standardised, rows ordered by species): three smoothers of the "
                 "form X M X^T", fontsize=11)
    fig.savefig(path, dpi=120)
    print(f"weights figure written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figure", help="write the capacity figure here (png, pdf, svg)")
    parser.add_argument("--weights-figure", help="write seed 003's weight-matrix figure here")
    parser.add_argument("--full", action="store_true",
                        help="finer N grid, larger d, and Fashion-MNIST if present")
    parser.add_argument("--fashion", help="directory of the Fashion-MNIST .gz files")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()

    if args.weights_figure:
        weights_figure(args.weights_figure)

    digits = load_digits01()
    sizes = [10, 30, 100, 300, 1000, 1797] if not args.full else \
        [5, 10, 20, 50, 100, 200, 500, 1000, 1797]
    datasets = [(digits, sizes, capacity(digits, sizes, args.seed))]
    if args.full:
        fashion = load_fashion(args.fashion)
        if fashion is None:
            print("Fashion-MNIST not found offline; digits only.")
        else:
            fsizes = [10, 100, 1000, 10000]
            datasets.append((fashion, fsizes, capacity(fashion, fsizes, args.seed)))
    dims = [8, 16, 32, 64] if not args.full else [4, 8, 16, 32, 64, 128, 256]
    lr = lr_capacity(dims, args.seed)

    for data, s, res in datasets:
        print(table(f"{data['name']} (T = {data['threshold']})", s, res))
        print()
        for line in verdicts(res):
            print(f"{data['name']}: {line}")
    print(lr_table(lr))
    if args.figure:
        figure(args.figure, datasets, lr)
    print(f"\ntotal time {time.perf_counter() - start:.0f} s "
          f"({args.threads} torch thread(s))")


if __name__ == "__main__":
    main()
