"""Which attention kernel reads Shakespeare best? Validation bits per character at a fixed budget.

Seed 002 reads a language model as kernel smoothing over earlier characters;
Tsai et al. (2019, "Transformer Dissection") compared attention kernels and
found the exponential (softmax) and RBF kernels best, the polynomial kernel
worse, and the linear kernel failing to converge; and that position enters
best as a product kernel ``k_F(f_q, f_k) k_P(t_q, t_k)``. This benchmark asks
the same question at a scale a laptop runs, beside the Markov baseline.

* Text: Shakespeare's plays (Project Gutenberg, ``shakespeare`` 0.6), split by
  play; validation is five unseen plays (``nadaraya.nn.text``), of which the
  first ``--eval-chars`` characters are scored, for every model alike.
* Models: ``nadaraya.nn.TransformerLM`` with the same sizes and recipe for
  every kernel in {softmax, rbf, laplacian, polynomial, linear} x positional
  in {absolute, product}; the same budget, batch and seed for each.
* Budget: ``--steps`` steps, or with ``--time-budget MINUTES`` the same
  minutes of training per model on ``--clock`` (wall time, or the CPU time of
  this process); the learning-rate schedule (warmup, cosine to a floor) then
  follows the clock, so every model ends its schedule when its time is up.
* Baseline: the Markov n-gram with Witten-Bell smoothing, orders 3 to 7.
* Reported: validation bits per character (lower is better), steps done,
  wall and CPU seconds of training, "diverged" when the loss became
  non-finite; with ``--out-dir``, the learning curves (``curves.csv``: one row
  per evaluation) and a figure of them against the best n-gram
  (``curves.png``).

Run::

    python benchmarks/bench_lm.py                       # step budget: minutes per model
    python benchmarks/bench_lm.py --time-budget 60 --clock cpu --threads 2 --d-model 128 \\
        --layers 4 --heads 4 --context 128 --tie-embeddings --lr 3e-3 \\
        --out-dir lm-60cpu                              # the kernel comparison (docs)
    python benchmarks/bench_lm.py --curves run1/curves.csv run2/curves.csv --clock cpu \\
        --time-budget 60 --orders 6 --out-dir both      # one figure of several runs
    python benchmarks/bench_lm.py --steps 3000 --d-model 256 --layers 4 --context 256 \\
        --device cuda                                   # a larger run on a GPU
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path

import torch

from nadaraya._files import check_folder, output
from nadaraya.nn.lm import LMConfig, TransformerLM, evaluate, train
from nadaraya.nn.ngram import NGramLM
from nadaraya.nn.text import load_corpus

KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear")
POSITIONAL = ("absolute", "product")
CURVE_FIELDS = ("kernel", "positional", "step", "seconds", "cpu_seconds", "lr", "train_bits",
                "valid_bits")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per model (default 400, or no limit with --time-budget)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="MINUTES",
                        help="minutes of training per model")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=float, default=0.05)
    parser.add_argument("--min-lr", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--tie-embeddings", action="store_true")
    parser.add_argument("--eval-chars", type=int, default=100_000)
    parser.add_argument("--curve-chars", type=int, default=20_000,
                        help="validation characters per learning-curve point")
    parser.add_argument("--curve-points", type=int, default=8,
                        help="evaluations per model for the learning curve")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS))
    parser.add_argument("--positional", nargs="+", default=list(POSITIONAL))
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="folder for curves.csv and curves.png")
    parser.add_argument("--curves", type=Path, nargs="+", default=None, metavar="CSV",
                        help="train nothing: draw these curves.csv files of earlier runs "
                             "(same budget) in one figure in --out-dir, beside the n-grams")
    args = parser.parse_args()
    if args.curves and args.out_dir is None:
        parser.error("--curves draws a figure: give --out-dir for it")
    if args.steps is None and args.time_budget is None:
        args.steps = 400
    return args


def _read_curves(paths: list[Path]) -> list[dict]:
    """The rows of earlier runs' ``curves.csv`` files, numbers as floats."""
    rows: list[dict] = []
    for path in paths:
        with open(path, newline="") as f:
            rows += [{k: (v if k in ("kernel", "positional") else float(v)) for k, v in r.items()}
                     for r in csv.DictReader(f)]
    return rows


def _figure(curves: list[dict], best_ngram: tuple[str, float], budget: str, target,
            clock: str = "wall") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    runs: dict[tuple[str, str], list[dict]] = {}
    for row in curves:
        runs.setdefault((row["kernel"], row["positional"]), []).append(row)
    for (kernel, positional), rows in runs.items():
        style = "-" if positional == "absolute" else "--"
        seconds = "cpu_seconds" if clock == "cpu" else "seconds"
        for ax, x in zip(axes, (seconds, "step"), strict=True):
            ax.plot([r[x] for r in rows], [r["valid_bits"] for r in rows], style, marker=".",
                    label=f"{kernel}, {positional}")
    for ax, xlabel in zip(axes, (f"training seconds ({clock})", "steps"), strict=True):
        ax.axhline(best_ngram[1], color="black", lw=1, ls=":",
                   label=f"{best_ngram[0]}: {best_ngram[1]:.3f}")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation bits per character")
    axes[1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"Kernel transformers against the n-gram ({budget})")
    fig.tight_layout()
    with target.temporary_path() as path:
        fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    args = _arguments()
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = check_folder(args.out_dir, option="--out-dir") if args.out_dir else None
    corpus = load_corpus()
    valid = corpus.valid[:args.eval_chars]
    budget = (f"{args.time_budget:g} min ({args.clock} clock)" if args.time_budget
              else f"{args.steps} steps")
    print(f"train {corpus.train.size} chars ({len(corpus.train_plays)} plays), validation "
          f"{valid.size} chars of {', '.join(corpus.valid_plays)}")
    print(f"budget per model: {budget}; batch {args.batch} windows of {args.context} chars, "
          f"d_model {args.d_model}, {args.layers} layers, {args.heads} heads, tied "
          f"embeddings {args.tie_embeddings}, lr {args.lr:g}, device {args.device}, torch "
          f"threads {torch.get_num_threads()}\n")
    rows, curves = [], []
    for order in args.orders:
        lm = NGramLM(order, vocab_size=corpus.vocab.size).fit(corpus.train)
        rows.append((f"{order}-gram (Witten-Bell)", "-", lm.bits_per_char(valid), 0, 0.0, 0.0,
                     False))
        print(f"{rows[-1][0]:<28} {rows[-1][2]:.3f}", flush=True)
    best = min(rows, key=lambda r: r[2]) if rows else ("n-gram", math.nan)
    if args.curves:
        _figure(_read_curves(args.curves), (best[0], best[2]), budget,
                output(folder / "curves.png", option="--out-dir", parents=True), args.clock)
        print(f"\nlearning curves of {len(args.curves)} run(s): {folder / 'curves.png'}")
        return
    every = ((60 * args.time_budget / args.curve_points, 0) if args.time_budget
             else (None, max(args.steps // args.curve_points, 1)))
    for positional in args.positional:
        for kernel in args.kernels:
            torch.manual_seed(args.seed)
            config = LMConfig(vocab_size=corpus.vocab.size, kernel=kernel,
                              positional=positional, d_model=args.d_model,
                              n_layers=args.layers, n_heads=args.heads, context=args.context,
                              dropout=args.dropout, tie_embeddings=args.tie_embeddings,
                              alphabet=corpus.vocab.chars)
            model = TransformerLM(config).to(args.device)
            history = train(
                model, corpus.train, valid[:args.curve_chars], steps=args.steps,
                time_budget=60 * args.time_budget if args.time_budget else None,
                clock=args.clock, batch=args.batch, lr=args.lr, warmup=args.warmup,
                min_lr=args.min_lr, weight_decay=args.weight_decay, seed=args.seed,
                eval_seconds=every[0], eval_every=every[1], eval_chars=None, progress=False)
            curves += [{"kernel": kernel, "positional": positional, **row}
                       for row in history["curve"]]
            bits = math.nan
            if not history["diverged"]:
                bits = evaluate(model, valid)
            rows.append((f"transformer {kernel}", positional, bits, history["steps"],
                         history["seconds"], history["cpu_seconds"], history["diverged"]))
            status = "diverged" if history["diverged"] else f"{bits:.3f}"
            print(f"{rows[-1][0]:<28} {positional:<9} {status:>8} {history['steps']:6d} steps "
                  f"{history['seconds']:7.0f} s {history['cpu_seconds']:7.0f} cpu s", flush=True)
    print(f"\n{'model':<28} {'position':<9} {'bits/char':>9} {'steps':>6} {'train s':>8} "
          f"{'cpu s':>8} {'vs best n-gram':>15}")
    for name, pos, bits, steps, seconds, cpu, diverged in sorted(
            rows, key=lambda r: (math.inf if r[6] or math.isnan(r[2]) else r[2])):
        shown = "diverged" if diverged else f"{bits:9.3f}"
        ratio = f"{bits / best[2]:15.3f}" if not diverged else f"{'-':>15}"
        print(f"{name:<28} {pos:<9} {shown:>9} {steps:6d} {seconds:8.0f} {cpu:8.0f} {ratio}")
    if folder is not None:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=CURVE_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(curves)
        output(folder / "curves.csv", option="--out-dir", parents=True).write_text(
            text.getvalue())
        _figure(curves, (best[0], best[2]), budget,
                output(folder / "curves.png", option="--out-dir", parents=True), args.clock)
        print(f"\nlearning curves: {folder / 'curves.csv'}, {folder / 'curves.png'}")


if __name__ == "__main__":
    main()
