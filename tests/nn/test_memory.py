"""Attention holds no score matrix: peak memory of a long sequence within the budget.

As in ``tests/engine/test_memory.py``: the peak resident set of a fresh
process around one call, with glibc returning large blocks at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_PEAK = textwrap.dedent("""
    import json, resource, sys
    import torch
    import nadaraya
    from nadaraya.nn.functional import kernel_attention

    kernel, tokens, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 2, tokens, 64, generator=gen) for _ in range(2))
    v = torch.randn(1, 2, tokens, width, generator=gen)
    with torch.no_grad(), nadaraya.config_context(working_memory=64):
        kernel_attention(q[..., :256, :], k[..., :256, :], v[..., :256, :], kernel)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kernel_attention(q, k, v, kernel)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mib": (peak - base) / 1024}))
""")


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "width"), [("softmax", 64), ("rbf", 64), ("rbf", 16),
                                               ("softmax", 100)])
def test_long_sequences_hold_no_score_matrix(kernel: str, width: int) -> None:
    """4096 tokens, 2 heads: one score matrix is 128 MiB; the budget is 64 MiB.

    The rbf kernel's dot form has 66 columns: with values of another width
    torch fell back to a kernel that holds every score (over 250 MiB).
    """
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run([sys.executable, "-c", _PEAK, kernel, "4096", str(width)],
                          capture_output=True, text=True, env=env, timeout=600, check=True)
    mib = float(json.loads(proc.stdout.strip().splitlines()[-1])["mib"])
    # the budget, plus copies of the inputs (2 MiB each)
    assert mib <= 64 + 8 * 2, mib
