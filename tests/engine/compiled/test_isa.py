"""Every instruction set's build, and no build at all, in a fresh interpreter each.

``NADARAYA_ISA`` forces a lower instruction set (a library of its own in the
cache) and ``NADARAYA_NATIVE=0`` switches compiled code off: both are read
when the library is first loaded, so each runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from ._common import needs_native

# Runs in the subprocess: the compiled engine against the float64 dense engine on
# problems that take every path of the loop (tails, leave-one-out, far queries,
# the exact pass, several value columns, float32). Prints the instruction set and
# the largest error of each dtype, relative to the size of the values.
_SCRIPT = r"""
import json
import numpy as np
import nadaraya
from nadaraya import masks as M
from nadaraya.engine.compiled import _library

rng = np.random.default_rng(0)
keys = rng.uniform(0, 3, (203, 2))
far = np.concatenate([rng.uniform(0, 1, (60, 1)), rng.uniform(0, 1, (60, 1)) + 300])
cases = [
    (keys[:37] + 0.1, keys, rng.standard_normal((203, 3)), "gaussian", None, 0.4),
    (keys, keys, rng.standard_normal(203), "laplacian", M.LeaveOneOut(), 0.3),
    (keys[:19], keys, rng.standard_normal((203, 1)), "softmax", None, None),
    (np.array([[150.0], [-50.0], [0.5]]), far, np.sin(far), "gaussian", None, 0.5),
    (keys[:5, :1], keys[:, :1], None, "gaussian", None, 0.2),
]
errors = {}
for dtype in ("float64", "float32"):
    worst = 0.0
    for q, k, v, kernel, mask, bw in cases:
        args = [a if a is None else a.astype(dtype) for a in (q, k, v)]
        out, lse = nadaraya.smooth(*args, kernel, mask, bandwidth=bw, engine="compiled",
                                   return_lse=True)
        args64 = [a if a is None else a.astype("float64") for a in args]
        ref, ref_lse = nadaraya.smooth(*args64, kernel, mask, bandwidth=bw, engine="dense",
                                       return_lse=True)
        scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        err = float(np.abs(out - ref).max()) / scale if ref.size else 0.0
        lse_err = float(np.abs(lse - ref_lse).max() / max(1.0, np.abs(ref_lse).max()))
        worst = max(worst, err, lse_err)
    errors[dtype] = worst
print(json.dumps({"isa": _library.isa(), "errors": errors}))
"""


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600, check=False)


def _has(isa: str) -> bool:
    capability = torch.backends.cpu.get_cpu_capability().upper()
    return isa == "generic" or isa.upper() in capability or (
        isa == "avx2" and "AVX512" in capability)


@pytest.mark.parametrize("isa", ["avx2", "generic"])
def test_lower_instruction_sets_equal_dense(isa: str) -> None:
    # the machine's own instruction set runs in every other test of the engine
    needs_native()
    if not _has(isa):
        pytest.skip(f"this CPU has no {isa}")
    done = _run(_SCRIPT, NADARAYA_ISA=isa)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["isa"] == isa
    assert report["errors"]["float64"] <= 1e-12, report
    assert report["errors"]["float32"] <= 1e-5, report


def test_native_off_refuses_and_others_run() -> None:
    script = r"""
import numpy as np, nadaraya
x = np.linspace(0, 6, 400)
why = nadaraya.explain(x, x, np.sin(x), "gaussian", bandwidth=0.3)
out = nadaraya.smooth(x, x, np.sin(x), "gaussian", bandwidth=0.3)
ref = nadaraya.smooth(x, x, np.sin(x), "gaussian", bandwidth=0.3, engine="dense")
try:
    nadaraya.smooth(x, x, np.sin(x), "gaussian", bandwidth=0.3, engine="compiled")
    forced = "ran"
except nadaraya.NadarayaError as exc:
    forced = str(exc)
print(why.engine)
print(why.reasons["compiled"])
print(float(np.abs(out - ref).max()))
print(forced)
"""
    done = _run(script, NADARAYA_NATIVE="0")
    assert done.returncode == 0, done.stderr[-3000:]
    engine, reason, err, forced = done.stdout.strip().splitlines()[-4:]
    assert engine != "compiled"
    assert "NADARAYA_NATIVE=0" in reason
    assert float(err) <= 1e-12
    assert "NADARAYA_NATIVE=0" in forced
