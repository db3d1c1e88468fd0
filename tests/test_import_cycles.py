"""No import cycle among ktui's modules, counting every import statement: at the top, inside a
function, under ``TYPE_CHECKING``. An import moved into a function still ties two modules; the
rule (ARCHITECTURE.md) is that none is there to dodge a cycle, so the graph read from the source
has none at all. import-linter's contracts see layers; this sees modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.unit

PACKAGE = REPO / "ktui"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """``ktui.worker.tier`` → its file, for every module and package of ktui."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ktui modules that ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:  # ``from ktui.worker import tier`` names a module, else a name of ``base``
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else _known(base, modules))
    return {m for m in found if m and m != name}


def _known(name: str, modules: dict[str, Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def graph_of(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_no_module_of_ktui_is_part_of_an_import_cycle():
    assert cycles(graph_of()) == []


def test_an_import_inside_a_function_or_for_typing_closes_a_cycle_too(tmp_path):
    package = tmp_path / "ktui"
    (package / "worker").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "worker" / "__init__.py").write_text("")
    (package / "worker" / "registry.py").write_text("from ktui.worker.dsl import ADAPTER\n")
    (package / "worker" / "dsl.py").write_text("from . import tier\nADAPTER = 1\n")
    (package / "worker" / "tier.py").write_text("def configure():\n    from ktui.worker.registry import DSLS\n")
    (package / "worker" / "errormap.py").write_text("from ktui.worker import patterns\n")
    (package / "worker" / "patterns.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ktui.worker.errormap import Mismatches\n")
    assert cycles(graph_of(package)) == [
        ["ktui.worker.dsl", "ktui.worker.registry", "ktui.worker.tier"],
        ["ktui.worker.errormap", "ktui.worker.patterns"],
    ]
