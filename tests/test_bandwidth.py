"""Rule-of-thumb bandwidths against scipy, statsmodels and the formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya.bandwidth import resolve_bandwidth, scott, silverman

rng = np.random.default_rng(0)


def _data(n: int, d: int) -> np.ndarray:
    # heavy tails in the last feature: the rules use the standard deviation
    x = rng.standard_normal((n, d)) * np.linspace(0.5, 3.0, d)
    x[:, -1] = rng.standard_t(2, n)
    return x


@pytest.mark.parametrize("d", [1, 2, 3, 7])
@pytest.mark.parametrize("n", [12, 200])
def test_rules_match_scipy_gaussian_kde(n: int, d: int) -> None:
    from scipy.stats import gaussian_kde

    x = _data(n, d)
    sd = x.std(axis=0, ddof=1)
    for rule, ours in (("scott", scott), ("silverman", silverman)):
        factor = gaussian_kde(x.T, bw_method=rule).factor
        np.testing.assert_allclose(ours(torch.tensor(x)).numpy(), factor * sd, rtol=1e-12)


@pytest.mark.parametrize("d", [1, 3])
def test_rules_match_the_formulas(d: int) -> None:
    x = _data(50, d)
    sd = x.std(axis=0, ddof=1)
    np.testing.assert_allclose(scott(torch.tensor(x)).numpy(), sd * 50 ** (-1 / (d + 4)),
                               rtol=1e-12)
    np.testing.assert_allclose(silverman(torch.tensor(x)).numpy(),
                               (4 / (d + 2)) ** (1 / (d + 4)) * sd * 50 ** (-1 / (d + 4)),
                               rtol=1e-12)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_one_feature_silverman_is_the_regression_normal_reference() -> None:
    # statsmodels' normal reference for kernel regression: 1.06 * std(ddof=0) * n^(-1/5).
    from statsmodels.nonparametric.kernel_density import KDEMultivariate

    x = _data(80, 1)
    reference = KDEMultivariate(x, var_type="c", bw="normal_reference").bw
    ours = silverman(torch.tensor(x)).numpy()
    # (4/3)^(1/5) = 1.0592 rounded to 1.06 there; sample versus population sd.
    np.testing.assert_allclose(ours, reference * (4 / 3) ** 0.2 / 1.06 * np.sqrt(80 / 79),
                               rtol=1e-12)
    # statsmodels' univariate density rules are different numbers
    from statsmodels.nonparametric.bandwidths import bw_silverman

    assert abs(ours[0] / bw_silverman(x[:, 0]) - 1) > 0.1


def test_smooth_accepts_rule_names() -> None:
    x = _data(60, 2)
    y = np.sin(x[:, 0])
    for rule, fn in (("scott", scott), ("Silverman", silverman)):
        h = fn(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(nadaraya.smooth(x, x, y, bandwidth=rule, engine="dense"),
                                      nadaraya.smooth(x, x, y, bandwidth=h, engine="dense"))
    # float32 keys give a float32 bandwidth; the rule itself is computed in float64
    h32 = resolve_bandwidth("scott", torch.tensor(x, dtype=torch.float32), "gaussian")
    assert h32.dtype == torch.float32
    np.testing.assert_allclose(h32.numpy(), scott(torch.tensor(x)).numpy(), rtol=1e-6)


def test_rules_need_spread() -> None:
    x = _data(20, 3)
    x[:, 1] = 4.0
    for rule in ("scott", "silverman"):
        with pytest.raises(NadarayaError, match=r"feature\(s\) \[1\] of keys are constant"):
            nadaraya.smooth(x, x, x[:, 0], bandwidth=rule)
        with pytest.raises(NadarayaError, match="constant"):
            resolve_bandwidth(rule, torch.tensor(x[:1]), "gaussian")


def test_resolve_checks_numbers() -> None:
    keys = torch.tensor(_data(10, 2))
    assert resolve_bandwidth(None, keys, "gaussian") is None
    t = torch.tensor([0.5, 1.0])
    assert resolve_bandwidth(t, keys, "gaussian") is t
    assert resolve_bandwidth(2, keys, "gaussian") == 2.0
    np.testing.assert_array_equal(resolve_bandwidth([0.5, 1.0], keys, "gaussian"), [0.5, 1.0])
    metric = resolve_bandwidth(np.array([[1.0, -2.0], [0.0, 0.0]]), keys, "gaussian")
    assert metric.shape == (2, 2)
    for bad, match in ((0.0, "must be > 0"), (-2.0, "must be > 0"), ([1.0, 0.0], "must be > 0"),
                       (np.nan, "finite"), (np.inf, "finite"), (1j, "finite"),
                       ({"h": 1}, "finite"), ("gcv", "is not a known rule")):
        with pytest.raises(NadarayaError, match=f"bandwidth.*{match}"):
            resolve_bandwidth(bad, keys, "gaussian")
