"""Lock files: every dependency pinned with hashes, torch outside them, installed as locked."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "requirements"
ENV_SCRIPT = ROOT / "scripts" / "_env.sh"

pytestmark = pytest.mark.skipif(not LOCKS.is_dir(), reason="not run from a source checkout")


def _sets() -> dict[str, list[str]]:
    """The installable sets of scripts/_env.sh: name -> extras."""
    text = ENV_SCRIPT.read_text(encoding="utf-8")
    body = re.search(r"declare -A LOCK_EXTRAS=\((.*?)\)\n", text, re.S).group(1)
    return {name: [e for e in extras.split(",") if e]
            for name, extras in re.findall(r'\[(\w+)\]="([^"]*)"', body)}


def _pins(path: Path) -> dict[str, tuple[Version, list[str]]]:
    """``name -> (version, hashes)`` of a lock file."""
    pins: dict[str, tuple[Version, list[str]]] = {}
    for entry in re.split(r"\n(?=\S)", path.read_text(encoding="utf-8")):
        if entry.startswith("#") or not entry.strip():
            continue
        head = re.match(r"([A-Za-z0-9_.\-]+)==([^\s\\;]+)", entry)
        assert head, f"{path.name}: not an exact pin: {entry.splitlines()[0]!r}"
        pins[canonicalize_name(head.group(1))] = (
            Version(head.group(2)), re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
    return pins


def _requirements(extras: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def test_every_set_of_the_set_up_has_a_lock_file() -> None:
    sets = _sets()
    assert {"base", "test"} <= set(sets)
    for name in sets:
        assert (LOCKS / f"{name}.lock").is_file(), f"run ./scripts/lock to make {name}.lock"


@pytest.mark.parametrize("name", sorted(_sets()))
def test_lock_pins_every_dependency_with_hashes_and_leaves_torch_out(name: str) -> None:
    pins = _pins(LOCKS / f"{name}.lock")
    for req in _requirements(_sets()[name]):
        key = canonicalize_name(req.name)
        if key == "torch":
            continue
        assert key in pins, f"{req.name} is missing from {name}.lock; run ./scripts/lock"
        version, _ = pins[key]
        assert req.specifier.contains(version, prereleases=True), (
            f"{name}.lock pins {req.name}=={version}, outside pyproject's {req.specifier}")
    for key, (version, hashes) in pins.items():
        assert hashes, f"{name}.lock pins {key}=={version} without a hash"
    # torch is installed by version (its CPU build is a local file); no CUDA packages ride in
    cuda = [k for k in pins if k == "torch" or k.startswith(("nvidia-", "cuda-")) or k == "triton"]
    assert not cuda, f"{name}.lock holds {cuda}"


@pytest.mark.parametrize("name", sorted(set(_sets()) - {"test"}))
def test_every_lock_agrees_with_the_test_lock(name: str) -> None:
    # the demo (base) and the benchmarks (bench) run the versions the tests ran
    other, test = _pins(LOCKS / f"{name}.lock"), _pins(LOCKS / "test.lock")
    differ = {k: (str(other[k][0]), str(test[k][0])) for k in other
              if k in test and other[k][0] != test[k][0]}
    assert not differ, f"{name}.lock and test.lock pin different versions: {differ}"


@pytest.mark.skipif(
    os.environ.get("NADARAYA_LATEST") == "1" or Path(sys.prefix) != ROOT / ".venv",
    reason="only in the locked environment that ./scripts/test makes")
def test_the_environment_holds_exactly_the_locked_versions() -> None:
    pins = _pins(LOCKS / "test.lock")
    for extra in LOCKS.glob("*.lock"):
        if extra.stem not in _sets():  # the --no-deps locks of the test set
            pins.update(_pins(extra))
    wrong = {}
    for key, (version, _) in pins.items():
        try:
            installed = Version(metadata.version(key))
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[key] = (str(version), str(installed))
    assert not wrong, f"installed versions differ from the lock (locked, installed): {wrong}"
