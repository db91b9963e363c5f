"""
Attention of a real model, and the same projections under other kernels
========================================================================

all-MiniLM-L6-v2 (shipped as a Python package, loaded offline) re-expressed with
:class:`~nadaraya.nn.KernelAttention`: with the softmax kernel its attention weights are the
original model's. Swapping the kernel on the same queries and keys (``rbf``, ``laplacian``)
changes how sharply each token attends.
"""

import matplotlib.pyplot as plt
import torch

from nadaraya.nn import minilm

model, tokenizer = minilm.load()
sentence = "The cat sat on the mat."
layer, head = 2, 3
fig, axes = plt.subplots(1, 3, figsize=(13, 4.4))
for ax, kernel in zip(axes, ("softmax", "rbf", "laplacian"), strict=True):
    kernelized = minilm.kernelize(model, kernel)
    with torch.no_grad():
        _, attentions, encoding = minilm.run(kernelized, tokenizer, [sentence])
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"][0])
    weights = attentions[layer][0, head].numpy()
    ax.imshow(weights, cmap="viridis", vmin=0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_title(f"{kernel}: layer {layer}, head {head}")
    print(f"{kernel}: each row sums to one (largest deviation "
          f"{abs(weights.sum(-1) - 1).max():.1e})")
fig.tight_layout()
