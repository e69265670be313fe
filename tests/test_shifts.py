"""The shift table of two sessions is built once (workbench/analysis/shifts.py, issue 55): the
CLI's `sessions compare` and the TUI's compare view lay out the same cells, and neither builds a
row of its own.

They once differed: `sessions compare` said "verdict only" where the TUI said "no" for the same
shift (a verdict that moved within the noise)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from workbench.analysis import compare_sessions, shifts
from workbench.cli import main
from workbench.store.session import load_session
from workbench.tui.analysis import compare_markdown

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
# committed pairs: one whose step/hot/confirm verdict moves within the noise ("verdict only"),
# and the TUI views' pair (tests/test_tui_views.py)
PAIRS = [
    ("20261130T143222Z_default-r3", "20261130T143332Z_default-r4"),
    ("20261202T003535Z_default-r1", "20261202T003734Z_default-r2"),
]


def cli_cells(capsys, a: str, b: str) -> dict[str, list[str]]:
    """`sessions compare A B`'s table, {header: the column's cells}, from its aligned text."""
    assert main(["sessions", "compare", a, b, "--root", str(SESSIONS)]) == 0
    lines = capsys.readouterr().out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("comparison "))
    head, rows = lines[i], []
    for ln in lines[i + 1 :]:
        if not ln or ln.startswith(" ") or ln.startswith("changed:"):
            break
        rows.append(ln)
    heads = list(shifts.shift_table(diff(a, b), CLI_KEYS).headers)
    starts, at = [], 0
    for h in heads:  # each header where the one before it ends: headers hold spaces
        at = head.index(h, at)
        starts.append(at)
        at += len(h)
    ends = [*starts[1:], None]
    return {h: [r[s:e].strip() for r in rows] for h, s, e in zip(heads, starts, ends, strict=True)}


def tui_cells(a: str, b: str) -> dict[str, list[str]]:
    """The TUI compare view's Markdown table, {header: the column's cells}."""
    md = compare_markdown(diff(a, b)).splitlines()
    table = [ln.strip("|").split(" | ") for ln in md if ln.startswith("| ")]
    heads, rows = [h.strip() for h in table[0]], table[1:]
    assert md[md.index(f"| {' | '.join(heads)} |") + 1].startswith("|---|")
    return {h: [r[j].strip() for r in rows] for j, h in enumerate(heads)}


@functools.cache
def diff(a: str, b: str):
    return compare_sessions(load_session(SESSIONS / a), load_session(SESSIONS / b))


CLI_KEYS = ("comparison", "ms_a", "ms_b", "ratio_a", "ratio_b", "verdicts", "shift", "interval",
            "changed")  # fmt: skip


def test_the_faces_use_the_tables_columns():
    from workbench.commands import sessions
    from workbench.tui import analysis as tui

    assert sessions.CMP_COLUMNS == CLI_KEYS
    assert set(tui.COMPARE_COLUMNS) <= set(shifts.COLUMNS)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0][-10:] + ".." + p[1][-10:])
def test_the_cli_and_the_tui_show_the_same_cells(capsys, pair):
    cli, tui = cli_cells(capsys, *pair), tui_cells(*pair)
    common = set(cli) & set(tui)
    assert {"comparison", "shift B-A", "95% interval", "changed", "verdicts A/B"} <= common
    assert len(tui["comparison"]) == len(diff(*pair).shifts) > 10
    for h in common:
        assert cli[h] == tui[h], h


def test_a_verdict_that_moved_within_the_noise_reads_verdict_only_in_both(capsys):
    pair = PAIRS[0]
    cli, tui = cli_cells(capsys, *pair), tui_cells(*pair)
    for cells in (cli, tui):
        row = cells["comparison"].index("step/hot/confirm")
        assert cells["changed"][row] == "verdict only"  # SLOWER in A, SLOWER~m in B
    s = next(s for s in diff(*pair).shifts if s.id == "step/hot/confirm")
    assert s.verdict_changed and not s.changed
    assert shifts.changed(s) == "verdict only"


def test_both_faces_take_their_rows_from_the_one_builder(capsys, monkeypatch):
    """A planted builder changes both faces: neither has a copy of the shift cells."""
    built = shifts.shift_table

    def planted(d, keys):
        t = built(d, keys)
        rows = tuple(
            shifts.ShiftRow(r.shift, tuple(f"P{k}:{r.shift.id}" for k in keys)) for r in t.rows
        )
        return shifts.ShiftTable(t.keys, t.headers, rows)

    monkeypatch.setattr(shifts, "shift_table", planted)
    a, b = PAIRS[0]
    cli, tui = cli_cells(capsys, a, b), tui_cells(a, b)
    assert cli["changed"][0] == "Pchanged:w13/hot" == tui["changed"][0]
    assert cli["shift B-A"][0] == "Pshift:w13/hot" == tui["shift B-A"][0]
    assert all(c.startswith("P") for cells in (*cli.values(), *tui.values()) for c in cells)


def test_the_table_refuses_an_unknown_column():
    with pytest.raises(KeyError):
        shifts.shift_table(diff(*PAIRS[0]), ("comparison", "bogus"))
