"""
The weights of one query
========================

A prediction is a weighted mean of the training targets. Here are the weights of the
Nadaraya-Watson fit at one time of the motorcycle data, for three bandwidths: a narrow kernel
listens to a few neighbours, a wide one to most of the data. The rows of these weights are the
rows of the smoother matrix that :func:`nadaraya.weights` returns, the same matrix attention
calls its attention weights.
"""

import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya.datasets import load_mcycle

X, y = load_mcycle(return_X_y=True)
x0 = 20.0
fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
top.scatter(X[:, 0], y, s=10, color="0.5")
top.axvline(x0, color="k", lw=0.8)
top.set_ylabel("acceleration (g)")
for h in (0.5, 2.0, 6.0):
    w = nadaraya.weights(np.array([[x0]]), X, "gaussian", bandwidth=h)[0]
    fit = float(w @ y)
    top.plot([x0], [fit], "o", label=f"h = {h:g} ms: fit {fit:.1f} g")
    bottom.vlines(X[:, 0], 0, w, lw=2, alpha=0.7, color=top.lines[-1].get_color())
    print(f"h = {h:g}: weights sum to {w.sum():.12f}, largest {w.max():.3f}")
top.legend()
bottom.set_xlabel("time after impact (ms)")
bottom.set_ylabel(f"weight of each point at t = {x0:g} ms")
fig.tight_layout()
