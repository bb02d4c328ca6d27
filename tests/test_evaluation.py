"""The `tooltune.evaluation` package as a whole: its modules import each other without a cycle.

The scan reads every import statement (at the top, under `TYPE_CHECKING`, inside functions): a cycle
that only type checking closes still ties the modules together, and the next runtime import along it
fails at import time. `from package import name` depends on `package.name` when that is a module (a
package's `__init__` importing its own submodules is no cycle) and on `package` otherwise.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tooltune" / "evaluation"


def module_graph(root: Path, name: str) -> dict[str, set[str]]:
    """Module -> the modules of the package at `root` (imported as `name`) that it imports."""
    paths = {}
    for path in sorted(root.rglob("*.py")):
        dotted = ".".join((name, *path.relative_to(root).with_suffix("").parts))
        paths[dotted.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                          for a in node.names}
        graph[module] = {m for m in found if m in paths and m != module}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (its first module again at the end), or None."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as e:
        return list(reversed(e.args[1]))
    return None


def test_the_scan_finds_a_cycle_that_only_type_checking_closes(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import A\n")
    (pkg / "a.py").write_text("from pkg.sub import b\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from pkg.c import C\n")
    (pkg / "c.py").write_text("def f():\n    from pkg.a import A\n")
    graph = module_graph(pkg, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub"] == set()
    cycle = import_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"pkg.a", "pkg.sub.b", "pkg.c"}
    (pkg / "c.py").write_text("C = 1\n")
    assert import_cycle(module_graph(pkg, "pkg")) is None


def test_evaluation_modules_import_each_other_without_a_cycle() -> None:
    graph = module_graph(PACKAGE, "tooltune.evaluation")
    assert {"tooltune.evaluation.benchmark", "tooltune.evaluation.bfcl.benchmark"} <= set(graph)
    cycle = import_cycle(graph)
    if cycle:
        pytest.fail("import cycle inside tooltune.evaluation: " + " -> ".join(cycle))
