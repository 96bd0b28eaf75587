"""No import cycles inside aiptrain/ or the trainer template.

Every import statement counts: module-level ones, those inside functions and those under
`if TYPE_CHECKING:`. A deferred import still makes one module depend on the other; deferring it
only hides a cycle until the day someone moves it to the top. (Third-party and standard-library
imports are outside the graph.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def module_name(package_dir: Path, path: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The modules (of `modules`) an import statement anywhere in `tree` refers to.

    `from pkg import sub` where pkg.sub is a module refers to pkg.sub alone: that pkg/__init__.py
    runs first is true of every submodule and not a dependency on what the package exports.
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                names.add(submodule if submodule in modules else base)
    return names


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    paths = {module_name(package_dir, path): path for path in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = imported_names(ast.parse(path.read_text(), str(path)), package, set(paths))
        graph[name] = {other for other in imported if other in paths and other != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None (depth-first search, three colours)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            child = pending.pop(0)
            if child in on_path:
                return [*path[path.index(child):], child]
            if child not in done:
                stack.append((child, sorted(graph[child])))
                path.append(child)
                on_path.add(child)
    return None


@pytest.mark.parametrize("package_dir", [REPO / "aiptrain", REPO / "trainer_template" / "trainer"],
                         ids=["aiptrain", "trainer_template"])
def test_no_import_cycles(package_dir: Path) -> None:
    graph = import_graph(package_dir)
    assert len(graph) > 10  # the walk found the package's modules
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import thing\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    (package / "d.py").write_text("import pkg.c\n")
    # A package that lazily imports its own submodule, which imports a sibling: no cycle.
    (package / "sub" / "__init__.py").write_text("def load():\n    from pkg.sub import e\n")
    (package / "sub" / "e.py").write_text("from pkg.sub import b\n")
    assert import_graph(package)["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (package / "c.py").write_text("import os\n")
    assert find_cycle(import_graph(package)) is None
