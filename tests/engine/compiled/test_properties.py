"""Random and adversarial problems: the compiled engine equals the float64 dense engine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nadaraya import masks as M

from .._oracles import examples
from ._common import check_against_dense, needs_native

LAYOUTS = ("uniform", "clusters", "duplicates", "heavy-tails", "far-queries")


def _points(layout: str, m: int, n: int, d: int, h: float, gap: float,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if layout == "clusters":  # two tight clusters `gap` bandwidths apart, queries anywhere
        keys = rng.normal(0, h, (n, d)) + gap * h * (rng.random((n, 1)) < 0.5)
        queries = rng.uniform(-h, (gap + 1) * h, (m, d))
    elif layout == "duplicates":  # few distinct keys, each many times
        keys = rng.uniform(0, 1, (3, d))[rng.integers(0, 3, n)]
        queries = rng.uniform(0, 1, (m, d))
    elif layout == "heavy-tails":
        keys = rng.standard_cauchy((n, d))
        queries = rng.standard_cauchy((m, d))
    elif layout == "far-queries":  # queries `gap` bandwidths beyond the keys
        keys = rng.uniform(0, 1, (n, d))
        queries = 1 + gap * h * rng.uniform(0.5, 1, (m, d))
    else:
        keys = rng.uniform(0, 1, (n, d))
        queries = rng.uniform(-0.2, 1.2, (m, d))
    return queries, keys


@settings(max_examples=examples(40))
@given(
    m=st.integers(1, 40), n=st.integers(1, 150), d=st.integers(1, 3),
    p=st.sampled_from([0, 1, 2, 5]),
    kernel=st.sampled_from(["gaussian", "laplacian", "softmax"]),
    dtype=st.sampled_from(["float64", "float32"]),
    layout=st.sampled_from(LAYOUTS),
    log_h=st.floats(-2.5, 1.0), log_gap=st.floats(0.0, 4.0),
    leave_one_out=st.booleans(), seed=st.integers(0, 2**32 - 1),
)
# far from the keys, where the float32 scores themselves are rounded by 5e-5
@example(m=1, n=17, d=3, p=1, kernel="laplacian", dtype="float32", layout="far-queries",
         log_h=0.0, log_gap=2.8671875, leave_one_out=False, seed=72161)
def test_equals_dense(m: int, n: int, d: int, p: int, kernel: str, dtype: str, layout: str,
                      log_h: float, log_gap: float, leave_one_out: bool, seed: int) -> None:
    needs_native()
    rng = np.random.default_rng(seed)
    h = 10.0**log_h
    queries, keys = _points(layout, m, n, d, h, 10.0**log_gap, rng)
    values = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-3, 3, p)
    if kernel == "softmax":
        queries, keys = queries / h, keys / h  # the same range of scores as the others
    mask = M.LeaveOneOut() if leave_one_out else None
    check_against_dense(queries, keys, values, kernel, mask,
                        bandwidth=None if kernel == "softmax" else h, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_block_and_tail_size(dtype: str) -> None:
    # key counts around the vector width and the key block, queries around the tile
    needs_native()
    rng = np.random.default_rng(11)
    for n in (1, 3, 15, 16, 17, 31, 33, 255, 257, 1023, 1025, 4097):
        for m in (1, 3, 4, 5):
            keys = rng.uniform(0, 1, (n, 1))
            check_against_dense(rng.uniform(0, 1, (m, 1)), keys, rng.standard_normal((n, 2)),
                                bandwidth=0.05, dtype=dtype)
