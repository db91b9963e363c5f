"""What the ``"nadaraya"`` attention implementation costs inside a transformers model.

One Llama-shaped causal model built from a config (random weights, nothing
downloaded), one padded batch, timed forward (and forward + backward) passes
with transformers' ``eager`` and ``sdpa`` attention and with
``attn_implementation="nadaraya"`` under the softmax kernel (the same model)
and the rbf kernel (Gaussian attention). Each time is the median of
``--repeat`` runs after a warm-up; the ratios are against ``sdpa`` measured in
the same run. The softmax row also prints its largest logit difference from
``eager``.

Run::

    python benchmarks/bench_huggingface.py                   # a few seconds on a CPU
    python benchmarks/bench_huggingface.py --length 1024 --hidden 512 --layers 4 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from nadaraya.nn import huggingface


def _median_time(fn: Callable[[], object], repeat: int, device: str) -> float:
    fn()
    times = []
    for _ in range(repeat):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                         num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                         intermediate_size=4 * args.hidden, vocab_size=1000,
                         max_position_embeddings=max(args.length, 64))
    model = LlamaForCausalLM(config).to(args.device).eval()
    ids = torch.randint(0, 1000, (args.batch, args.length), device=args.device)
    mask = torch.ones_like(ids)
    mask[0, : args.length // 4] = 0  # one left-padded sequence
    real = mask.bool()

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=mask).logits

    def backward() -> None:
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()

    rows = []
    reference = None
    for label, implementation, kernel in (("eager", "eager", None), ("sdpa", "sdpa", None),
                                          ("nadaraya softmax", "nadaraya", "softmax"),
                                          ("nadaraya rbf", "nadaraya", "rbf")):
        if implementation == "nadaraya":
            huggingface.set_kernel(model, kernel)
        else:
            model.set_attn_implementation(implementation)
        logits = forward()
        if reference is None:
            reference = logits
        diff = float((logits - reference)[real].abs().max())
        rows.append((label, _median_time(forward, args.repeat, args.device),
                     _median_time(backward, args.repeat, args.device), diff))

    sdpa_forward, sdpa_backward = rows[1][1], rows[1][2]
    print(f"Llama {args.layers} layers, hidden {args.hidden}, {args.heads} heads "
          f"({args.kv_heads} key/value), batch {args.batch} x {args.length} tokens, "
          f"{args.device}, {torch.get_num_threads()} threads\n")
    print(f"{'attention':<18} {'forward s':>10} {'/ sdpa':>7} {'fwd+bwd s':>10} {'/ sdpa':>7}"
          f"  {'max |logit - eager|':>20}")
    for label, fwd, bwd, diff in rows:
        shown = f"{diff:.1e}" if label != "nadaraya rbf" else "(another kernel)"
        print(f"{label:<18} {fwd:>10.4f} {fwd / sdpa_forward:>7.2f} {bwd:>10.4f} "
              f"{bwd / sdpa_backward:>7.2f}  {shown:>20}")


if __name__ == "__main__":
    main()
