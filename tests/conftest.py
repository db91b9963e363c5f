"""Shared fixtures and settings for the whole test suite.

* ``rng``: a seeded :class:`numpy.random.Generator`, different for each test
  but the same on every run.
* Hypothesis profiles: ``dev`` (default) and ``ci`` (more examples, chosen when
  the environment variable ``CI`` is ``"true"``); ``HYPOTHESIS_PROFILE`` picks
  one explicitly. Neither has a deadline: timings on a shared machine vary.
* Matplotlib draws off-screen (``MPLBACKEND=Agg``).
* Under pytest-xdist each worker computes with one thread.
"""

from __future__ import annotations

import os
import zlib

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One thread per worker: parallel workers on a small machine, not threads fighting for it.
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("MPLBACKEND", "Agg")

settings.register_profile("dev", deadline=None, max_examples=50)
# CI draws the same examples on every machine (derandomize): a red run is the code's, and
# reproduces; local runs keep drawing new ones.
settings.register_profile(
    "ci", deadline=None, max_examples=200, print_blob=True, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") == "true" else "dev")
)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A numpy random generator seeded from the test's name (reproducible, per test)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
