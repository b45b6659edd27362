"""The package's shape, read from the source with `ast` (nothing is imported):

* `dlperf` has no import cycle: every import of a dlperf module counts, at module level or
  inside a function (a function-level import that dodges a cycle is still the cycle), and so
  does a module named by string to `importlib.import_module` (the adapter registry);
* the scripts that run inside a framework's env (workload.py, micro.py, pace.py, dist_node.py,
  zoo.py, adapters/_shared/) import no dlperf code: that env has only the framework;
* the CLI imports no private module of the core (`dlperf.report._data`): what it shows, the
  core's public modules compute (scaling and suspect marks: `dlperf.analysis`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dlperf"
ADAPTERS = ROOT / "adapters"  # ships as `dlperf.adapters` (pyproject's package-dir)


def workload_scripts() -> list[Path]:
    """Files run by a framework's interpreter: everything in adapters/_shared/, and in each
    framework folder everything but its host-side adapter (`__init__.py`)."""
    found = sorted((ADAPTERS / "_shared").glob("*.py"))
    for folder in sorted(p for p in ADAPTERS.iterdir() if p.is_dir() and p.name != "_shared"):
        found += sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    return found


def host_modules() -> dict[str, Path]:
    """dlperf module name -> source file, the adapters' host side included."""
    modules: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["dlperf", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    modules["dlperf.adapters"] = ADAPTERS / "__init__.py"
    for path in sorted(ADAPTERS.glob("*/__init__.py")):
        if path.parent.name != "_shared":  # workload-side code, checked on its own
            modules[f"dlperf.adapters.{path.parent.name}"] = path
    return modules


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module name an import anywhere in `tree` may load ("pkg.name" for a `from pkg
    import name`, whether `name` is a module or not: the caller keeps those that are)."""
    calls_import_module = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against this module's package
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            calls_import_module |= name in ("import_module", "__import__")
    if calls_import_module:  # modules imported by name: every string that names one counts
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield node.value


def import_graph() -> dict[str, set[str]]:
    modules = host_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = _imported_names(tree, name, path.name == "__init__.py")
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) through each strongly connected component that has one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        start = min(component)
        # Shortest way back to `start` inside the component (breadth first).
        paths = {start: [start]}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph[v] & component):
                if w == start:
                    found.append([*paths[v], start])
                    queue = []
                    break
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a"},  # a cycle of three
        "d": {"a"},  # leads into it, not part of it
    }
    assert cycles(graph) == [["a", "b", "c", "a"]]
    tree = ast.parse(
        "from dlperf import system\n"
        "def f():\n"
        "    from dlperf.runner import run_benchmark\n"
        "    import importlib\n"
        "    importlib.import_module('dlperf.mlperf')\n"
    )
    names = set(_imported_names(tree, "dlperf.x", is_package=False))
    assert {"dlperf", "dlperf.system", "dlperf.runner", "dlperf.mlperf"} <= names
    graph = import_graph()
    assert "dlperf.runner" in graph["dlperf.sweep"]  # a module-level import
    assert "dlperf.runner" in graph["dlperf.cli.run"]  # a function-level import
    assert "dlperf.adapters.pytorch" in graph["dlperf.adapters"]  # the registry, by name


def test_dlperf_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles in dlperf:\n" + "\n".join(" -> ".join(c) for c in found)


def test_nothing_but_the_core_imports_the_runner_for_spec_or_results() -> None:
    """Spec resolution and result assembly are `dlperf.spec` and `dlperf.assemble`: the log
    importers, the model checks and the sweep go through them, never through the runner for
    them (the sweep runs its cells with the runner)."""
    graph = import_graph()
    importers = [m for m in graph if m == "dlperf.importers" or m.startswith("dlperf.importers.")]
    assert importers
    official = [m for m in graph if m == "dlperf.official" or m.startswith("dlperf.official.")]
    assert "dlperf.official.adapter" in official
    for module in [*importers, *official, "dlperf.mlperf", "dlperf.checks"]:
        assert "dlperf.runner" not in graph[module], module
    for module in ("dlperf.spec", "dlperf.assemble"):
        assert "dlperf.runner" not in graph[module]
        assert not any(m.startswith("dlperf.importers") for m in graph[module])


def test_the_cli_imports_no_private_module_of_the_core() -> None:
    graph = import_graph()
    cli = [m for m in graph if m.startswith("dlperf.cli.")]
    assert "dlperf.cli.run" in cli and "dlperf.report._data" in graph
    offending = [
        f"{module} imports {target}"
        for module in cli
        for target in sorted(graph[module])
        if not target.startswith("dlperf.cli.")
        and any(part.startswith("_") for part in target.split(".")[1:])
    ]
    assert not offending, "the CLI imports private modules:\n" + "\n".join(offending)


def test_workload_scripts_import_no_dlperf_code() -> None:
    scripts = workload_scripts()
    names = {p.relative_to(ADAPTERS).as_posix() for p in scripts}
    # The scripts the adapters' commands run are among those checked: workload.py and
    # micro.py (dlperf.adapter's commands), and those a framework's adapter names itself.
    named = {"_shared/loadgen_run.py", "_shared/workload_kit.py", "_shared/model_math.py"}
    for folder in ("jax", "mxnet", "oneflow", "paddle", "pytorch", "tensorflow"):
        named |= {f"{folder}/workload.py", f"{folder}/micro.py"}
    for host in ADAPTERS.glob("*/__init__.py"):
        for script in re.findall(r"[\"']([A-Za-z_]+\.py)[\"']", host.read_text()):
            named.add(f"{host.parent.name}/{script}")
    assert {"calibration/pace.py", "mxnet/dist_node.py"} <= named
    assert named <= names, named - names
    offending = []
    for path in scripts:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = ["." * node.level + (node.module or "")]
            else:
                continue
            for mod in mods:
                if mod.startswith(".") or mod.split(".")[0] in ("dlperf", "adapters"):
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {mod}")
    assert not offending, "workload scripts import dlperf code:\n" + "\n".join(offending)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def test_official_modules_import_one_way() -> None:
    """`dlperf.official`'s modules import only those before them (manifest, checkout, commands,
    adapter), and the launchers (`dlperf.launch`) know nothing of official implementations."""
    graph = import_graph()
    order = ["manifest", "checkout", "commands", "adapter"]
    for i, name in enumerate(order):
        deps = {m for m in reachable(graph, f"dlperf.official.{name}") if "official" in m}
        assert deps <= {f"dlperf.official.{n}" for n in order[:i]}, (name, deps)
    assert not {m for m in reachable(graph, "dlperf.launch") if m.startswith("dlperf.official")}
