"""One comparison model and one table (docs/ARCHITECTURE.md, docs/DESIGN.md §7.7).

A measured comparison is `workbench.analysis.model.ComparisonResult` everywhere (the runner, the
tuner, the report, the plots, the commands, the TUI), and the cells of a comparison table are
computed in `workbench/analysis/table.py` alone: every face lays out those cells. Two checks read
the package's source (AST) and fail on a second record of a comparison or a second builder of
comparison rows; each is shown to find a planted one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"

MODEL = "analysis/model.py:ComparisonResult"
TABLE = "analysis/table.py"
# the one module that words a verdict's numbers as a sentence (its reason), not as cells
WORDS = "analysis/words.py"
# what a table row of comparisons shows and nothing else reads together: the Wilcoxon p and k/n
ROW_FIELDS = {"wilcoxon_p", "k_faster"}
ARM_TIMES = {"a_ms", "b_ms"}


@functools.cache
def _parse(text: str) -> ast.Module:
    return ast.parse(text)  # both checks read each module once


def _modules(root: Path):
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if not rel.startswith("core/"):  # the statistics themselves (stats.Verdict, PairRatio)
            yield rel, _parse(p.read_text())


def comparison_models(root: Path = PACKAGE) -> list[str]:
    """Classes that hold a comparison's result: a field typed as a Verdict, or a verdict beside
    the arms' times. Protocols (descriptions of what a reader needs) hold nothing."""
    out = []
    for rel, tree in _modules(root):
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            if any("Protocol" in ast.unparse(b) for b in node.bases):
                continue
            fields = {
                s.target.id: ast.unparse(s.annotation)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            typed = any("Verdict" in a for a in fields.values())
            if typed or ("verdict" in fields and fields.keys() & ARM_TIMES):
                out.append(f"{rel}:{node.name}")
    return out


def row_builders(root: Path = PACKAGE) -> list[str]:
    """Modules that read a verdict's Wilcoxon p and its k/n together (as attributes or keys):
    what building a row of a comparison table takes."""
    out = []
    for rel, tree in _modules(root):
        if rel == WORDS:
            continue
        seen = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute):
                seen.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                seen.add(n.value)
        if seen >= ROW_FIELDS:
            out.append(rel)
    return out


# Classes that refer to one verdict without recording a comparison: no id, no arm's times (a
# recommendation's evidence per expert set, issue 55.2). Held to that below.
VERDICT_VIEWS = {"analysis/recommend.py:SetEvidence"}


def _fields(qualname: str, root: Path = PACKAGE) -> set[str]:
    rel, name = qualname.split(":")
    (cls,) = [n for n in ast.walk(_parse((root / rel).read_text()))
              if isinstance(n, ast.ClassDef) and n.name == name]  # fmt: skip
    return {s.target.id for s in cls.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}  # fmt: skip


def test_one_comparison_model():
    assert [m for m in comparison_models() if m not in VERDICT_VIEWS] == [MODEL], (
        "a second record of a comparison's result: use workbench.analysis.ComparisonResult"
    )
    for view in VERDICT_VIEWS:  # a view that grew an id or the arms' times is a second model
        assert not _fields(view) & (ARM_TIMES | {"id", "cmp", "cmp_id", "pairs"}), view


def test_one_builder_of_comparison_rows():
    assert row_builders() == [TABLE], (
        "a second builder of comparison table rows: take the cells of "
        "workbench.analysis.table.comparison_table"
    )


PLANTED = """
from dataclasses import dataclass
from workbench.core import stats

@dataclass
class Row:
    cmp_id: str
    verdict: str
    a_ms: float
    b_ms: float

@dataclass
class Held:
    result: stats.Verdict

def cells(v):
    return [f"{v.wilcoxon_p:.2g}", f"{v.k_faster}/{v.n}"]
"""


def test_the_checks_find_a_planted_model_and_row_builder(tmp_path):
    (tmp_path / "tui").mkdir()
    (tmp_path / "tui" / "rows.py").write_text(PLANTED)
    # the same module in core/ is the statistics' home, not a second model
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "stats.py").write_text(PLANTED)
    assert comparison_models(tmp_path) == ["tui/rows.py:Row", "tui/rows.py:Held"]
    assert row_builders(tmp_path) == ["tui/rows.py"]
    (tmp_path / "tui" / "rows.py").write_text(
        "from typing import Protocol\nclass Judged(Protocol):\n    verdict: 'Verdict'\n"
        "def f(d):\n    return d['wilcoxon_p']\n"
    )
    assert comparison_models(tmp_path) == [] and row_builders(tmp_path) == []
