"""Compiled loops: C sources built once per machine and loaded with :mod:`ctypes`.

An engine that needs a loop NumPy and torch cannot express fast (a vectorized
``exp`` fused with the accumulation, a recursion over sorted keys) keeps its C
source beside its Python module and calls :func:`library` with it. The source
is compiled for the instruction set this CPU offers (AVX-512, AVX2 with FMA,
or plain C; read at run time from torch's CPU capability), into a cache keyed
on the source, the flags and the compiler, and loaded. ``scripts/_env.sh``
builds every library at set-up (``python -m nadaraya.engine.native``), so a
fresh machine compiles before its first call, not during it.

Calls through :mod:`ctypes` release the GIL, so an engine runs query blocks
side by side in :func:`~nadaraya.engine._threads.map_blocks` threads; the C
code starts no threads of its own.

Environment:

``NADARAYA_NATIVE=0``
    Use no compiled code: :func:`library` returns None and engines that need
    it refuse, saying so in ``explain()``.
``NADARAYA_CACHE_DIR``
    Where compiled libraries are kept (default ``$XDG_CACHE_HOME/nadaraya``
    or ``~/.cache/nadaraya``).
``CC``
    The C compiler (default: the one Python was built with, else ``cc``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path

__all__ = ["instruction_set", "library", "unavailable"]

_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL | None] = {}
_failed: dict[Path, str] = {}

# Flags per instruction set. -ffp-contract=off keeps a*b+c two roundings unless
# the source asks for an FMA itself (through fma() or an intrinsic), so the
# compiled loops round as the C source says on every machine.
_BASE_FLAGS = ["-O3", "-std=c11", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off"]
_ISA_FLAGS = {
    "avx512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "avx2": ["-mavx2", "-mfma"],
    "generic": [],
}


def instruction_set() -> str:
    """The vector instruction set compiled for: ``"avx512"``, ``"avx2"`` or ``"generic"``."""
    forced = os.environ.get("NADARAYA_ISA")
    if forced in _ISA_FLAGS:
        return forced
    import torch

    capability = torch.backends.cpu.get_cpu_capability().upper()
    if "AVX512" in capability:
        return "avx512"
    if "AVX2" in capability:
        return "avx2"
    return "generic"


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(cc)
    if not words or shutil.which(words[0]) is None:
        words = ["cc"]
    return words


def _cache_dir() -> Path:
    root = os.environ.get("NADARAYA_CACHE_DIR")
    if root:
        return Path(root) / "native"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nadaraya" / "native"


def _compile(source: Path) -> Path:
    cc = _compiler()
    isa = instruction_set()
    flags = [*_BASE_FLAGS, *_ISA_FLAGS[isa]]
    text = source.read_bytes()
    version = subprocess.run([*cc, "--version"], capture_output=True, text=True,
                             timeout=60).stdout.splitlines()[:1]
    key = hashlib.sha256(b"\0".join([text, " ".join(cc + flags).encode(),
                                     "".join(version).encode()])).hexdigest()[:16]
    target = _cache_dir() / f"{source.stem}-{isa}-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{source.stem}-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([*cc, *flags, str(source), "-o", tmp, "-lm"],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cc)} failed on {source.name}: {done.stderr.strip()[-2000:]}")
        os.replace(tmp, target)  # atomic: a concurrent build of the same key writes the same file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def library(source: Path | str) -> ctypes.CDLL | None:
    """The compiled library of a C source file, or None where native code is unavailable.

    Parameters
    ----------
    source : path
        A C file. It is compiled once per machine (and again when it changes).

    Returns
    -------
    ctypes.CDLL or None
        None when ``NADARAYA_NATIVE=0`` or the build failed;
        :func:`unavailable` then says why.
    """
    path = Path(source).resolve()
    with _lock:
        if path in _loaded:
            return _loaded[path]
        lib = None
        if os.environ.get("NADARAYA_NATIVE", "1") == "0":
            _failed[path] = "compiled code is switched off (NADARAYA_NATIVE=0)"
        else:
            try:
                lib = ctypes.CDLL(str(_compile(path)))
            except (OSError, subprocess.SubprocessError) as exc:
                _failed[path] = f"its compiled loop could not be built ({exc})"
        _loaded[path] = lib
        return lib


def unavailable(source: Path | str) -> str | None:
    """Why :func:`library` gave None for ``source`` (None when it loaded or was not asked)."""
    return _failed.get(Path(source).resolve())
