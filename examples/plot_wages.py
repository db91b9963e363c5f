"""
Wages on mixed data: fit, summary, marginal effects and a test
==============================================================

R's np package introduces mixed-data kernel regression with Wooldridge's ``wage1``: log hourly
wage of 526 workers against sex and marital status (unordered categories) and years of
education, experience and tenure (continuous). The bandwidths here are np's published ones
(Racine 2008, Table 4.1), which nadaraya's own AICc search reproduces to four or five digits
(see the worked example in the guide); from them: the summary table, the average marginal
effect of each continuous variable, the gap between levels of each category, a bootstrap test
of whether marital status matters, and the partial dependence on experience.
"""

import matplotlib.pyplot as plt
import numpy as np

from nadaraya.datasets import load_wage1
from nadaraya.estimators import LocalPolynomialRegressor, from_formula, significance_test
from nadaraya.plot import plot_partial_dependence

wages = load_wage1()
np_bandwidths = [0.01978275, 0.15228887, 7.84663015, 8.43548175, 41.60546059]
model = from_formula("lwage ~ C(female) + C(married) + educ + exper + tenure", wages,
                     LocalPolynomialRegressor(bandwidth=np_bandwidths))
print(model.summary())

# %%
# Average marginal effects: the mean over the workers of the fit's slope in each variable.
X = model.formula_.features(wages)
ame, se = model.average_marginal_effects()
for name, a, e in zip(model.feature_names_in_, ame, se, strict=True):
    if np.isfinite(a):
        print(f"{name:<8} {a:+.4f} log wage per year (standard error {e:.4f})")

# %%
# Categories have no slope: the effect of each level against the base level instead.
for feature in ("female", "married"):
    levels, effects = model.level_effects(X, feature)
    means = effects.mean(axis=0)
    print(feature, {str(k): round(float(v), 3) for k, v in zip(levels, means, strict=True)})

# %%
# Racine's bootstrap test that marital status carries no information on the mean wage.
print(significance_test(model, ["married"], n_resamples=99, random_state=0))

# %%
# How the fitted log wage moves with experience, the other variables at the data.
fig, ax = plt.subplots(figsize=(6, 4))
plot_partial_dependence(model, X, "exper", ax=ax)
ax.set_xlabel("experience (years)")
ax.set_ylabel("log hourly wage")
fig.tight_layout()
