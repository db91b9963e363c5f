"""
The motorcycle data: a fit, its band and the cross-validation curve
===================================================================

Silverman's motorcycle crash data (head acceleration in g against time in ms after impact) is
the classic test of a smoother: flat, then a sharp dip and rebound, with noise that grows after
impact. Local linear regression with its bandwidth chosen by exact leave-one-out
cross-validation, the band of the estimate, and the criterion at every bandwidth the search
tried.
"""

import matplotlib.pyplot as plt

from nadaraya.datasets import load_mcycle
from nadaraya.estimators import LocalPolynomialRegressor
from nadaraya.plot import plot_cv_curve, plot_fit

X, y = load_mcycle(return_X_y=True)
model = LocalPolynomialRegressor(degree=1, bandwidth="cv").fit(X, y)
print(f"bandwidth {float(model.bandwidth_):.3f} ms, effective degrees of freedom "
      f"{model.effective_dof_:.1f}, CV score {model.cv_score_:.1f} g^2")

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
plot_fit(model, X, y, ax=left, label="local linear")
left.set_xlabel("time after impact (ms)")
left.set_ylabel("acceleration (g)")
plot_cv_curve(model, ax=right)
fig.tight_layout()
