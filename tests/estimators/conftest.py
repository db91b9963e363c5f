"""Fixtures shared by the estimator tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nadaraya.estimators import _direct


@pytest.fixture
def direct_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the rows solved from their kernel weights instead of the moments."""
    calls: list[int] = []
    original = _direct.solve_direct

    def counting(design: Any, P: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        calls.append(P.shape[0])
        return original(design, P, *args, **kwargs)

    monkeypatch.setattr(_direct, "solve_direct", counting)
    return calls
