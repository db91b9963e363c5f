"""
k nearest neighbours against a kernel
=====================================

Both estimates average the targets of nearby points. The k-nearest-neighbour fit gives each of
the ``k`` nearest points the same weight and the rest none, so it jumps whenever a neighbour
enters or leaves; the Gaussian kernel lets weights fall off smoothly with distance, so the fit
is smooth. In this library both are the same sum: the kNN fit is a uniform kernel under a
``KNearest`` mask.
"""

import matplotlib.pyplot as plt

from nadaraya.plot import plot_knn_vs_kernel

fig, ax = plt.subplots(figsize=(7, 4))
plot_knn_vs_kernel(ax, n=40, k=10)
fig.tight_layout()
