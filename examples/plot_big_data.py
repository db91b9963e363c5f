"""
A million points, certified
===========================

With ``tolerance=``, :func:`nadaraya.smooth` may use a fast method whose proven bound keeps every
output within the tolerance (relative to the values' scale) of the exact sum, and
:func:`nadaraya.explain` says which method it chose, with its parameters and bound. Here a
million noisy points are smoothed at a thousand queries, and the result is checked against the
exact sum.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

import nadaraya

rng = np.random.default_rng(0)
n = 1_000_000
x = rng.uniform(0, 6, n)
y = 2 * np.sin(x) + rng.normal(size=n)
grid = np.linspace(0, 6, 1000)

t0 = time.perf_counter()
fast = nadaraya.smooth(grid, x, y, bandwidth=0.05, tolerance=1e-8)
seconds = time.perf_counter() - t0
exact = nadaraya.smooth(grid, x, y, bandwidth=0.05)
print(nadaraya.explain(grid, x, y, bandwidth=0.05, tolerance=1e-8))
print(f"{seconds:.2f} s; largest difference to the exact sum "
      f"{np.max(np.abs(fast - exact)) / np.max(np.abs(y)):.1e} of max|y| (tolerance 1e-8)")

fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(x[:3000], y[:3000], ".", ms=2, color="0.7", label="3,000 of the 1,000,000 points")
ax.plot(grid, fast, color="C0", label="fit, tolerance 1e-8")
ax.plot(grid, 2 * np.sin(grid), "--", color="k", lw=0.8, label="2 sin x")
ax.legend()
fig.tight_layout()
