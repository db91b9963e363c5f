"""The ``device`` fixture: every test here runs on the CPU and, where one is present, on CUDA.

The CUDA case is skipped (reason ``"no CUDA device"``) when
``torch.cuda.is_available()`` is false, so the suite passes on a machine
without a GPU and checks the CUDA path for real on one that has it.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(params=["cpu", "cuda"])
def device(request: pytest.FixtureRequest) -> torch.device:
    """The device the test's tensors live on: ``cpu``, then ``cuda`` when available."""
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch.device(request.param)
