"""The per-query solve against weighted least squares, and the filter of unfixed directions.

The oracle is the formula itself: at each query, ``numpy.linalg.lstsq`` on the
monomials of ``x_j - x0`` weighted by ``sqrt(K(x0, x_j) w_j)`` (float64, the
kernel weights of :func:`nadaraya.weights`), on problems where it is well
posed (full column rank, moderate conditioning). Both solves are checked: the
moment solve (normal equations from one engine pass) and the direct solve
from each query's kernel weights, forced on every row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya.estimators import LocalPolynomialRegressor, _design
from nadaraya.estimators._design import monomials
from nadaraya.masks import KNearest


def _lstsq(X: np.ndarray, y: np.ndarray, queries: np.ndarray, h: Any, degree: int,
           w: np.ndarray | None = None) -> np.ndarray:
    """Local polynomial fits by weighted least squares, query by query."""
    W = nadaraya.weights(queries, X, "gaussian", bandwidth=h)
    if w is not None:
        W = W * w[None, :]
    exps = monomials(X.shape[1], degree)
    out = []
    for q, wq in zip(queries, W, strict=True):
        u = X - q
        B = np.stack([np.prod(u ** np.array(e), axis=1) for e in exps], axis=1)
        root = np.sqrt(wq)
        out.append(np.linalg.lstsq(B * root[:, None], y * root, rcond=None)[0][0])
    return np.array(out)


@pytest.mark.parametrize(("degree", "d", "h"), [(1, 3, 0.8), (2, 2, 0.9), (3, 1, 0.6)])
@pytest.mark.parametrize("solve", ["moments", "direct"])
def test_well_posed_fits_match_least_squares(rng: np.random.Generator,
                                             monkeypatch: pytest.MonkeyPatch,
                                             direct_rows: list[int], degree: int, d: int,
                                             h: float, solve: str) -> None:
    X = rng.uniform(0, 3, (60, d))
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=60)
    w = rng.integers(1, 4, 60).astype(float)
    queries = rng.uniform(0.2, 2.8, (15, d))
    if solve == "direct":
        monkeypatch.setattr(_design, "_CONDITION", 0.0)
    model = LocalPolynomialRegressor(degree=degree, bandwidth=h).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(model.predict(queries),
                               _lstsq(X, y, queries, h, degree, w), rtol=1e-10, atol=1e-12)
    # leave-one-out fits: the same formula without row i (its weight less one unit)
    rows = np.arange(0, 60, 7)
    expected = []
    for i in rows:
        wi = w.copy()
        wi[i] -= 1.0
        keep = wi > 0
        expected.append(_lstsq(X[keep], y[keep], X[i:i + 1], h, degree, wi[keep])[0])
    np.testing.assert_allclose(model._out(model._loo_fit.loo[rows, 0]), expected, rtol=1e-10,
                               atol=1e-12)
    if solve == "direct":
        assert sum(direct_rows) >= 60 + 15
    else:
        assert direct_rows == []


def test_graded_weights_are_solved_directly_and_exactly(direct_rows: list[int]) -> None:
    """Neighbours whose kernel weights span nine orders of magnitude.

    At queries by the first point, three points on the x-axis fix the
    x-direction with weights near one and the third point alone fixes the
    y-direction, with a weight near 1e-9: the local covariance has a
    condition number near 1e7, which the normal equations carry into their
    rounding (about 1e-8 of the fit), while the weighted design itself is
    conditioned near 3e3 (lstsq, which does not sort the rows by weight, is
    accurate to about 1e-10 here).
    """
    X = np.array([[0.0, 0.0], [0.35, 0.0], [0.02, 1.93], [0.2, 0.0], [3.0, 3.0],
                  [-3.0, 2.0]])
    y = np.array([0.0, 1.0, 5.0, 0.5, -1.0, 3.0])
    h = 0.3
    queries = np.array([[0.05, 0.02], [0.1, -0.05], [-0.05, 0.1]])
    model = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    weights = nadaraya.weights(queries, X, "gaussian", bandwidth=h)
    assert ((weights[:, 2] < 1e-8) & (weights[:, 2] > 1e-11)).all()
    np.testing.assert_allclose(model.predict(queries), _lstsq(X, y, queries, h, 1), rtol=1e-9)
    assert sum(direct_rows) >= queries.shape[0]


def _far_third(s: float, mask: Any = None) -> float:
    """Fit at (0.5, 0.5) from (0, 0), (1, 0) and (0, s), bandwidth one.

    The third point's kernel weight falls like ``exp(-s^2 / 2)``; while it
    fixes the y-direction the fit is the plane through the three points
    (``0.5 + 2.5 / s``), once it no longer does, the line through the first
    two (``0.5``).
    """
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, s]])
    y = np.array([0.0, 1.0, 5.0])
    model = LocalPolynomialRegressor(bandwidth=1.0, mask=mask).fit(X, y)
    return float(model.predict(np.array([[0.5, 0.5]]))[0])


@pytest.mark.parametrize(("mask", "rounding"), [(None, 1e-8), (KNearest(3), 1e-4)],
                         ids=["direct", "moments"])
def test_unfixed_direction_fades_out_continuously(mask: Any, rounding: float) -> None:
    """The slope along a barely fixed direction fades with its spread, never jumps.

    Across the threshold (a local variance near ``1e-10``) the fit goes from
    the plane to the line. Where it moves most between grid points, a grid
    ten times finer shows steps about ten times smaller (a jump would not
    shrink), and a relative change of ``1e-12`` in the data moves the fit in
    proportion to the solve's rounding (the moment solve knows a variance of
    ``1e-10`` to about ``1e-5`` of itself).
    """
    ss = np.linspace(6.0, 9.5, 141)
    fits = np.array([_far_third(s, mask) for s in ss])
    assert fits[0] == pytest.approx(0.5 + 2.5 / ss[0], rel=1e-6)
    assert fits[-1] == pytest.approx(0.5, abs=1e-9)
    steps = np.abs(np.diff(fits))
    k = int(np.argmax(steps))
    fine = np.linspace(ss[k], ss[k + 1], 11)
    fine_steps = np.abs(np.diff([_far_third(s, mask) for s in fine]))
    assert fine_steps.max() < 0.3 * steps[k]
    nudged = np.array([_far_third(s * (1.0 + 1e-12), mask) for s in ss[::10]])
    np.testing.assert_allclose(nudged, fits[::10], rtol=0, atol=rounding * steps.sum())
