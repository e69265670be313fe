"""The analysis model (workbench/analysis, docs/DESIGN.md §7.5): one reader rule, read by the runner
and by every reader of a session, and checks that it stays the only one."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sim_device
from fixtures_sessions import real_sessions

from workbench import cli
from workbench.analysis import analyse, combine, reader_comparison, recommendations
from workbench.analysis.words import reason
from workbench.core.errors import BadArgument
from workbench.core.stats import Verdict, compare
from workbench.report.markdown import render_report
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
QUICK = ["--set", "hot", "--calls", "4", "--replays", "5", "--blocks", "3", "--pairs", "2"]
QUICK += ["--no-plots", "--json"]


# ------------------------------------------------------------------------------ the rule


def _v(label: str) -> Verdict:
    ratio = {"FASTER": 0.93, "SLOWER": 1.07, "SAME": 1.0, "AMBIGUOUS": 0.99}[label]
    noise = {"FASTER": 0.01, "SLOWER": 0.01, "SAME": 0.001, "AMBIGUOUS": 0.03}[label]
    v = compare(ratio * np.exp(np.random.default_rng(len(label)).normal(0, noise, 12)))
    assert v.verdict == label, reason(v)
    return v


@pytest.mark.parametrize(
    ("hot", "rotating", "decision"),
    [
        ("FASTER", "FASTER", "cooperative"),
        ("FASTER", "SAME", "cooperative"),
        ("FASTER", "AMBIGUOUS", "cooperative"),
        ("FASTER", "SLOWER", "scalar"),
        ("SLOWER", "AMBIGUOUS", "scalar"),
        ("SAME", "SAME", "scalar"),
        ("SAME", "AMBIGUOUS", "inconclusive"),
        ("AMBIGUOUS", "AMBIGUOUS", "inconclusive"),
    ],
)
def test_recommendation_rule(hot, rotating, decision):
    rec = combine("w13", {"hot": _v(hot), "rotating": _v(rotating)})
    assert rec.decision == decision
    assert rec.arm == ("b3-coop" if decision == "cooperative" else "b3-scalar")
    assert rec.verdicts == {"hot": hot, "rotating": rotating}
    assert "faster in at least one expert set" in rec.rule and "1 %" in rec.rule
    assert any(line.startswith(f"hot: {hot}") for line in rec.evidence)
    if decision == "cooperative" and "AMBIGUOUS" in (hot, rotating):
        assert any("caution" in line for line in rec.evidence)
    assert type(rec).from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_combine_rejects_empty():
    with pytest.raises(BadArgument, match="w2"):
        combine("w2", {})


# ------------------------------------------------------------------ which comparisons count


def _cmp(a: str, b: str, kernel: str = "w13", role: str = "main") -> dict:
    return {"id": f"{kernel}/hot", "kernel": kernel, "set": "hot", "role": role, "a": a, "b": b}


@pytest.mark.parametrize(
    ("cmp", "counts"),
    [
        (_cmp("b3-scalar", "b3-coop"), True),
        (_cmp("b3-scalar", "b3-coop", kernel="w2"), True),
        (_cmp("b4-scalar", "b3-coop"), False),  # layout and reader both change
        (_cmp("b4-scalar", "b3-scalar"), False),  # layout only
        (_cmp("b3-coop", "b3-scalar"), False),  # B must be the cooperative reader
        (_cmp("b3-scalar", "b3-scalar", role="aa"), False),
        (_cmp("b3-scalar", "b3-coop", role="reference"), False),
        (_cmp("b3-scalar", "tinygemm"), False),
        (_cmp("b3-scalar+spin=0", "b3-scalar+spin=80", role="calibration"), False),
        (_cmp("w13=b3-scalar,w2=b3-scalar", "w13=b3-coop,w2=b3-coop", kernel="step"), False),
        (_cmp("b3-scalar", "no-such-arm"), False),
        # tune's readers at the best parameters: the same parameters on both sides count
        (_cmp("b3-scalar@unroll=4,max_warps=32", "b3-coop@unroll=4,max_warps=32"), True),
        (_cmp("b3-scalar@unroll=4,max_warps=32", "b3-coop@unroll=5,max_warps=32"), False),
        (_cmp("b3-scalar", "b3-coop@unroll=4,max_warps=32"), False),
    ],
)
def test_reader_comparisons_differ_in_the_reader_only(cmp, counts):
    assert reader_comparison(cmp) is counts


class _Row:
    def __init__(self, cmp: dict, verdict: Verdict):
        self.cmp, self.verdict = cmp, verdict


def _verdict(ratio: float, n: int = 12, seed: int = 0) -> Verdict:
    return compare(ratio * np.exp(np.random.default_rng(seed).normal(0, 0.004, n)))


def test_b4_scalar_as_arm_a_recommends_nothing():
    rows = [_Row(_cmp("b4-scalar", "b3-coop"), _verdict(0.92, seed=1))]
    assert rows[0].verdict.verdict == "FASTER"
    assert recommendations(rows) == {}
    # with the reader comparison beside it, only that one counts
    rows.append(_Row({**_cmp("b3-scalar", "b3-coop"), "id": "w13/rotating", "set": "rotating"},
                     _verdict(1.08, seed=2)))  # fmt: skip
    rec = recommendations(rows)["w13"]
    assert rec.decision == "scalar" and rec.verdicts == {"rotating": "SLOWER"}


def test_a_comparison_without_pairs_is_no_evidence():
    empty = compare([])
    rows = [_Row(_cmp("b3-scalar", "b3-coop"), empty)]
    assert empty.n == 0 and recommendations(rows) == {}


# ------------------------------------------- the runner records what the report recomputes


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def _run(capsys, tmp_path, *extra):
    code = cli.main(["ab", *SMALL, *QUICK, "--sessions-dir", str(tmp_path), *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.mark.slow  # three runs on the simulated device, end to end
@pytest.mark.parametrize(
    ("arms", "decisions"),
    [
        ((), {"w13": "cooperative", "w2": "scalar"}),
        (("--a", "b4-scalar"), {}),  # layout and reader change at once: no reader verdict
        (("--a", "b4-scalar", "--kernel", "w13"), {}),
    ],
)
def test_runner_records_the_reports_recommendation(device, capsys, tmp_path, arms, decisions):
    summary = _run(capsys, tmp_path, "--no-reference", *arms)
    stored = summary["recommendations"]
    session = load_session(summary["session"])
    an = analyse(session)
    assert {k: r.to_dict() for k, r in an.recommendations.items()} == stored
    assert {k: r["decision"] for k, r in stored.items()} == decisions
    report = render_report(session)
    section = report.split("## Recommendation", 1)[1].split("\n## ", 1)[0]
    if decisions:
        for kernel, d in decisions.items():
            assert f": {d}** → `{stored[kernel]['arm']}`" in section
    else:
        assert "No reader comparison in this session" in section
        assert "`b4-scalar` vs `b3-coop` is not the scalar (A) against the cooperative" in section
        assert "→" not in section  # no decision line
    # the TUI's view reads the same model: the same decisions, and why there is none
    from workbench.tui.analysis import view_from_session

    view = view_from_session(session)
    assert {r.kernel for r in view.recommendations if r.kernel != "step"} == set(decisions)
    if not decisions:
        assert any("b4-scalar vs b3-coop is not the scalar (A)" in n for n in view.notes)


@pytest.mark.parametrize("path", real_sessions(), ids=lambda p: p.name)
@pytest.mark.slow  # 10 s of the fast lane on the 2-core machine
def test_committed_h200_sessions_recompute_what_they_recorded(path):
    """Every committed H200 session: the recommendation and the calibration resolution its runner
    stored equal what the analysis model recomputes from its journal."""
    s = load_session(path)
    an = analyse(s)
    stored = (s.summary or {}).get("recommendations") or {}
    assert {k: r["decision"] for k, r in stored.items()} == {
        k: r.decision for k, r in an.recommendations.items()
    }
    assert {k: r["arm"] for k, r in stored.items()} == {
        k: r.arm for k, r in an.recommendations.items()
    }
    cal, kept = an.calibration(), (s.summary or {}).get("calibration")
    assert (cal is None) == (kept is None)
    if cal is not None:
        ids = lambda c: {g: (x["resolution"] or {}).get("id") for g, x in c["groups"].items()}  # noqa: E731
        assert ids(cal) == ids(kept)


# ------------------------------------------------------------ one implementation of the rule


RULE_HOME = "workbench/analysis/recommend.py"
RULE_CALLS = {"combine", "is_reader_comparison", "reader_comparison"}
ALLOWED: set[tuple[str, str]] = set()  # (path, call) that plan with a part of the rule


def rule_copies(trees: dict[str, ast.Module]) -> list[str]:
    """Places outside RULE_HOME that apply the reader rule's parts themselves, or that weigh
    verdict labels inside a function about recommendations (a second copy of the rule)."""
    found = []
    for path, tree in trees.items():
        if path == RULE_HOME:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name in RULE_CALLS and (path, name) not in ALLOWED:
                    found.append(f"{path}:{node.lineno} calls {name}")
            if isinstance(node, ast.FunctionDef) and "recommend" in node.name.lower():
                labels = sorted(
                    {
                        c.value
                        for c in ast.walk(node)
                        if isinstance(c, ast.Constant) and c.value in ("FASTER", "SLOWER", "SAME")
                    }
                )
                if labels:
                    found.append(f"{path}:{node.name} weighs {labels}")
    return found


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_the_reader_rule_has_one_implementation():
    """Only workbench/analysis/recommend.py decides which comparisons count and combines their
    verdicts; the runner, report, plots, pool, sessions commands and TUI call it."""
    trees = {
        p.relative_to(REPO).as_posix(): ast.parse(p.read_text())
        for p in (REPO / "workbench").rglob("*.py")
    }
    assert RULE_HOME in trees
    assert rule_copies(trees) == []


def test_a_planted_copy_of_the_rule_is_found():
    planted = {
        "workbench/x.py": ast.parse(
            "def recommend(vs):\n    return 'scalar' if 'SLOWER' in vs else 'cooperative'\n"
        ),
        "workbench/y.py": ast.parse(
            "from workbench import plan\nok = plan.is_reader_comparison(a, b)\n"
        ),
    }
    assert rule_copies(planted) == [
        "workbench/x.py:recommend weighs ['SLOWER']",
        "workbench/y.py:2 calls is_reader_comparison",
    ]


def test_analysis_imports_neither_torch_nor_textual():
    code = (
        "import sys, workbench.analysis; "
        "print([m for m in ('torch', 'textual', 'matplotlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
