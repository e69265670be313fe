"""One staleness rule (docs/EVIDENCE.md; workbench.store.provenance.staleness): a session whose
kernel sources differ from the working tree is current where the equivalence record shows the
same device code on its GPU, and STALE otherwise, in `sessions list`, `sessions show`, the
report, the TUI, `export` and the evidence test alike.

Two committed sessions: one of 519ef2b (other csrc/ hashes, device code shown equal by
benchmarks/results/device_code/equivalence.json) and one of an older tree (no record: stale).
A planted rule that ignores the record makes every tool call the first one STALE: they all
read the one function.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_scan import check

from workbench import cli
from workbench.store import listing, provenance
from workbench.store.session import load_session
from workbench.tui.analysis import info_from_listing, view_from_session

REPO = Path(__file__).resolve().parent.parent
COVERED = "20261204T034742Z_default-r3"  # 519ef2b: sources differ, device code shown equal
OLD = "20261130T195329Z_default-r1"  # an older tree the record does not cover

if not all((REPO / "sessions" / n).is_dir() for n in (COVERED, OLD)):
    pytest.skip("the committed sessions are not here", allow_module_level=True)


def _stale_in_every_tool(tmp_path: Path, capsys) -> dict[str, dict[str, bool]]:
    """{tool: {session: called stale}} over list, show, report, TUI, export, evidence."""
    root = tmp_path / "sessions"
    root.mkdir(exist_ok=True)
    for n in (COVERED, OLD):
        if not (root / n).exists():
            (root / n).symlink_to(REPO / "sessions" / n)
    out: dict[str, dict[str, bool]] = {k: {} for k in ("list", "show", "report", "tui")}
    out |= {"export": {}, "evidence": {}}
    infos = {i.path.name: i for i in listing.list_sessions(root)}
    for n in (COVERED, OLD):
        out["list"][n] = bool(infos[n].stale)
        out["tui"][n] = bool(info_from_listing(infos[n]).stale)
        view = view_from_session(load_session(root / n, nvml=False))
        assert out["tui"][n] == any("STALE" in x for x in view.notes)
        assert cli.main(["sessions", "show", "--json", str(root / n)]) == 0
        out["show"][n] = bool(json.loads(capsys.readouterr().out)["stale"])
        assert cli.main(["report", "--no-plots", str(root / n)]) == 0
        out["report"][n] = "**STALE" in capsys.readouterr().out
        assert cli.main(["export", "--out", str(tmp_path / "d.json"), str(root / n)]) == 0
        err = capsys.readouterr().err
        out["export"][n] = "warning" in err and "STALE" in err
        assert len([x for x in err.splitlines() if "warning" in x]) <= 1  # one line
        doc = tmp_path / "README.md"
        doc.write_text(f"Measured: sessions/{n}.\n")
        out["evidence"][n] = bool(check([doc], root, base=tmp_path))
    return out


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_every_tool_says_stale_by_the_one_rule(tmp_path, capsys):
    said = _stale_in_every_tool(tmp_path, capsys)
    assert all(v == {COVERED: False, OLD: True} for v in said.values()), said
    st = provenance.session_staleness(load_session(REPO / "sessions" / COVERED, nvml=False))
    assert st.differ and st.same_code and not st.stale and st.arch == "compute_90"
    assert "same device code" in st.text() and "STALE" not in st.text()


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_a_rule_without_the_record_makes_every_tool_call_it_stale(tmp_path, capsys, monkeypatch):
    """Plant: the equivalence record ignored. Every tool then marks the covered session STALE,
    which shows that none keeps a rule of its own."""
    monkeypatch.setattr(provenance, "same_device_code", lambda *a, **k: False)
    said = _stale_in_every_tool(tmp_path, capsys)
    assert all(v == {COVERED: True, OLD: True} for v in said.values()), said
