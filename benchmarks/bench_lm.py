"""Which attention kernel reads Shakespeare best? Validation bits per character at a fixed budget.

Seed 002 reads a language model as kernel smoothing over earlier characters;
Tsai et al. (2019, "Transformer Dissection") compared attention kernels and
found the exponential (softmax) and RBF kernels best, the polynomial kernel
worse, and the linear kernel failing to converge; and that position enters
best as a product kernel ``k_F(f_q, f_k) k_P(t_q, t_k)``. This benchmark asks
the same question at a scale a laptop runs in minutes.

* Text: Shakespeare's plays (Project Gutenberg, ``shakespeare`` 0.6), split by
  play; validation is five unseen plays (``nadaraya.nn.text``).
* Models: ``nadaraya.nn.TransformerLM`` with the same sizes and optimiser for
  every kernel in {softmax, rbf, laplacian, polynomial, linear} x positional
  in {absolute, product}; the same number of steps, batch and seed for each.
* Baseline: the Markov n-gram with Witten-Bell smoothing, orders 3 to 7.
* Reported: validation bits per character (lower is better) on
  ``--eval-chars`` characters, training seconds, and "diverged" when the loss
  became non-finite.

Run::

    python benchmarks/bench_lm.py                       # CPU budget: a few minutes per model
    python benchmarks/bench_lm.py --steps 3000 --d-model 256 --layers 4 --context 256 \\
        --device cuda                                   # a larger run on a GPU
"""

from __future__ import annotations

import argparse
import math

import torch

from nadaraya.nn.lm import LMConfig, TransformerLM, train
from nadaraya.nn.ngram import NGramLM
from nadaraya.nn.text import load_corpus

KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear")
POSITIONAL = ("absolute", "product")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--eval-chars", type=int, default=100_000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS))
    parser.add_argument("--positional", nargs="+", default=list(POSITIONAL))
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    corpus = load_corpus()
    valid = corpus.valid[:args.eval_chars]
    print(f"train {corpus.train.size} chars ({len(corpus.train_plays)} plays), validation "
          f"{valid.size} chars of {', '.join(corpus.valid_plays)}")
    print(f"budget: {args.steps} steps x {args.batch} windows of {args.context} chars, "
          f"d_model {args.d_model}, {args.layers} layers, {args.heads} heads, "
          f"device {args.device}\n")
    rows = []
    for order in args.orders:
        lm = NGramLM(order, vocab_size=corpus.vocab.size).fit(corpus.train)
        rows.append((f"{order}-gram (Witten-Bell)", "-", lm.bits_per_char(valid), 0.0, False))
        print(f"{rows[-1][0]:<28} {rows[-1][2]:.3f}", flush=True)
    for positional in args.positional:
        for kernel in args.kernels:
            torch.manual_seed(args.seed)
            config = LMConfig(vocab_size=corpus.vocab.size, kernel=kernel,
                              positional=positional, d_model=args.d_model,
                              n_layers=args.layers, n_heads=args.heads, context=args.context,
                              alphabet=corpus.vocab.chars)
            model = TransformerLM(config).to(args.device)
            history = train(model, corpus.train, valid, steps=args.steps, batch=args.batch,
                            lr=args.lr, seed=args.seed, eval_chars=None, progress=False)
            bits = history["valid"][-1][1] if history["valid"] else math.nan
            rows.append((f"transformer {kernel}", positional, bits, history["seconds"],
                         history["diverged"]))
            status = "diverged" if history["diverged"] else f"{bits:.3f}"
            print(f"{rows[-1][0]:<28} {positional:<9} {status:>8} "
                  f"{history['seconds']:7.0f} s", flush=True)
    print(f"\n{'model':<28} {'position':<9} {'bits/char':>9} {'train s':>8}")
    for name, pos, bits, seconds, diverged in sorted(
            rows, key=lambda r: (math.inf if r[4] or math.isnan(r[2]) else r[2])):
        shown = "diverged" if diverged else f"{bits:9.3f}"
        print(f"{name:<28} {pos:<9} {shown:>9} {seconds:8.0f}")


if __name__ == "__main__":
    main()
