"""``nadaraya lm train``: build or resume a model, train it within its budget, save it.

Checkpoints go to ``--out`` (atomically, see :mod:`nadaraya._files`) every
``--checkpoint-every`` and when Ctrl-C or SIGTERM stops the run; ``--resume``
continues such a checkpoint exactly, and refuses options that contradict it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._errors import NadarayaError

__all__ = ["train_command"]


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


#: Model options of lm train: option -> (LMConfig field, default).
_MODEL = {"--kernel": ("kernel", "softmax"), "--positional": ("positional", "absolute"),
          "--tie-qk": ("tie_qk", False), "--tie-embeddings": ("tie_embeddings", False),
          "--d-model": ("d_model", 128), "--layers": ("n_layers", 2),
          "--heads": ("n_heads", 4), "--context": ("context", 128), "--dropout": ("dropout", 0.0)}
#: Recipe options of lm train: option -> Recipe field (defaults: Recipe's).
_RECIPE = {"--steps": "steps", "--time-budget": "time_budget", "--clock": "clock",
           "--batch": "batch", "--lr": "lr", "--warmup": "warmup", "--min-lr": "min_lr",
           "--weight-decay": "weight_decay", "--clip": "clip", "--seed": "seed"}


def _dest(option: str) -> str:
    return option[2:].replace("-", "_")


def _given_recipe(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe settings given on the command line (minutes turned into seconds)."""
    given = {field: getattr(args, _dest(option)) for option, field in _RECIPE.items()
             if getattr(args, _dest(option)) is not None}
    if "time_budget" in given:
        given["time_budget"] = 60.0 * given["time_budget"]
    return given


def _resumed(args: argparse.Namespace, device: Any) -> tuple[Any, Any]:
    """The model and training state of --resume, refused when given options contradict them."""
    from nadaraya.nn.lm import load_training

    try:
        model, state = load_training(args.resume, device=device)
    except NadarayaError as exc:
        raise NadarayaError(f"--resume: {exc}") from None
    differ = [f"{option} {getattr(args, _dest(option))} (the checkpoint has "
              f"{getattr(model.config, field)})" for option, (field, _) in _MODEL.items()
              if getattr(args, _dest(option)) is not None
              and getattr(args, _dest(option)) != getattr(model.config, field)]
    saved, given = state.recipe.to_dict(), _given_recipe(args)
    if saved["time_budget"] is not None:
        saved["time_budget"] /= 60.0
    if "time_budget" in given:
        given["time_budget"] /= 60.0
    differ += [f"{option} {given[field]} (the checkpoint has {saved[field]})"
               for option, field in _RECIPE.items()
               if field in given and given[field] != saved[field]]
    if differ:
        raise NadarayaError(f"--resume {args.resume}: the run was saved with other settings: "
                            f"{'; '.join(differ)}. Leave those options out to continue it, or "
                            "train a new model without --resume.")
    if state.finished:
        raise NadarayaError(f"--resume {args.resume}: that run already reached its budget "
                            f"({state.step} steps, {state.seconds / 60:.1f} minutes); nothing "
                            "is left to continue. Train a new model without --resume.")
    return model, state


def _new_model(args: argparse.Namespace, vocab: Any, device: Any) -> Any:
    import torch

    from nadaraya.nn.lm import LMConfig, TransformerLM

    for option, (_, default) in _MODEL.items():
        if getattr(args, _dest(option)) is None:
            setattr(args, _dest(option), default)
    if args.d_model % args.heads:
        raise NadarayaError(f"--d-model {args.d_model} is not a multiple of --heads "
                            f"{args.heads}; each head gets d-model / heads features. Change "
                            "one of them.")
    _check_memory(args, vocab.size)
    config = LMConfig(vocab_size=vocab.size, alphabet=vocab.chars,
                      **{field: getattr(args, _dest(option))
                         for option, (field, _) in _MODEL.items()})
    torch.manual_seed(args.seed or 0)
    return TransformerLM(config).to(device)


def train_command(args: argparse.Namespace) -> int:
    """Run ``nadaraya lm train``; returns the exit status (130 when a signal stopped it)."""
    import torch

    from nadaraya._files import write_or_rescue
    from nadaraya.nn.lm import save_checkpoint, train
    from nadaraya.nn.text import load_corpus

    device = _device(args.device)
    context = args.context
    state = None
    if args.resume is not None:
        model, state = _resumed(args, device)
        context = model.config.context
    if args.eval_chars <= (context or 128) + 1:
        raise NadarayaError(f"--eval-chars {args.eval_chars} leaves no window of --context "
                            f"{context or 128} to score; give more than {(context or 128) + 1}.")
    corpus = load_corpus()
    if state is None:
        model = _new_model(args, corpus.vocab, device)
        recipe = _given_recipe(args)
        if "steps" not in recipe and "time_budget" not in recipe:
            recipe["steps"] = 1000
        elif "steps" not in recipe:
            recipe["steps"] = None
    else:
        if model.config.alphabet != corpus.vocab.chars:
            raise NadarayaError(f"--resume {args.resume}: the checkpoint's alphabet differs "
                                "from the installed plays'; it was trained on another text.")
        recipe = _given_recipe(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    out, curve = args.outputs["--out"], args.outputs.get("--curve")

    def save_curve(rows: list[dict[str, float]]) -> None:
        if curve is not None:
            curve.write_text(_curve_csv(rows))

    def checkpoint(training: Any) -> None:
        try:
            save_checkpoint(model, out, training=training)
            save_curve(training.curve)
        except (OSError, NadarayaError) as exc:
            print(f"nadaraya lm: warning: checkpoint at step {training.step} not written: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)

    verb = "continuing" if state is not None else "training"
    print(f"{verb} {model.config.kernel} attention, {model.config.positional} positions, "
          f"{sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(corpus.train)} training characters", flush=True)
    every = args.eval_every or (None, None)
    history = train(model, corpus.train, corpus.valid, resume=state,
                    eval_every=int(every[0]) if every[1] == "steps" else 0,
                    eval_seconds=every[0] if every[1] == "seconds" else None,
                    eval_chars=args.eval_chars, progress=False if args.quiet else None,
                    checkpoint=checkpoint, checkpoint_every=args.checkpoint_every, **recipe)
    if history["diverged"]:
        raise NadarayaError(f"training diverged at step {history['steps'] + 1} (the loss "
                            f"became infinite or NaN; no checkpoint was written): lower --lr, "
                            f"or choose another --kernel than {model.config.kernel}.")
    if history["interrupted"]:
        print(f"nadaraya lm: interrupted ({history['interrupted']}) at step "
              f"{history['steps']}; the checkpoint {out} holds it: continue with --resume "
              f"{out}.", file=sys.stderr)
        return 130
    step, bits = history["valid"][-1]
    print(f"validation: {bits:.3f} bits/char after {step} steps ({history['seconds']:.0f} s, "
          f"{history['cpu_seconds']:.0f} s cpu)")
    final = history["state"]
    saved = write_or_rescue(out, lambda target: save_checkpoint(model, target, training=final))
    print(f"saved {saved}")
    if curve is not None:
        saved_curve = write_or_rescue(curve, lambda target: target.write_text(
            _curve_csv(final.curve)))
        print(f"learning curve in {saved_curve}")
    return 0


def _curve_csv(rows: list[dict[str, float]]) -> str:
    names = ("step", "seconds", "cpu_seconds", "lr", "train_bits", "valid_bits")
    lines = [",".join(names)]
    lines += [",".join(f"{row[n]:.6g}" if n != "step" else str(int(row[n])) for n in names)
              for row in rows]
    return "\n".join(lines) + "\n"


def _check_memory(args: argparse.Namespace, vocab: int) -> None:
    """Refuse sizes whose training could not fit in this machine's memory.

    The bound counts the weights of the attention and feed-forward blocks
    (12 d^2 per layer), the embeddings and the head, each held four times
    in float32 (weights, gradients and Adam's two moments), plus one float32
    activation of each layer per batch window: a lower bound of what
    training needs.
    """
    from nadaraya.nn.lm import Recipe

    from ._memory import check_memory

    d, layers = args.d_model, args.layers
    batch = args.batch if args.batch is not None else Recipe.batch
    weights = layers * 12 * d * d + 2 * vocab * d + args.context * d
    check_memory(16 * weights + 4 * batch * args.context * d * layers,
                 f"--d-model {d}, --layers {layers}, --context {args.context} and --batch "
                 f"{batch}")
