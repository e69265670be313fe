"""The import graph of workbench/ (docs/CONTRIBUTING.md): lower layers never call up.

Every `import` and `from ... import` of a workbench module counts, also those inside functions
(a lazy import is still a dependency). No cycle is allowed: the plots read the analysis model
(workbench.analysis) and the report's wording, and the report finds the plots' files through
workbench.plot_files, never through the plotting package.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def import_graph(root: Path) -> dict[str, set[str]]:
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
    return graph


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


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = import_graph(REPO / "workbench")
    assert "workbench.engine" in graph and graph["workbench.engine"], "graph not read"
    assert cycles(graph) == [], sorted(sorted(c) for c in cycles(graph))


def test_report_and_plots_do_not_import_each_other_both_ways():
    graph = import_graph(REPO / "workbench")
    plots = {m for m in graph if m == "workbench.plots" or m.startswith("workbench.plots.")}
    assert not graph["workbench.report"] & plots
    assert "workbench.analysis" in graph["workbench.plots"]


def test_engine_and_runner_do_not_import_each_other():
    graph = import_graph(REPO / "workbench")
    assert "workbench.runner" not in graph["workbench.engine"]
    assert "workbench.engine" in graph["workbench.runner"]  # the runner drives the engine


def test_runner_imports_no_front_end():
    """The runner keeps orchestration: the TUI imports the runner's types, never the reverse."""
    graph = import_graph(REPO / "workbench")
    front = {m for m in graph if m.startswith(("workbench.tui", "workbench.commands"))}
    assert not graph["workbench.runner"] & front, sorted(graph["workbench.runner"] & front)
    assert "workbench.progress" in graph["workbench.runner"]
    assert "workbench.progress" in graph["workbench.tui.backend"]
