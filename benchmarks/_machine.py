"""The two lines at the top of a recorded benchmark: when, on what, with which versions."""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata

__all__ = ["header"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def header(dists: tuple[str, ...]) -> str:
    """Date, machine, cores and load average; then the version of each distribution."""
    when = (f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.processor() or platform.machine()}"
            f" {_cpu_model()}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    out = []
    for dist in dists:
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist} not installed (./scripts/bench installs it)")
    return when + "\n" + ", ".join(out)
