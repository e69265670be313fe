"""The import graph of workbench/ (docs/ARCHITECTURE.md, docs/CONTRIBUTING.md): one package per
layer, and lower layers never import upper ones.

Every `import` and `from ... import` of a workbench module counts, also those inside functions
(a lazy import is still a dependency), and so do the modules the TUI and the CLI load by name
(`importlib.import_module`). No cycle is allowed. The plots and the report are siblings that
import neither each other: both read the analysis model and its words (workbench.analysis.words),
and both find the figures' files through workbench.store.plot_files.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package modules it imports} of the package at ``root`` (a fresh copy: the
    tests add to it)."""
    return {m: set(deps) for m, deps in _import_graph(root).items()}


@functools.lru_cache(maxsize=4)
def _import_graph(root: Path) -> dict[str, frozenset[str]]:
    """Parsed once per process and root (every module's source, about 1.5 s a parse of the tree
    on the 2-core machine, for each of nine tests)."""
    mods = {}
    for p in root.rglob("*.py"):
        parts = p.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name}
    return {m: frozenset(deps) for m, deps in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# Bottom to top. A module may import its own layer and any layer below it, never one above.
# `workbench` itself (__version__) sits below everything; the entry points sit above everything.
LAYERS = [
    "core",  # errors, defaults, limits, stats
    "data",  # shapes, layouts, awq, checkpoints, synthetic data, reference, capacity
    "kernels",  # specs, variants, build, ops, argcases, the Triton peer
    "store",  # session folder, schema, provenance
    "measure",  # plan, banks, gate, graphs, ABBA, engine, monitor
    "analysis",  # the analysis model of sessions: comparisons, table, compare, pool, recommend
    "run",  # the runner and its progress events
    "report",  # the Markdown report and the figures' file names
    "plots",  # matplotlib figures
    "tune",  # the tuner (a face over the runner and engine)
    "tui",  # the Textual app
    "commands",  # the CLI's subcommands
]
ENTRY = {"workbench.cli", "workbench.__main__"}


def layer_of(module: str) -> int:
    """Index of a module's layer: -1 for the package root, len(LAYERS) for the entry points."""
    if module == "workbench":
        return -1
    if module in ENTRY:
        return len(LAYERS)
    top = module.split(".")[1]
    if top not in LAYERS:
        raise AssertionError(f"{module} is in no layer: put it in one of {LAYERS}")
    return LAYERS.index(top)


def dynamic_imports(root: Path) -> dict[str, set[str]]:
    """Modules loaded by name: the CLI's command table and the TUI's `_engine("...")` calls."""
    out: dict[str, set[str]] = {}
    cli = (root / "cli.py").read_text()
    out["workbench.cli"] = set(re.findall(r'"(workbench\.commands\.[a-z_]+)"', cli))
    eng = (root / "tui" / "engine.py").read_text()
    out["workbench.tui.engine"] = {
        f"workbench.{m}" for m in re.findall(r'_engine\("([a-z_.]+)"\)', eng)
    }
    # the built-in Python arms' entry points ("module:function", docs/DESIGN.md §4.8)
    arms = (root / "kernels" / "pyarm.py").read_text()
    out["workbench.kernels.pyarm"] = set(re.findall(r'"entry": "(workbench\.[a-z_.]+):', arms))
    return out


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{m} ({LAYERS[layer_of(m)] if 0 <= layer_of(m) < len(LAYERS) else 'root'}) imports "
        f"{d} ({LAYERS[layer_of(d)] if 0 <= layer_of(d) < len(LAYERS) else 'root'})"
        for m, deps in graph.items()
        for d in deps
        if layer_of(d) > layer_of(m)
    )


def full_graph() -> dict[str, set[str]]:
    graph = import_graph(REPO / "workbench")
    for m, deps in dynamic_imports(REPO / "workbench").items():
        missing = deps - graph.keys()
        assert not missing, f"{m} loads modules that do not exist: {sorted(missing)}"
        graph[m] |= deps
    return graph


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_every_module_is_in_a_layer_package():
    graph = import_graph(REPO / "workbench")
    loose = sorted(
        m
        for m in graph
        if m.count(".") == 1
        and m not in ENTRY
        and not (REPO / "workbench" / m.split(".")[1]).is_dir()
    )
    assert loose == [], f"modules outside a layer package: {loose}"
    for m in graph:
        layer_of(m)  # raises for a package that is not a layer


def test_layer_checker_finds_a_planted_upward_import():
    g = {"workbench.core.stats": {"workbench.analysis.model"}, "workbench.analysis.model": set()}
    assert layer_violations(g) == [
        "workbench.core.stats (core) imports workbench.analysis.model (analysis)"
    ]
    assert layer_violations({"workbench.commands.ab": {"workbench.core.stats"}}) == []


def test_dynamic_imports_are_read():
    dyn = dynamic_imports(REPO / "workbench")
    assert "workbench.commands.ab" in dyn["workbench.cli"]
    assert "workbench.run.runner" in dyn["workbench.tui.engine"]
    assert "workbench.kernels.triton_moe" in dyn["workbench.kernels.pyarm"]


def test_lower_layers_never_import_upper_ones():
    graph = full_graph()
    assert layer_violations(graph) == []


# Packages of which neither may import the other (docs/ARCHITECTURE.md, "Layers").
SIBLINGS = [("plots", "report")]


def sibling_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports between the packages of a SIBLINGS pair, either way."""
    pkg = lambda m: m.split(".")[1] if m.count(".") else ""  # noqa: E731
    pairs = {frozenset(p) for p in SIBLINGS}
    return sorted(
        f"{m} imports {d}"
        for m, deps in graph.items()
        for d in deps
        if pkg(m) != pkg(d) and frozenset((pkg(m), pkg(d))) in pairs
    )


def test_sibling_checker_finds_a_planted_import_either_way():
    g = {"workbench.plots.ratios": {"workbench.report.markdown", "workbench.analysis.words"}}
    g["workbench.report.markdown"] = {"workbench.plots._common"}
    assert sibling_imports(g) == [
        "workbench.plots.ratios imports workbench.report.markdown",
        "workbench.report.markdown imports workbench.plots._common",
    ]


def test_plots_and_report_import_neither_each_other():
    assert sibling_imports(full_graph()) == []


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = import_graph(REPO / "workbench")
    assert "workbench.measure.engine" in graph and graph["workbench.measure.engine"], (
        "graph not read"
    )
    assert cycles(graph) == [], sorted(sorted(c) for c in cycles(graph))


def modules_without_a_caller(graph: dict[str, set[str]]) -> list[str]:
    """Modules no other workbench module imports (importing ``a.b.c`` imports the packages ``a.b``
    and ``a`` too), other than the entry points. A module only tests import belongs under tests/."""
    imported = set()
    for deps in graph.values():
        for d in deps:
            parts = d.split(".")
            imported |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return sorted(m for m in graph if m not in imported and m not in ENTRY and m != "workbench")


def test_caller_finder_finds_a_planted_orphan():
    g = {
        "workbench.cli": {"workbench.commands.ab"},
        "workbench.commands.ab": {"workbench.core.stats"},
        "workbench.commands": set(),
        "workbench.core": set(),
        "workbench.core.stats": set(),
        "workbench.core.unused": {"workbench.core.stats"},
    }
    assert modules_without_a_caller(g) == ["workbench.core.unused"]


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_every_module_has_a_caller_in_the_package():
    """No module of the package is imported by tests alone: the CLI's command table and the TUI's
    by-name loads count (full_graph), the entry points are cli and __main__."""
    graph = full_graph()
    assert len(graph) > 50, "graph not read"
    assert modules_without_a_caller(graph) == []


def test_report_and_plots_do_not_import_each_other_both_ways():
    graph = import_graph(REPO / "workbench")
    plots = {m for m in graph if m == "workbench.plots" or m.startswith("workbench.plots.")}
    assert not graph["workbench.report.markdown"] & plots
    assert "workbench.analysis" in graph["workbench.plots"]


def test_engine_and_runner_do_not_import_each_other():
    graph = import_graph(REPO / "workbench")
    assert "workbench.run.runner" not in graph["workbench.measure.engine"]
    # the runner owns the order of work and the session; a worker of its pool drives the engine
    assert "workbench.measure.engine" not in graph["workbench.run.runner"]
    assert "workbench.measure.engine" in graph["workbench.run.worker_proc"]


def test_runner_imports_no_front_end():
    """The runner keeps orchestration: the TUI imports the runner's types, never the reverse."""
    graph = import_graph(REPO / "workbench")
    front = {m for m in graph if m.startswith(("workbench.tui", "workbench.commands"))}
    assert not graph["workbench.run.runner"] & front, sorted(graph["workbench.run.runner"] & front)
    assert "workbench.run.progress" in graph["workbench.run.runner"]
    assert "workbench.run.progress" in graph["workbench.tui.backend"]


def test_the_architecture_drawing_lists_the_layers_in_order():
    """docs/ARCHITECTURE.md "Layers" draws the packages top to bottom: the same list as LAYERS."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    drawn = re.findall(r"^ (\w+)/ ", block, re.MULTILINE)
    assert drawn[::-1] == LAYERS, drawn
