"""The tolerance promise: the check of each query's bound, and the exact redo of the rest.

A test method returns the exact float64 sums moved by its stated bounds in
the worst direction (or a given share of them), so whatever the check lets
through is as wrong as the bounds allow: every output must still be within
``tolerance * max |v|`` of the dense engine's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya.engine import certified
from nadaraya.engine.certified import Sums, check_tolerance, unproven_rows
from nadaraya.masks import LeaveOneOut


def exact_sums(job: Any) -> Sums:
    q = job.kernel.q.detach().double()
    k = job.kernel.k.detach().double()
    W = torch.exp(-0.5 * torch.cdist(q, k).square())
    total = W.sum(1)
    acc = W @ job.values.detach().double()
    return Sums(total, acc, torch.zeros_like(total), torch.zeros_like(acc))


class WorstCase:
    """A 'method' whose sums are off by exactly their bounds, in the worst direction.

    Its bounds are absolute, ``slack`` times the sum of all weights: honest, and
    far too loose for queries whose own total is small.
    """

    name = "fgt"

    def __init__(self, slack: float) -> None:
        self.slack = slack

    def refuse(self, job: Any, tolerance: float) -> str | None:
        return None

    def cost(self, job: Any, tolerance: float) -> float:
        return 1.0

    def plan(self, job: Any, tolerance: float) -> dict[str, Any]:
        return {"slack": self.slack}

    def sums(self, job: Any, tolerance: float) -> Sums:
        s = exact_sums(job)
        err = torch.full_like(s.total, self.slack * float(s.total.sum()) / max(job.m, 1))
        acc_err = err[:, None].expand_as(s.acc).clone()
        # total too small and acc too large in magnitude: the mean moves outward most
        return Sums(s.total - err, s.acc + torch.sign(s.acc) * acc_err, err, acc_err)


@pytest.fixture
def worst(monkeypatch: pytest.MonkeyPatch) -> WorstCase:
    method = WorstCase(1e-9)
    monkeypatch.setattr(certified._choose, "get_methods", lambda: {"fgt": method})
    return method


@pytest.mark.parametrize("bad", [0, 0.0, -1e-3, 1.0, 2.0, float("nan"), float("inf"), True,
                                 "1e-6", [1e-6]])
def test_tolerance_refused_by_name(bad: Any) -> None:
    with pytest.raises(NadarayaError, match="tolerance"):
        check_tolerance(bad)
    with pytest.raises(NadarayaError, match="tolerance"):
        nadaraya.smooth([0.0, 1.0], [0.0, 1.0], [1.0, 2.0], tolerance=bad)


def test_tolerance_accepts_numbers() -> None:
    assert check_tolerance(None) is None
    assert check_tolerance(np.float32(1e-3)) == pytest.approx(1e-3)
    assert check_tolerance(1e-12) == 1e-12


def test_method_engine_needs_a_tolerance() -> None:
    with pytest.raises(NadarayaError, match="tolerance="):
        nadaraya.smooth([0.0, 1.0], [0.0, 1.0], [1.0, 2.0], engine="fgt")


@given(st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1e-6, 1e-9]),
       st.booleans())
def test_unproven_rows_let_through_only_what_the_tolerance_allows(seed: int, tol: float,
                                                                   normalize: bool) -> None:
    g = np.random.default_rng(seed)
    m, p = 50, 3
    total = torch.tensor(10.0 ** g.uniform(-12, 3, m))
    acc = total[:, None] * torch.tensor(g.uniform(-1, 1, (m, p)))
    total_err = total * torch.tensor(10.0 ** g.uniform(-12, 0.5, m))
    acc_err = total[:, None] * torch.tensor(10.0 ** g.uniform(-12, 0.5, (m, p)))
    # the computed sums sit anywhere within the bounds of the exact ones
    t_hat = total + total_err * torch.tensor(g.uniform(-1, 1, m))
    a_hat = acc + acc_err * torch.tensor(g.uniform(-1, 1, (m, p)))
    scale = torch.ones(p)
    bad = unproven_rows(Sums(t_hat, a_hat, total_err, acc_err), scale, tol,
                        normalize=normalize, lse=True)
    ok = ~bad
    if normalize:
        err = (a_hat / t_hat[:, None] - acc / total[:, None]).abs()
        assert bool((err[ok] <= tol * (1 + 1e-12)).all())
    else:
        err = (a_hat - acc).abs()
        assert bool((err[ok] <= tol * total[ok, None] * (1 + 1e-6)).all())
    lse_err = (torch.log(t_hat) - torch.log(total)).abs()
    assert bool((lse_err[ok] <= tol * (1 + 1e-9)).all())


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-8])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_output_within_tolerance(worst: WorstCase, rng: np.random.Generator, tol: float,
                                       dtype: type) -> None:
    x = np.r_[rng.uniform(0, 6, 400), [60.0, -45.0]].astype(dtype)  # two far queries
    y = np.c_[np.sin(x), 1e3 * np.cos(x), np.zeros_like(x)].astype(dtype)
    q = np.r_[np.linspace(-2, 8, 301), [1e3]].astype(dtype)
    got = nadaraya.smooth(q, x, y, bandwidth=0.3, tolerance=tol)
    ref = nadaraya.smooth(q.astype(float), x.astype(float), y.astype(float), bandwidth=0.3,
                          engine="dense")
    # in float32 the points themselves are prepared in float32: the same-dtype dense
    # engine's error against float64 comes on top of the tolerance
    same = nadaraya.smooth(q, x, y, bandwidth=0.3, engine="dense")
    allowed = tol * np.abs(y).max(axis=0) + (0 if dtype == np.float64 else
                                             2 * np.abs(same - ref)
                                             + 4 * np.finfo(np.float32).eps * np.abs(ref))
    assert np.all(np.abs(got - ref) <= allowed)
    assert np.all(got[:, 2] == 0)


def test_far_queries_are_redone(worst: WorstCase, rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, 300)
    y = np.sin(x)
    q = np.array([3.0, 200.0])
    _, redone = _state(worst, q, x, y, 1e-6)
    assert redone == 1  # the far query: its total is far below the absolute bounds
    got = nadaraya.smooth(q, x, y, bandwidth=0.3, tolerance=1e-6)
    assert got[1] == nadaraya.smooth(q[1:], x, y, bandwidth=0.3)[0]  # the exact engines' own


def _state(method: WorstCase, q: np.ndarray, x: np.ndarray, y: np.ndarray,
           tol: float) -> tuple[Any, int]:
    from nadaraya.engine._api import build_job
    from nadaraya.engine._scale import scale_values

    job, _ = build_job(q, x, y, "gaussian", None, 0.3)
    scale_values(job)
    return certified.certified_state(job, method, tol)


def test_unnormalized_and_lse(worst: WorstCase, rng: np.random.Generator) -> None:
    x = rng.uniform(0, 6, 300)
    y = np.c_[np.sin(x), -5 * x]
    q = rng.uniform(-1, 7, 80)
    tol = 1e-7
    got, lse = nadaraya.smooth(q, x, y, bandwidth=0.3, tolerance=tol, normalize=False,
                               return_lse=True)
    ref, lse_ref = nadaraya.smooth(q, x, y, bandwidth=0.3, engine="dense", normalize=False,
                                   return_lse=True)
    total = np.exp(lse_ref)
    assert np.all(np.abs(got - ref) <= tol * np.abs(y).max(axis=0) * total[:, None] * 1.001)
    assert np.all(np.abs(lse - lse_ref) <= tol * 1.001)


def test_leave_one_out_through_a_method(worst: WorstCase, rng: np.random.Generator) -> None:
    x = np.r_[rng.uniform(0, 6, 300), 40.0]  # an isolated point: its others' sum is tiny
    y = np.sin(x) + 0.1 * x
    tol = 1e-6
    got, lse = nadaraya.smooth(x, x, y, "gaussian", LeaveOneOut(), bandwidth=0.3,
                               tolerance=tol, return_lse=True, empty="nan")
    ref, lse_ref = nadaraya.smooth(x, x, y, "gaussian", LeaveOneOut(), bandwidth=0.3,
                                   engine="dense", return_lse=True, empty="nan")
    assert np.all(np.abs(got - ref) <= tol * np.abs(y).max())
    assert np.all(np.abs(lse - lse_ref) <= tol * 1.001)


def test_explain_names_the_method_and_its_plan(worst: WorstCase) -> None:
    x = np.linspace(0, 6, 100)
    e = nadaraya.explain(x, x, np.sin(x), bandwidth=0.3, tolerance=1e-6)
    assert e.engine == "fgt" and e.plan == {"slack": 1e-9}
    assert e.detail["tolerance"] == 1e-6
    assert "plan: slack=1e-09" in str(e)
    assert "streamed" in e.reasons


def test_exact_engine_when_no_method_is_cheaper(monkeypatch: pytest.MonkeyPatch) -> None:
    method = WorstCase(1e-9)
    method.cost = lambda job, tol: 1e30  # type: ignore[method-assign]
    monkeypatch.setattr(certified._choose, "get_methods", lambda: {"fgt": method})
    x = np.linspace(0, 6, 50)
    e = nadaraya.explain(x, x, np.sin(x), bandwidth=0.3, tolerance=1e-6)
    assert e.engine != "fgt" and "could run, but costs" in e.reasons["fgt"]
    got = nadaraya.smooth(x, x, np.sin(x), bandwidth=0.3, tolerance=1e-6)
    np.testing.assert_array_equal(got, nadaraya.smooth(x, x, np.sin(x), bandwidth=0.3))
