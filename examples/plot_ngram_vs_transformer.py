"""
Counting against attending: an n-gram model and a kernel transformer
====================================================================

An n-gram model is a kernel smoother over contexts whose kernel is one when the last ``n - 1``
characters agree and zero otherwise; a transformer learns a softer similarity. The n-gram
models' held-out bits per character are horizontal lines; the transformer's learning curve
crosses them as it trains. At this example's budget of seconds the transformer reaches the
short n-grams only; ``nadaraya lm train`` runs the long comparison.
"""

import matplotlib.pyplot as plt
import torch

from nadaraya.nn.lm import TransformerLM, train
from nadaraya.nn.ngram import NGramLM
from nadaraya.nn.text import load_corpus

torch.manual_seed(0)
torch.set_num_threads(2)
corpus = load_corpus(limit=400_000)
V = corpus.vocab.size
fig, ax = plt.subplots(figsize=(7, 4))
for order in (2, 3, 4, 5):
    bits = NGramLM(order, vocab_size=V).fit(corpus.train).bits_per_char(corpus.valid[:50_000])
    ax.axhline(bits, color="0.6", lw=0.8)
    ax.text(0, bits, f" {order}-gram", va="bottom", color="0.4")
    print(f"{order}-gram: {bits:.3f} bits per character")

model = TransformerLM(vocab_size=V, kernel="softmax", d_model=64, n_layers=2, n_heads=4,
                      context=64)
run = train(model, corpus.train, corpus.valid, steps=160, batch=16, lr=3e-3, seed=0,
            eval_every=40, eval_chars=20_000, progress=False)
steps, bits = zip(*run["valid"], strict=True)
ax.plot(steps, bits, "o-", color="C0", label="transformer, softmax kernel")
print("transformer:", ", ".join(f"step {s}: {b:.3f}" for s, b in run["valid"]))
ax.set_xlabel("training step")
ax.set_ylabel("validation bits per character")
ax.legend()
fig.tight_layout()
