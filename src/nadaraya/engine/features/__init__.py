"""Positive random features (FAVOR+): opt-in, statistical kernel sums for exp-dot kernels.

Choromanski et al. (2021), "Rethinking Attention with Performers": for
``K(q, k) = exp(a . b)``, ``phi(x) = exp(w . x - ||x||^2 / 2) / sqrt(r)``
with Gaussian ``w`` gives ``E[phi(a) . phi(b)] = K``, with positive features,
so the attention sums cost ``O((n + m) r)`` instead of ``O(n m)``. Here the
projections come in orthogonal blocks drawn from a seed, the sums are
formed in float64 in blocks within the working-memory budget, and every
sum comes with an *estimated standard error*: a statistical statement, not
a proven bound. The method is chosen only on request
(``approximate="random-features"``), never for a ``tolerance``.

Modules: :mod:`._form` (a kernel as dot vectors and biases), :mod:`._draw`
(the projections), :mod:`._estimate` (the blocked sums and their error),
:mod:`._method` (refusals, plan, the entry point).
"""

from __future__ import annotations

from ._estimate import ERROR_STATEMENT
from ._method import RandomFeatures, as_state, random_feature_sums

__all__ = ["ERROR_STATEMENT", "RandomFeatures", "as_state", "random_feature_sums"]
