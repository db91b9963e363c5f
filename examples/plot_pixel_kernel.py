"""
The kernel of one pixel
=======================

A filter's output at a pixel is a weighted mean over its window; the weights are a kernel of
``t = [row, column, value]``. Here are the weights of one pixel next to an edge, computed with
:func:`nadaraya.weights` on the window's augmented vectors: the Gaussian of positions alone
(kernel regression) spreads across the edge, the bilateral kernel (positions times values)
stays on the pixel's side of it.
"""

import matplotlib.pyplot as plt
import numpy as np
from skimage import data

import nadaraya
from nadaraya.kernels import Gaussian

image = data.camera().astype(float)
row, col, radius = 180, 231, 12  # a pixel on the cameraman's coat, beside the bright sky
window = image[row - radius:row + radius + 1, col - radius:col + radius + 1]
rr, cc = np.mgrid[-radius:radius + 1, -radius:radius + 1]
t = np.column_stack([rr.ravel(), cc.ravel(), window.ravel()])
centre = t[[t.shape[0] // 2]]

kernels = {
    "positions: Gaussian(4)": Gaussian(4.0).on([0, 1]),
    "bilateral: Gaussian(4) x Gaussian(20) of the value":
        Gaussian(4.0).on([0, 1]) * Gaussian(20.0).on([2]),
}
fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
axes[0].imshow(window, cmap="gray")
axes[0].plot(radius, radius, "r+", ms=12)
axes[0].set_title("the window and its centre pixel")
for ax, (name, kernel) in zip(axes[1:], kernels.items(), strict=True):
    w = nadaraya.weights(centre, t, kernel)[0].reshape(window.shape)
    ax.imshow(w, cmap="magma")
    ax.set_title(name, fontsize=9)
    print(f"{name}: weights sum to {w.sum():.12f}; output {float((w * window).sum()):.1f}")
for ax in axes:
    ax.axis("off")
fig.tight_layout()
