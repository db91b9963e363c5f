"""
Linear regression's weight matrix beside attention's
====================================================

Least squares predicts ``X (XᵀX)⁻¹ Xᵀ y``: a weighted sum of the targets with weights
``x_iᵀ (XᵀX)⁻¹ x_j``, the linear kernel without a normalization. Attention weights
``softmax(q_i · k_j)`` and a Gaussian smoother's weights are the same kind of matrix. Drawn side
by side on one data set, the three differ in sign, locality and normalization, not in form.
"""

import numpy as np

from nadaraya.memory import plot_weight_matrices, weight_matrices

rng = np.random.default_rng(0)
t = np.sort(rng.uniform(-2, 2, 60))
X = np.column_stack([t, np.sin(2 * t), 0.3 * rng.normal(size=t.size)])
matrices = weight_matrices(X, seed=0)
for name, W in matrices.items():
    print(f"{name}: shape {W.shape}, row sums in [{W.sum(1).min():.3f}, {W.sum(1).max():.3f}]")
axes = plot_weight_matrices(X, seed=0)
