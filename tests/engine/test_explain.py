"""explain: the chosen engine and a reason for every engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nadaraya
from nadaraya import NadarayaError
from nadaraya import masks as M
from nadaraya.engine import ENGINES, Explanation

rng = np.random.default_rng(0)
PROBLEMS = {
    "gaussian": (rng.random((20, 2)), rng.random((30, 2)), rng.random(30), "gaussian", None,
                 0.2),
    "compact-sparse": (rng.random((40, 2)), rng.random((2000, 2)), rng.random(2000),
                       "epanechnikov", None, 0.04),
    "knearest": (rng.random((40, 2)), rng.random((2000, 2)), rng.random(2000), "gaussian",
                 M.KNearest(3), 0.1),
    "softmax-causal": (rng.random((16, 8)), rng.random((16, 8)), rng.random((16, 4)),
                       "softmax", "causal", None),
    "callable": (rng.random((5, 2)), rng.random((6, 2)), rng.random(6),
                 lambda q, k: -torch.cdist(q, k), None, None),
}


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_explanation_names_the_engine_and_every_reason(problem: str) -> None:
    q, k, v, kernel, mask, bw = PROBLEMS[problem]
    ex = nadaraya.explain(q, k, v, kernel, mask, bandwidth=bw)
    assert isinstance(ex, Explanation)
    assert ex.engine in ENGINES
    assert set(ex.reasons) == set(ENGINES)
    assert all(isinstance(r, str) and len(r) > 10 for r in ex.reasons.values())
    assert ex.reasons[ex.engine].startswith("chosen")
    # The first engine (in order of preference) that does not refuse is chosen.
    before = ENGINES[: ENGINES.index(ex.engine)]
    assert all(ex.reasons[name].startswith("cannot run") for name in before)
    text = str(ex)
    assert ex.engine in text and all(name in text for name in ENGINES)
    assert ex.detail["m"] == len(q) and ex.detail["n"] == len(k)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_refused_engines_raise_with_their_reason_and_others_run(problem: str) -> None:
    q, k, v, kernel, mask, bw = PROBLEMS[problem]
    ex = nadaraya.explain(q, k, v, kernel, mask, bandwidth=bw)
    auto = nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bw)
    chosen = nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bw, engine=ex.engine)
    np.testing.assert_array_equal(auto, chosen)
    for name in ENGINES:
        reason = ex.reasons[name]
        if reason.startswith("cannot run: "):
            why = reason.removeprefix("cannot run: ")
            with pytest.raises(NadarayaError, match=f"engine='{name}' cannot run"
                                                    ".*" + _escaped(why[:40])):
                nadaraya.explain(q, k, v, kernel, mask, bandwidth=bw, engine=name)
            with pytest.raises(NadarayaError, match=f"engine='{name}' cannot run"):
                nadaraya.smooth(q, k, v, kernel, mask, bandwidth=bw, engine=name)
        else:
            requested = nadaraya.explain(q, k, v, kernel, mask, bandwidth=bw, engine=name)
            assert requested.engine == name
            assert requested.reasons[name].startswith("chosen")
            assert set(requested.reasons) == set(ENGINES)


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_dense_never_refuses_and_is_last() -> None:
    assert ENGINES[-1] == "dense"
    for q, k, v, kernel, mask, bw in PROBLEMS.values():
        ex = nadaraya.explain(q, k, v, kernel, mask, bandwidth=bw)
        assert not ex.reasons["dense"].startswith("cannot run")


def test_requires_grad_is_not_streamed() -> None:
    q = torch.rand(5, 2, dtype=torch.float64, requires_grad=True)
    k = torch.rand(7, 2, dtype=torch.float64)
    ex = nadaraya.explain(q, k, torch.rand(7, dtype=torch.float64))
    assert ex.engine != "streamed"
    assert "grad" in ex.reasons["streamed"]


def test_unknown_engine() -> None:
    q, k, v, *_ = PROBLEMS["gaussian"]
    with pytest.raises(NadarayaError, match=r"engine 'fast' is not known; use 'auto' or one of"):
        nadaraya.explain(q, k, v, engine="fast")
