"""
Associative memory: capacity of the classical and the modern Hopfield read-out
===============================================================================

Store random patterns, corrupt one, retrieve it with one smoothing step. The classical
read-out (dot similarity, identity separation, no normalization) mixes the stored patterns and
fails once there are more than a fraction of the dimension; the softmax separation of the modern
Hopfield network (attention) keeps retrieving far beyond it.
"""

import matplotlib.pyplot as plt
import numpy as np

from nadaraya.memory import AssociativeMemory

rng = np.random.default_rng(0)
d = 64
counts = [4, 8, 16, 32, 64, 128, 256]
settings = {
    "classical: dot, identity": dict(similarity="dot", separation="identity", normalize=False),
    "modern: dot, softmax (beta = 0.5)": dict(similarity="dot", separation="softmax", beta=0.5),
    "euclidean, softmax (beta = 2)": dict(similarity="euclidean", separation="softmax", beta=2.0),
}
fig, ax = plt.subplots(figsize=(7, 4))
for label, kw in settings.items():
    accuracy = []
    for n in counts:
        P = np.sign(rng.normal(size=(n, d)))
        probes = P * np.where(rng.random(P.shape) < 0.1, -1, 1)  # 10% of the signs flipped
        recalled = np.sign(AssociativeMemory(P, **kw).retrieve(probes))
        accuracy.append(float(np.mean(np.all(recalled == P, axis=1))))
    ax.plot(counts, accuracy, "o-", label=label)
    print(label, dict(zip(counts, np.round(accuracy, 2), strict=True)))
ax.set_xscale("log", base=2)
ax.set_xlabel(f"stored patterns (dimension {d})")
ax.set_ylabel("patterns recalled exactly")
ax.legend()
fig.tight_layout()
