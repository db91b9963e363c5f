"""``import nadaraya`` stays cheap: heavy dependencies load on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

import nadaraya

HEAVY = ("torch", "scipy", "sklearn", "matplotlib", "pandas", "statsmodels", "dask")


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import nadaraya",
    "import nadaraya.cli; nadaraya.cli.build_parser()",
    "import nadaraya.datasets",
])
def test_import_does_not_load_heavy_dependencies(code: str) -> None:
    loaded = _modules_after(code)
    assert "nadaraya" in loaded
    assert not {m for m in HEAVY if m in loaded}


def test_lazy_attributes_load_on_first_use() -> None:
    loaded = _modules_after("import nadaraya; nadaraya.smooth")
    assert "torch" in loaded, "the probe must be able to see a heavy import"


def test_version_matches_installed_metadata() -> None:
    assert nadaraya.__version__ == version("nadaraya")
