"""The phase table of a run (workbench.run.phases; `sessions show --phases`,
benchmarks/worker_phases.py), on committed sessions and on hand-made records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import cli
from workbench.core.errors import EXIT_BAD_ARGS
from workbench.run.phases import (
    NO_PHASES,
    NO_TIMELINE,
    PHASES,
    phase_lines,
    phase_table,
    timeline_spans,
)
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parent.parent
WORKERS = REPO / "sessions" / "20261204T034323Z_default-plots"  # 6 + 3 workers, H200
OLD = REPO / "sessions" / "20261202T005250Z_aa-r1"  # before the phase accounting


def test_table_of_a_worker_session_adds_up_its_worker_records():
    s = load_session(WORKERS, nvml=False)
    t = phase_table(s)
    assert [(r["round"], r["worker"]) for r in t.rows] == [
        *(("main", i) for i in range(6)), *(("confirm", i) for i in range(3))
    ]  # fmt: skip
    by_key = {(w["round"], w["worker"]): w for w in s.workers}
    for r in t.rows:
        w = by_key[(r["round"], r["worker"])]
        assert r["turn_s"] == pytest.approx(w["ended"] - w["started"])
        assert r["import_s"] == pytest.approx(w["import_s"])
        assert r["rest_s"] == pytest.approx(r["turn_s"] - sum(w["phases"].values()))
    for p in PHASES:
        assert t.totals[p] == pytest.approx(sum(w["phases"].get(p, 0.0) for w in s.workers))
    # the committed table of this session (benchmarks/results/h200_head_519ef2b/phases.txt)
    assert t.wall_s == pytest.approx(113.1, abs=0.05)
    assert t.totals["timing"] == pytest.approx(25.9, abs=0.05)
    assert t.totals["banks"] == pytest.approx(23.0, abs=0.05)
    lines = phase_lines(t)
    assert lines[0].endswith("wall 113.1 s (created to finished)")
    assert sum(1 for line in lines if line.lstrip().startswith(("main", "confirm"))) == 9
    assert any("timing 25.9 s (12%)" in line for line in lines)
    assert any(NO_TIMELINE in line for line in lines)  # older than the parent's timeline


def test_a_session_without_phases_says_so():
    t = phase_table(load_session(OLD, nvml=False))
    assert [r["round"] for r in t.rows] == ["all"]
    assert any(NO_PHASES in line for line in phase_lines(t))


def test_timeline_spans_follow_the_marks_and_skip_a_round_that_did_not_run():
    tl = {"start": 100.0, "built": 101.5, "main": 131.5, "analysed": 132.0, "end": 132.25}
    assert timeline_spans(tl) == {
        "build": 1.5, "main round": 30.0, "analysis": 0.5, "finish": 0.25
    }  # fmt: skip
    assert timeline_spans({}) is None and timeline_spans(None) is None


def test_sessions_show_phases_prints_the_table_and_its_json(capsys):
    assert cli.main(["sessions", "show", str(WORKERS), "--phases"]) == 0
    out = capsys.readouterr().out
    assert "wall 113.1 s" in out and "rest" in out.splitlines()[1]
    assert "verdict" not in out.lower()  # the table alone, not the comparisons
    assert cli.main(["sessions", "show", str(WORKERS), "--phases", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["workers"]) == 9 and d["spans"] is None
    assert d["phases"]["timing"] == pytest.approx(25.9, abs=0.05)


def test_benchmark_script_prints_the_same_table_and_refuses_a_bad_name_in_one_line():
    script = [sys.executable, str(REPO / "benchmarks" / "worker_phases.py")]
    p = subprocess.run([*script, str(WORKERS)], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == phase_lines(phase_table(load_session(WORKERS, nvml=False)))
    p = subprocess.run([*script, "no-such-session"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == EXIT_BAD_ARGS
    assert len(p.stderr.strip().splitlines()) == 1 and "no-such-session" in p.stderr


def test_a_single_process_run_of_today_is_not_called_old(tmp_path):
    from workbench.store.session import SessionWriter

    w = SessionWriter(tmp_path, "ab", {"workers": 1}, {}, {})
    w.record("note", text="x")
    w.finish("complete", {"phases": {"timing": 1.5, "banks": 0.5}, "timeline": {}})
    t = phase_table(load_session(w.path, nvml=False))
    assert t.single and t.totals["timing"] == 1.5
    lines = phase_lines(t)
    assert any("one process" in line for line in lines) and not any(
        NO_TIMELINE in line for line in lines
    )
