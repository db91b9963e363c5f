"""Peak memory of one call, measured in a fresh child process: what the peak benchmarks share.

``bench_peak_memory.py`` and ``bench_image_memory.py`` run each case as
``python <script> --child <case> ...``. The child builds its input, runs the
call once on a small input (what loads lazily is loaded, thread pools
started), then resets the kernel's peak resident set size
(``/proc/self/clear_refs``) and runs the call on the full input
(:func:`peak_of`). The peak is ``VmHWM`` after the call minus ``VmRSS``
before it: every byte the call held at once, its output included, its input
not. Where the kernel cannot reset the peak, the peak of the whole child is
taken (an upper bound: it includes building the input) and ``reset`` is
False. The parent (:func:`run_child`) tells glibc to return large blocks at
once (``MALLOC_MMAP_THRESHOLD_``), so its cache does not count, as in
``tests/engine/test_memory.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["peak_of", "reset_peak", "run_child", "status"]


def status(field: str) -> int:
    """A ``/proc/self/status`` field (``VmRSS``, ``VmHWM``, ...) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    """Reset the peak resident set size to the current one; whether the kernel did."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return status("VmHWM") <= status("VmRSS") + (1 << 20)


def peak_of(run: Callable[[], Any], warm: Callable[[], Any], budget: float
            ) -> tuple[dict[str, Any], Any]:
    """``warm()``, then ``run()`` with the peak reset before it, both under the
    working-memory ``budget`` (MiB).

    Returns
    -------
    dict
        ``peak`` (bytes above the resident size before the call), ``reset``
        (whether the peak was reset) and ``seconds`` (the call's wall time).
    Any
        What ``run()`` returned.
    """
    import nadaraya

    with nadaraya.config_context(working_memory=budget):
        warm()
        reset = reset_peak()
        before = status("VmRSS")
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
    return {"peak": status("VmHWM") - before, "reset": reset, "seconds": seconds}, result


def run_child(script: str, name: str, args: Sequence[str]) -> dict[str, Any]:
    """Run ``script --child name *args`` in a fresh process; the JSON object it prints last."""
    cmd = [sys.executable, script, "--child", name, *args]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode:
        raise RuntimeError(f"case {name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
