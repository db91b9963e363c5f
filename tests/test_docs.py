"""The documentation site: every public name in the API reference, and the site builds."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
PUBLIC = ("nadaraya", "nadaraya.kernels", "nadaraya.masks", "nadaraya.bandwidth",
          "nadaraya.estimators", "nadaraya.image", "nadaraya.nn", "nadaraya.nn.functional",
          "nadaraya.memory", "nadaraya.plot", "nadaraya.datasets", "nadaraya.explore")

pytestmark = pytest.mark.skipif(not (DOCS / "conf.py").is_file(),
                                reason="not run from a source checkout")


def _documented() -> dict[str, set[str]]:
    """Names listed under each ``.. currentmodule::`` of docs/api.rst."""
    names: dict[str, set[str]] = {}
    module = None
    for line in (DOCS / "api.rst").read_text(encoding="utf-8").splitlines():
        if line.startswith(".. currentmodule::"):
            module = line.split("::")[1].strip()
            names.setdefault(module, set())
        elif module and line.startswith("   ") and not line.strip().startswith(":"):
            names[module].add(line.strip())
    return names


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_name_is_in_the_api_reference(module: str) -> None:
    mod = importlib.import_module(module)
    documented = _documented().get(module, set())
    wanted = {n for n in mod.__all__
              if not inspect.ismodule(getattr(mod, n)) and callable(getattr(mod, n))}
    missing = sorted(wanted - documented)
    assert not missing, f"docs/api.rst lacks {module}: {missing}"
    stale = sorted(n for n in documented if n not in mod.__all__ and "." not in n)
    assert not stale, f"docs/api.rst lists names {module} no longer exports: {stale}"


def test_every_page_is_in_a_table_of_contents() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS).with_suffix("").as_posix()
        if rel in ("index",) or rel.startswith(("_build", "gallery", "generated")):
            continue
        assert Path(rel).name in text.replace(".md", ""), f"{rel} is in no toctree"


def test_gallery_examples_are_named_for_sphinx_gallery() -> None:
    examples = sorted(EXAMPLES.glob("*.py"))
    assert examples, "examples/ is empty"
    for path in examples:
        assert path.name.startswith("plot_"), f"{path.name}: gallery examples are plot_*.py"
        head = path.read_text(encoding="utf-8").lstrip()
        assert head.startswith('"""'), f"{path.name}: starts with its title docstring"


@pytest.mark.slow
def test_site_builds_offline_with_warnings_as_errors(tmp_path: Path) -> None:
    pytest.importorskip("sphinx_gallery")
    for name in ("docs", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("_build", "generated", "gallery"))
    env = {**os.environ, "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(tmp_path / "docs"), str(out)],
        capture_output=True, text=True, env=env, timeout=2400)
    assert proc.returncode == 0, proc.stderr[-6000:]
    for page in ("index.html", "api.html", "gallery/index.html", "operator.html"):
        assert (out / page).is_file(), page
    gallery = {p.stem for p in (out / "gallery").glob("plot_*.html")}
    assert gallery == {p.stem for p in EXAMPLES.glob("plot_*.py")}


# The top-level API and the certified kernel sums: every parameter has its entry.
DOCUMENTED = ("nadaraya", "nadaraya.engine.certified", "nadaraya.engine.fgt",
              "nadaraya.engine.binned", "nadaraya.engine.sweep", "nadaraya.engine.features")


def _signatures(module: str) -> list[str]:
    """Dotted names of the public functions, classes and methods of ``module``."""
    found = []
    mod = importlib.import_module(module)
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isfunction(obj):
            found.append(f"{module}.{name}")
        elif inspect.isclass(obj):
            if not getattr(obj, "_is_protocol", False):  # a Protocol's __init__ takes anything
                found.append(f"{module}.{name}")
            found.extend(f"{module}.{name}.{a}" for a, v in vars(obj).items()
                         if inspect.isfunction(v) and not a.startswith("_"))
    return found


@pytest.mark.parametrize("module", DOCUMENTED)
def test_every_parameter_is_documented(module: str) -> None:
    validate = pytest.importorskip("numpydoc.validate").validate
    missing = {}
    for name in _signatures(module):
        errors = [text for code, text in validate(name)["errors"] if code in ("PR01", "PR02")]
        if errors:
            missing[name] = errors
    assert not missing, missing
