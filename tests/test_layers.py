"""The package's layering, read from its import statements.

Three rules (DESIGN.md, "Layers" and "Engines"):

* parts (kernels, masks, bandwidth, configuration, errors, validation) import
  no engine and no face; the engine imports no face;
* no module outside ``nadaraya.engine`` imports a private engine name: the
  faces use ``nadaraya.engine`` and its public packages (no path component
  starting with ``_``), and only the names those list in ``__all__``;
* no circle among the imports a module runs when it loads (imports inside
  functions and under ``TYPE_CHECKING`` included in the first two rules, not
  in this one: they run later, or never).
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

import nadaraya

PACKAGE = Path(nadaraya.__file__).parent
PARTS = ("_config", "_errors", "_validation", "bandwidth", "kernels", "masks")
FACES = ("cli", "datasets", "estimators", "explore", "image", "memory", "nn", "plot")


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` loads ``target`` (and takes ``names`` from it)."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int
    at_load: bool  # runs when the importer loads (module level, not TYPE_CHECKING)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not _is_package(importer):
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _edges(name: str) -> list[Edge]:
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    edges: list[Edge] = []

    def visit(node: ast.AST, at_load: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("nadaraya"):
                        edges.append(Edge(name, alias.name, (), child.lineno, at_load))
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(name, child.level, child.module)
                if not target.startswith("nadaraya"):
                    continue
                names = tuple(a.name for a in child.names)
                submodules = [n for n in names if f"{target}.{n}" in MODULES]
                for n in submodules:  # `from . import module`
                    edges.append(Edge(name, f"{target}.{n}", (), child.lineno, at_load))
                rest = tuple(n for n in names if n not in submodules)
                if rest:
                    edges.append(Edge(name, target, rest, child.lineno, at_load))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, False)
            elif isinstance(child, ast.If) and _type_checking(child):
                visit(child, False)
            else:
                visit(child, at_load)

    visit(tree, True)
    return edges


EDGES = [e for name in MODULES for e in _edges(name)]


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _where(e: Edge) -> str:
    return f"{e.importer} (line {e.line}) imports {e.target}"


def test_the_import_graph_is_read() -> None:
    # the checks below see the package: a broken reader would pass them vacuously
    assert len(MODULES) > 100
    assert any(e.importer == "nadaraya.engine._api" and e.target == "nadaraya.engine._dispatch"
               for e in EDGES)
    assert any(e.importer.startswith("nadaraya.image") and e.target == "nadaraya.engine.grid"
               for e in EDGES)


def test_parts_import_no_engine_and_no_face() -> None:
    bad = [_where(e) for e in EDGES
           if _top(e.importer) in PARTS and _top(e.target) in ("engine", *FACES)]
    assert not bad, "parts must not import the engine or a face:\n" + "\n".join(bad)


def test_the_engine_imports_no_face() -> None:
    bad = [_where(e) for e in EDGES
           if _top(e.importer) == "engine" and _top(e.target) in FACES]
    assert not bad, "the engine must not import a face:\n" + "\n".join(bad)


def _public_engine_module(target: str) -> bool:
    return not any(part.startswith("_") for part in target.split(".")[2:])


def test_no_private_engine_name_outside_the_engine() -> None:
    bad = []
    for e in EDGES:
        if _top(e.importer) == "engine" or _top(e.target) != "engine":
            continue
        if not _public_engine_module(e.target):
            bad.append(f"{_where(e)}, a private module")
            continue
        exported = set(getattr(importlib.import_module(e.target), "__all__", ()))
        hidden = [n for n in e.names if n.startswith("_") or n not in exported]
        if hidden:
            bad.append(f"{_where(e)} for {', '.join(hidden)}, not in its __all__")
    assert not bad, ("faces use only nadaraya.engine and its public packages' __all__:\n"
                     + "\n".join(bad))


def _circles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for e in edges:
        if e.target in graph and e.target != e.importer:
            graph[e.importer].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_import_circle() -> None:
    # a package's __init__ loading its own modules is no circle; a module that
    # reaches back into the __init__ of its package while it loads is one
    circles = _circles([e for e in EDGES if e.at_load])
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("edges, expected", [
    ([("nadaraya.kernels", "nadaraya.masks"), ("nadaraya.masks", "nadaraya.kernels")],
     [["nadaraya.kernels", "nadaraya.masks"]]),
    ([("nadaraya.kernels", "nadaraya.masks")], []),
])
def test_the_circle_check_finds_a_circle(edges: list[tuple[str, str]],
                                         expected: list[list[str]]) -> None:
    assert _circles([Edge(a, b, (), 1, True) for a, b in edges]) == expected
