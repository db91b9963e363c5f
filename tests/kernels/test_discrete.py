"""Categorical kernels: the formulas against statsmodels, and mixed products in the engine."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

import nadaraya
from nadaraya import NadarayaError
from nadaraya.kernels import (
    AitchisonAitken,
    Gaussian,
    LiRacine,
    LiRacineOrdered,
    WangVanRyzin,
)

sm_kernels = pytest.importorskip("statsmodels.nonparametric.kernels")
KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg

PEERS = {  # our class -> statsmodels' function of (h, Xi, x)
    LiRacine: sm_kernels.aitchison_aitken_reg,
    LiRacineOrdered: sm_kernels.wang_ryzin_reg,
    WangVanRyzin: sm_kernels.wang_ryzin,
}


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, float).reshape(-1, 1))


@pytest.mark.parametrize("cls", list(PEERS))
@pytest.mark.parametrize("lam", [0.0, 0.05, 0.5, 0.93, 1.0])
def test_the_formula_is_statsmodels(cls, lam: float) -> None:
    if cls is WangVanRyzin and lam == 1.0:
        lam = 0.999  # its lambda stays below 1
    codes = np.random.default_rng(0).integers(0, 5, 40)
    for x in range(5):
        got = cls(lam).score(_t([x]), _t(codes)).exp().numpy()[0]
        np.testing.assert_allclose(got, PEERS[cls](lam, codes, x), rtol=1e-14, atol=0)


@pytest.mark.parametrize("levels", [None, 5])
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8])
def test_aitchison_aitken_is_statsmodels(levels, lam: float) -> None:
    codes = np.random.default_rng(1).integers(0, 5, 60)  # every level appears
    for x in range(5):
        got = AitchisonAitken(lam, levels).score(_t([x]), _t(codes)).exp().numpy()[0]
        np.testing.assert_allclose(got, sm_kernels.aitchison_aitken(lam, codes, x, 5),
                                   rtol=1e-14, atol=0)


@pytest.fixture
def mixed() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    n = 150
    x = rng.normal(size=n)
    u = rng.integers(0, 3, n)
    o = rng.integers(0, 4, n)
    y = np.sin(2 * x) + u - 0.5 * o + 0.3 * rng.normal(size=n)
    return np.column_stack([x, u, o]).astype(float), y


@pytest.mark.parametrize("engine", ["auto", "dense", "streamed"])
def test_li_racine_products_are_kernel_reg(mixed, engine: str) -> None:
    X, y = mixed
    k = Gaussian(0.4).on([0]) * LiRacine(0.3).on([1]) * LiRacineOrdered(0.6).on([2])
    want, _ = KernelReg(y, X, "cuo", reg_type="lc", bw=[0.4, 0.3, 0.6],
                        ukertype="aitchison_aitken_reg", okertype="wangryzin_reg").fit(X)
    got = nadaraya.smooth(X, X, y, k, engine=engine)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_density_kernels_are_kernel_reg_defaults(mixed) -> None:
    X, y = mixed
    k = Gaussian(0.4).on([0]) * AitchisonAitken(0.3).on([1]) * WangVanRyzin(0.6).on([2])
    want, _ = KernelReg(y, X, "cuo", reg_type="lc", bw=[0.4, 0.3, 0.6]).fit(X)
    np.testing.assert_allclose(nadaraya.smooth(X, X, y, k), want, rtol=1e-10, atol=1e-12)


def test_lambda_one_smooths_the_variable_out(mixed) -> None:
    X, y = mixed
    with_u = nadaraya.smooth(X, X, y, Gaussian(0.4).on([0]) * LiRacine(1.0).on([1]))
    np.testing.assert_allclose(with_u, nadaraya.smooth(X[:, :1], X[:, :1], y, Gaussian(0.4)),
                               rtol=1e-13, atol=0)


def test_lambda_zero_splits_the_data_by_level(mixed) -> None:
    X, y = mixed
    got = nadaraya.smooth(X, X, y, Gaussian(0.4).on([0]) * LiRacine(0.0).on([1]))
    for level in range(3):
        rows = X[:, 1] == level
        alone = nadaraya.smooth(X[rows, :1], X[rows, :1], y[rows], Gaussian(0.4))
        np.testing.assert_allclose(got[rows], alone, rtol=1e-13, atol=0)


def test_binding_does_not_change_the_kernel() -> None:
    k = AitchisonAitken(0.2)
    before = repr(k), k.get_params()
    k.score(_t([0]), _t([0, 1, 2, 3]))
    assert (repr(k), k.get_params()) == before
    assert k.__dict__["_count"] is None


def test_batched_scores_are_the_bound_scores() -> None:
    codes = torch.randint(0, 4, (2, 3, 7, 1)).double()
    for k in (LiRacine(0.3), LiRacineOrdered(0.4), WangVanRyzin(0.2)):
        batched = k.scores(codes, codes)
        for b in range(2):
            for h in range(3):
                torch.testing.assert_close(batched[b, h], k.score(codes[b, h], codes[b, h]))


def test_clone_and_pickle_keep_the_parameters() -> None:
    k = Gaussian(0.4).on([0]) * AitchisonAitken(0.3, levels=4).on([1])
    for other in (clone(k), pickle.loads(pickle.dumps(k))):
        assert repr(other) == repr(k)
    assert AitchisonAitken(0.3, 4).set_params(bandwidth=0.5).bandwidth == 0.5


@pytest.mark.parametrize("make, words", [
    (lambda: LiRacine(1.5), r"in \[0, 1\]"),
    (lambda: LiRacine(-0.1), r"in \[0, 1\]"),
    (lambda: WangVanRyzin(1.0), r"in \[0, 1\)"),
    (lambda: AitchisonAitken(0.8, levels=4), r"in \[0, 0.75\]"),
    (lambda: AitchisonAitken(0.3, levels=1), "levels must be an integer >= 2"),
    (lambda: LiRacine(True), "must be a number"),
    (lambda: LiRacine(float("nan")), r"in \[0, 1\]"),
])
def test_bad_lambdas_are_refused_by_name(make, words: str) -> None:
    with pytest.raises(NadarayaError, match=words):
        make()


def test_bad_codes_are_refused_by_name() -> None:
    two = np.zeros((3, 2))
    with pytest.raises(NadarayaError, match="one column of level codes"):
        nadaraya.smooth(two, two, np.ones(3), LiRacine(0.5))
    frac = np.array([0.0, 0.5, 1.0])
    with pytest.raises(NadarayaError, match="integer ranks"):
        nadaraya.smooth(frac, frac, np.ones(3), LiRacineOrdered(0.5))
    one = np.zeros(4)
    with pytest.raises(NadarayaError, match="at least 2 levels"):
        nadaraya.smooth(one, one, np.ones(4), AitchisonAitken(0.1))
    with pytest.raises(NadarayaError, match=r"in \[0, 0.5\]"):  # two levels among the keys
        nadaraya.smooth(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.ones(2),
                        AitchisonAitken(0.7))
