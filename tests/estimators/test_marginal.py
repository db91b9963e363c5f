"""Marginal effects: gradients, their standard errors, average and level effects.

Oracles:

* statsmodels' ``KernelReg(reg_type="ll")``: its marginal effects are the
  local slopes of the pseudo-inverse solve of the local-linear normal
  equations (``_est_loc_linear``), our local polynomial's gradient;
* statsmodels' local-constant marginal effects (``_est_loc_constant``) are not
  the derivative of its fit: its ``d_gaussian`` is ``2 (X_i - x) K / h^2`` (twice
  the Gaussian's derivative) and the numerator is divided by ``n`` where the
  denominator is not, so in one dimension they are ``2 / n`` times the
  derivative (checked below as that), and in several the kernel derivatives of
  every feature multiply into one number. The Nadaraya-Watson gradient is
  therefore checked against a naive float64 formula written here, against
  torch's autograd through a naive Nadaraya-Watson in float64, and against
  central differences of ``predict``;
* local polynomials of any degree and mixed data: a naive weighted
  least-squares solve (``numpy.linalg.lstsq``) per query;
* standard errors: the linear weights of the naive formulas (the Jacobian of
  the derivative in the targets).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.estimators import (
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    _gradient,
    _marginal,
)
from nadaraya.estimators._gradient import SLOPED, neg_slope
from nadaraya.kernels import RADIAL, Gaussian

KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg


def _data(rng: np.random.Generator, n: int = 80, d: int = 2) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 3, (n, d))
    y = np.sin(2 * X[:, 0]) + (X[:, 1] ** 2 if d > 1 else 0) + 0.1 * rng.normal(size=n)
    return X, y


def _statsmodels(X: np.ndarray, y: np.ndarray, reg: str, bw: np.ndarray, Xq: np.ndarray,
                 types: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KernelReg(y, X, types or "c" * X.shape[1], reg_type=reg, bw=bw)
        return model.fit(Xq)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    """Normwise relative difference ``max |a - b| / max |b|``."""
    return float(np.abs(a - b).max() / np.abs(b).max())


# -- naive oracles --------------------------------------------------------------------------
# Kernel profiles written out here, in torch float64, from their textbook formulas.
PROFILES = {
    "gaussian": lambda r2: torch.exp(-r2 / 2),
    "laplacian": lambda r2: torch.exp(-torch.sqrt(r2)),
    "matern32": lambda r2: (1 + np.sqrt(3) * torch.sqrt(r2))
    * torch.exp(-np.sqrt(3) * torch.sqrt(r2)),
    "matern52": lambda r2: (1 + np.sqrt(5) * torch.sqrt(r2) + 5 * r2 / 3)
    * torch.exp(-np.sqrt(5) * torch.sqrt(r2)),
    "cauchy": lambda r2: 1 / (1 + r2),
    "epanechnikov": lambda r2: torch.clamp(1 - r2, min=0),
    "tricube": lambda r2: torch.clamp(1 - r2**1.5, min=0) ** 3,
}


def _torch_nw_gradient(name: str, X: np.ndarray, y: np.ndarray, h: np.ndarray,
                       Xq: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """d yhat / d x by autograd through a naive float64 Nadaraya-Watson, shape ``(m, d)``."""
    keys = torch.as_tensor(X)
    t = torch.as_tensor(y)
    ww = torch.ones(len(y), dtype=torch.float64) if w is None else torch.as_tensor(w)
    out = []
    for x in Xq:
        q = torch.tensor(x, requires_grad=True)
        r2 = (((q - keys) / torch.as_tensor(h)) ** 2).sum(1)
        K = PROFILES[name](r2) * ww
        (K @ t / K.sum()).backward()
        out.append(q.grad.numpy())
    return np.array(out)


def _naive_nw_gaussian(X: np.ndarray, y: np.ndarray, h: np.ndarray, Xq: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The ratio's derivative written out, and its linear weights ``(m, d, n)``."""
    D = X[None, :, :] - Xq[:, None, :]  # x_j - x
    K = np.exp(-0.5 * ((D / h) ** 2).sum(-1))
    S = K / K.sum(1, keepdims=True)
    phi = D / h**2
    A = S[:, None, :] * (np.swapaxes(phi, 1, 2) - np.einsum("mn,mnd->md", S, phi)[:, :, None])
    return A @ y, A


def _naive_local_poly(X: np.ndarray, y: np.ndarray, Xq: np.ndarray, weight: object,
                      degree: int, cont: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Local slopes by weighted least squares per query, and their linear weights."""
    grads, weights_ = [], []
    for x in Xq:
        k = weight(x)
        u = X[:, cont] - x[cont]
        cols = [np.ones(len(y))] + [u[:, j] for j in range(len(cont))]
        if degree == 2:
            cols += [u[:, a] * u[:, b] for a in range(len(cont)) for b in range(a, len(cont))]
        B = np.stack(cols, 1)
        root = np.sqrt(k)[:, None]
        pinv = np.linalg.pinv(root * B) * root[:, 0]
        weights_.append(pinv[1:1 + len(cont)])
        grads.append(pinv[1:1 + len(cont)] @ y)
    return np.array(grads), np.array(weights_)


def _central(f: object, Xq: np.ndarray, step: float = 1e-6) -> np.ndarray:
    eye = np.eye(Xq.shape[1])
    return np.stack([(f(Xq + step * eye[d]) - f(Xq - step * eye[d])) / (2 * step)
                     for d in range(Xq.shape[1])], axis=1)


# -- peers and oracles ------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3])
def test_local_linear_gradient_matches_statsmodels(rng: np.random.Generator, d: int) -> None:
    X, y = _data(rng, 80, d)
    h = np.array([0.3, 0.5, 0.8][:d])
    Xq = np.vstack([rng.uniform(-0.2, 3.2, (20, d)), X[:5]])
    expected = _statsmodels(X, y, "ll", h, Xq)[1]
    ours = LocalPolynomialRegressor(bandwidth=h).fit(X, y).gradient(Xq)
    assert ours.shape == (25, d)
    assert _relative(ours, expected) < 1e-8


def test_local_constant_gradient_is_statsmodels_marginal_effect_times_n_over_2(
        rng: np.random.Generator) -> None:
    # statsmodels' lc "mfx" in one dimension is 2 / n times the derivative (module docstring)
    X, y = _data(rng, 60, 1)
    Xq = rng.uniform(0, 3, (15, 1))
    mfx = _statsmodels(X, y, "lc", np.array([0.4]), Xq)[1]
    ours = NadarayaWatsonRegressor(bandwidth=0.4).fit(X, y).gradient(Xq)
    assert _relative(ours * 2 / len(y), mfx) < 1e-8


@pytest.mark.parametrize("d", [1, 3])
def test_nadaraya_watson_gradient_matches_the_naive_formula(rng: np.random.Generator,
                                                            d: int) -> None:
    X, y = _data(rng, 70, d)
    h = np.array([0.3, 0.6, 0.9][:d])
    Xq = np.vstack([rng.uniform(-0.5, 3.5, (20, d)), X[:4]])
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    expected, _ = _naive_nw_gaussian(X, y, h, Xq)
    assert _relative(model.gradient(Xq), expected) < 1e-10
    assert _relative(model.gradient(Xq), _central(model.predict, Xq)) < 1e-7


@pytest.mark.parametrize("name", SLOPED)
def test_every_kernel_against_autograd_of_a_naive_fit(rng: np.random.Generator,
                                                      name: str) -> None:
    X, y = _data(rng, 60, 2)
    h = np.array([0.9, 1.4])
    Xq = rng.uniform(0.2, 2.8, (15, 2))
    w = rng.uniform(0.5, 2.0, len(y))
    model = NadarayaWatsonRegressor(name, bandwidth=h).fit(X, y, sample_weight=w)
    expected = _torch_nw_gradient(name, X, y, h, Xq, w)
    assert _relative(model.gradient(Xq), expected) < 1e-9


@pytest.mark.parametrize("name", SLOPED)
def test_profile_slopes_are_the_profiles_derivatives(name: str) -> None:
    r2 = torch.linspace(1e-3, 0.99, 50, dtype=torch.float64).requires_grad_(True)
    RADIAL[name](1.0).profile(r2).sum().backward()
    assert torch.allclose(neg_slope(name, r2.detach()), -r2.grad, rtol=1e-12, atol=0)


def test_a_kernel_object_is_differentiated_numerically(rng: np.random.Generator) -> None:
    X, y = _data(rng, 60, 1)
    Xq = rng.uniform(0.3, 2.7, (10, 1))
    by_name = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    by_object = NadarayaWatsonRegressor(Gaussian(0.3), bandwidth=None).fit(X, y)
    assert _relative(by_object.gradient(Xq), by_name.gradient(Xq)) < 1e-6
    np.testing.assert_allclose(by_object.gradient(Xq, return_std=True)[1],
                               by_name.gradient(Xq, return_std=True)[1], rtol=1e-5)


@pytest.mark.parametrize("degree", [1, 2])
def test_local_polynomial_slopes_match_weighted_least_squares(rng: np.random.Generator,
                                                              degree: int) -> None:
    X, y = _data(rng, 90, 2)
    h = np.array([0.5, 0.7])
    Xq = rng.uniform(0, 3, (12, 2))
    w = rng.uniform(0.5, 2.0, len(y))
    model = LocalPolynomialRegressor(degree=degree, bandwidth=h).fit(X, y, sample_weight=w)

    def weight(x: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * (((X - x) / h) ** 2).sum(1)) * w

    expected, A = _naive_local_poly(X, y, Xq, weight, degree, [0, 1])
    grad, std = model.gradient(Xq, return_std=True)
    assert _relative(grad, expected) < 1e-8
    naive_std = np.sqrt(model.residual_variance_ * (A**2 / w).sum(-1))
    np.testing.assert_allclose(std, naive_std, rtol=1e-8)


def test_mixed_data_gradients(rng: np.random.Generator) -> None:
    n = 120
    X = np.c_[rng.uniform(0, 3, n), rng.integers(0, 3, n), rng.uniform(0, 3, n)]
    y = np.sin(2 * X[:, 0]) + X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    bw = np.array([0.4, 0.2, 0.8])
    Xq = np.c_[rng.uniform(0, 3, 10), rng.integers(0, 3, 10), rng.uniform(0, 3, 10)]

    def weight(x: np.ndarray) -> np.ndarray:
        # Gaussian on the continuous features times Aitchison-Aitken (3 levels) on the other
        cont = np.exp(-0.5 * (((X[:, [0, 2]] - x[[0, 2]]) / bw[[0, 2]]) ** 2).sum(1))
        return cont * np.where(X[:, 1] == x[1], 1 - bw[1], bw[1] / 2)

    lp = LocalPolynomialRegressor(bandwidth=bw, var_types="cuc").fit(X, y)
    expected, _ = _naive_local_poly(X, y, Xq, weight, 1, [0, 2])
    grad = lp.gradient(Xq)
    assert np.isnan(grad[:, 1]).all()
    assert _relative(grad[:, [0, 2]], expected) < 1e-8

    nw = NadarayaWatsonRegressor("epanechnikov", bandwidth=bw * [3, 1, 3], var_types="cuc")
    nw.fit(X, y)
    grad = nw.gradient(Xq)
    h = bw[[0, 2]] * 3
    naive = []
    for x in Xq:
        q = torch.tensor(x[[0, 2]], requires_grad=True)
        r2 = (((q - torch.as_tensor(X[:, [0, 2]])) / torch.as_tensor(h)) ** 2).sum(1)
        cat = torch.as_tensor(np.where(X[:, 1] == x[1], 1 - bw[1], bw[1] / 2))
        K = PROFILES["epanechnikov"](r2) * cat
        (K @ torch.as_tensor(y) / K.sum()).backward()
        naive.append(q.grad.numpy())
    assert _relative(grad[:, [0, 2]], np.array(naive)) < 1e-9


def test_a_mask_restricts_the_derivative_to_the_visible_keys(rng: np.random.Generator
                                                             ) -> None:
    from nadaraya.masks import KNearest

    X, y = _data(rng, 60, 2)
    h = np.array([0.5, 0.5])
    Xq = rng.uniform(0, 3, (8, 2))
    model = NadarayaWatsonRegressor(bandwidth=h, mask=KNearest(10)).fit(X, y)
    grad, std = model.gradient(Xq, return_std=True)
    for i, x in enumerate(Xq):
        near = np.argsort(((X - x) ** 2).sum(1))[:10]
        g, A = _naive_nw_gaussian(X[near], y[near], h, x[None])
        np.testing.assert_allclose(grad[i], g[0], rtol=1e-9)
        np.testing.assert_allclose(std[i], np.sqrt(model.residual_variance_ * (A[0] ** 2).sum(-1)),
                                   rtol=1e-9)


# -- standard errors -------------------------------------------------------------------------
def test_asymptotic_std_is_sigma_times_the_norm_of_the_linear_weights(
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _data(rng, 70, 2)
    h = np.array([0.4, 0.6])
    Xq = rng.uniform(0, 3, (10, 2))
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    _, A = _naive_nw_gaussian(X, y, h, Xq)
    expected = np.sqrt(model.residual_variance_ * (A**2).sum(-1))
    # from the engine's squared-kernel pass, and from the kernel-weight rows: the same
    engine = model.gradient(Xq, return_std=True)[1]
    np.testing.assert_allclose(engine, expected, rtol=1e-10)
    monkeypatch.setattr(_marginal, "nw_gaussian_variance", None)
    np.testing.assert_allclose(model.gradient(Xq, return_std=True)[1], engine, rtol=1e-10)
    rows: list[int] = []
    monkeypatch.setattr(_marginal, "linear_weights", lambda *a: rows.append(1))
    lp = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    lp.gradient(Xq, return_std=True)
    assert rows == []


@pytest.mark.slow
@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_bootstrap_std_is_close_to_the_asymptotic_one(rng: np.random.Generator,
                                                      cls: type) -> None:
    # homoscedastic noise around a gentle curve: the wild bootstrap estimates the same spread
    n = 300
    X = rng.uniform(0, 4, (n, 1))
    y = 0.5 * X[:, 0] + 0.2 * np.sin(X[:, 0]) + rng.normal(size=n)
    model = cls(bandwidth=0.8).fit(X, y)
    Xq = np.linspace(0.8, 3.2, 5)[:, None]
    _, asym = model.gradient(Xq, return_std=True)
    _, boot = model.gradient(Xq, return_std=True, method="bootstrap", n_resamples=400,
                             random_state=0)
    np.testing.assert_allclose(boot, asym, rtol=0.2)
    # the same seed gives the same resamples
    again = model.gradient(Xq, return_std=True, method="bootstrap", n_resamples=400,
                           random_state=0)[1]
    np.testing.assert_array_equal(again, boot)


def test_average_marginal_effects(rng: np.random.Generator) -> None:
    X, y = _data(rng, 60, 2)
    h = np.array([0.4, 0.6])
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    ame, se = model.average_marginal_effects()
    grad, A = _naive_nw_gaussian(X, y, h, X)
    np.testing.assert_allclose(ame, grad.mean(0), rtol=1e-10)
    np.testing.assert_allclose(se, np.sqrt(model.residual_variance_ * (A.mean(0) ** 2).sum(-1)),
                               rtol=1e-10)
    Xq = X[:7]
    np.testing.assert_allclose(model.average_marginal_effects(Xq)[0],
                               model.gradient(Xq).mean(0), rtol=1e-12)
    # homoscedastic noise around a plane: the wild bootstrap's spread of the average agrees
    X = rng.uniform(0, 3, (300, 2))
    y = X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=300)
    model = LocalPolynomialRegressor(bandwidth=[1.0, 1.0]).fit(X, y)
    _, se = model.average_marginal_effects()
    _, boot = model.average_marginal_effects(method="bootstrap", n_resamples=300,
                                             random_state=1)
    np.testing.assert_allclose(boot, se, rtol=0.2)


def test_average_over_training_rows_weights_them(rng: np.random.Generator) -> None:
    X, y = _data(rng, 40, 1)
    w = rng.integers(1, 4, len(y))
    weighted = LocalPolynomialRegressor(bandwidth=0.5).fit(X, y, sample_weight=w)
    repeated = LocalPolynomialRegressor(bandwidth=0.5).fit(np.repeat(X, w, 0), np.repeat(y, w))
    np.testing.assert_allclose(weighted.average_marginal_effects()[0],
                               repeated.average_marginal_effects()[0], rtol=1e-9)
    np.testing.assert_allclose(weighted.gradient(X[:5], return_std=True),
                               repeated.gradient(X[:5], return_std=True), rtol=1e-8)


def test_multi_output_stacks_the_single_outputs(rng: np.random.Generator) -> None:
    X, y = _data(rng, 50, 2)
    Y = np.c_[y, 3 * y + X[:, 0], -y]
    Xq = rng.uniform(0, 3, (6, 2))
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        multi = cls(bandwidth=[0.5, 0.5]).fit(X, Y)
        grad, std = multi.gradient(Xq, return_std=True)
        assert grad.shape == std.shape == (6, 2, 3)
        for k in range(3):
            single = cls(bandwidth=[0.5, 0.5]).fit(X, Y[:, k])
            g, s = single.gradient(Xq, return_std=True)
            np.testing.assert_allclose(grad[:, :, k], g, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(std[:, :, k], s, rtol=1e-10)


def test_far_queries_and_large_offsets(rng: np.random.Generator) -> None:
    # the same problem translated far from the origin: the same derivatives
    X, y = _data(rng, 60, 1)
    Xq = rng.uniform(0, 3, (8, 1))
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        near = cls(bandwidth=0.05).fit(X, y).gradient(Xq)
        far = cls(bandwidth=0.05).fit(X + 1e7, y).gradient(Xq + 1e7)
        np.testing.assert_allclose(far, near, rtol=1e-6, atol=1e-6 * np.abs(near).max())


def test_rows_whose_moments_cancel_are_computed_from_their_weights(
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    # a second cluster 1e5 away, where no kernel weight reaches: the centred moments of the
    # near queries cancel by 1e6 bandwidths, and the rows are recomputed from their weights
    X, y = _data(rng, 40, 1)
    far = np.r_[X, X + 1e5]
    Xq = rng.uniform(0.5, 2.5, (6, 1))
    rows: list[int] = []
    original = _gradient.linear_weights

    def counting(est: object, Xr: np.ndarray, *args: object) -> object:
        rows.append(Xr.shape[0])
        return original(est, Xr, *args)

    monkeypatch.setattr(_gradient, "linear_weights", counting)
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        alone = cls(bandwidth=0.05).fit(X, y)
        grad_alone = alone.gradient(Xq)
        assert rows == []
        both = cls(bandwidth=0.05).fit(far, np.r_[y, -y])
        grad_both = both.gradient(Xq)
        assert rows == [6]
        rows.clear()
        assert _relative(grad_both, grad_alone) < 1e-9
        # the standard errors over sigma: the same linear weights
        np.testing.assert_allclose(
            both.gradient(Xq, return_std=True)[1] / np.sqrt(both.residual_variance_),
            alone.gradient(Xq, return_std=True)[1] / np.sqrt(alone.residual_variance_),
            rtol=1e-8)
        rows.clear()


# -- level effects -----------------------------------------------------------------------------
def test_level_effects_against_predictions_with_the_column_set(rng: np.random.Generator
                                                               ) -> None:
    n = 150
    df = pd.DataFrame({"x": rng.uniform(0, 3, n),
                       "shop": pd.Categorical(rng.choice(["b", "a", "c"], n),
                                              categories=["b", "a", "c"])})
    y = np.sin(df["x"]) + df["shop"].map({"a": 0.0, "b": 1.0, "c": -1.0}).to_numpy()
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        model = cls(bandwidth=[0.4, 0.1]).fit(df, y)
        queries = df.iloc[:6]
        levels, eff = model.level_effects(queries, "shop")
        assert levels.tolist() == ["b", "a", "c"]
        for i, level in enumerate(levels):
            q = queries.assign(shop=pd.Categorical([level] * 6, categories=["b", "a", "c"]))
            base = queries.assign(shop=pd.Categorical(["b"] * 6, categories=["b", "a", "c"]))
            np.testing.assert_allclose(eff[:, i], model.predict(q) - model.predict(base),
                                       rtol=1e-12, atol=1e-12)
        assert np.isfinite(eff).all()
        levels, eff = model.level_effects(queries, 1, base="a")
        assert np.all(eff[:, 1] == 0) and eff[0, 0] > 0.5 and eff[0, 2] < -0.5


def test_level_effects_vanish_for_a_smoothed_out_feature(rng: np.random.Generator) -> None:
    X = np.c_[rng.uniform(0, 3, 50), rng.integers(0, 2, 50)]
    y = X[:, 0] + rng.normal(size=50)
    model = NadarayaWatsonRegressor(bandwidth=[0.5, 0.5], var_types="cu").fit(X, y)
    assert "x1" in model.irrelevant_
    assert np.all(model.level_effects(X[:5], 1)[1] == 0)


# -- hostile inputs ------------------------------------------------------------------------------
def test_smoothed_out_feature_has_zero_derivative(rng: np.random.Generator) -> None:
    X, y = _data(rng, 50, 2)
    Xq = rng.uniform(0, 3, (5, 2))
    nw = NadarayaWatsonRegressor(bandwidth=[0.5, np.inf]).fit(X, y)
    grad, std = nw.gradient(Xq, return_std=True)
    assert np.all(grad[:, 1] == 0) and np.all(std[:, 1] == 0)
    assert np.all(grad[:, 0] != 0)
    # a local polynomial stays linear in it: every bandwidth infinite is least squares
    lp = LocalPolynomialRegressor(bandwidth=[np.inf, np.inf]).fit(X, y)
    slope = np.linalg.lstsq(np.c_[np.ones(len(y)), X], y, rcond=None)[0][1:]
    np.testing.assert_allclose(lp.gradient(Xq), np.broadcast_to(slope, (5, 2)), rtol=1e-9)


def test_one_training_row() -> None:
    X, y = np.array([[1.0, 2.0]]), np.array([3.0])
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        model = cls(bandwidth=[1.0, 1.0]).fit(X, y)
        grad, std = model.gradient([[1.5, 2.5], [0.0, 0.0]], return_std=True)
        assert np.all(grad == 0)
        assert std.shape == (2, 2)


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_bad_queries_and_parameters(rng: np.random.Generator, cls: type) -> None:
    X, y = _data(rng, 30, 2)
    model = cls(bandwidth=[0.5, 0.5]).fit(X, y)
    with pytest.raises(NadarayaError, match="2"):
        model.gradient(np.ones((3, 3)))
    with pytest.raises(NadarayaError, match="NaN"):
        model.gradient([[np.nan, 1.0]])
    with pytest.raises(NadarayaError, match="finite"):
        model.average_marginal_effects([[np.inf, 1.0]])
    with pytest.raises(NadarayaError, match="method"):
        model.gradient(X, return_std=True, method="delta")
    with pytest.raises(NadarayaError, match="n_resamples"):
        model.gradient(X, return_std=True, method="bootstrap", n_resamples=1)
    with pytest.raises(NadarayaError, match="continuous"):
        model.level_effects(X, 0)
    with pytest.raises(NadarayaError, match="feature"):
        model.level_effects(X, 5)
    with pytest.raises(NadarayaError, match="0 sample"):
        model.average_marginal_effects(np.empty((0, 2)))
    with pytest.raises(NadarayaError, match="0 sample"):
        model.gradient(np.empty((0, 2)))


def test_the_box_kernel_is_refused_for_nadaraya_watson(rng: np.random.Generator) -> None:
    X, y = _data(rng, 30, 1)
    with pytest.raises(NadarayaError, match="step"):
        NadarayaWatsonRegressor("uniform", bandwidth=0.5).fit(X, y).gradient(X)
    # the local slope of a box-weighted local linear fit is defined
    grad = LocalPolynomialRegressor(kernel="uniform", bandwidth=1.0).fit(X, y).gradient(X[:3])
    assert np.isfinite(grad).all()


def test_queries_no_key_weighs() -> None:
    X, y = np.array([[0.0], [1.0]]), np.array([0.0, 1.0])
    Xq = np.array([[0.5], [5.0]])
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        raising = cls(kernel="epanechnikov", bandwidth=0.8).fit(X, y)
        with pytest.raises(NadarayaError, match="no key"):
            raising.gradient(Xq)
        grad = cls(kernel="epanechnikov", bandwidth=0.8, empty="nan").fit(X, y).gradient(Xq)
        assert np.isfinite(grad[0]).all() and np.isnan(grad[1]).all()


def test_dataframe_queries_give_the_gradient_of_their_codes(rng: np.random.Generator) -> None:
    n = 80
    df = pd.DataFrame({"x": rng.uniform(0, 3, n),
                       "shop": pd.Categorical(rng.choice(["a", "b"], n)),
                       "z": rng.uniform(0, 3, n)})
    y = np.sin(df["x"]).to_numpy() + df["z"].to_numpy() + (df["shop"] == "a").to_numpy()
    codes = np.c_[df["x"], df["shop"].cat.codes, df["z"]].astype(float)
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        framed = cls(bandwidth=[0.4, 0.2, 0.5]).fit(df, y)
        plain = cls(bandwidth=[0.4, 0.2, 0.5], var_types="cuc").fit(codes, y)
        np.testing.assert_array_equal(framed.gradient(df.iloc[:5]), plain.gradient(codes[:5]))
        ame, se = framed.average_marginal_effects()
        assert np.isnan(ame[1]) and np.isnan(se[1]) and np.isfinite(ame[[0, 2]]).all()
