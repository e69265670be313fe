"""The shift table of two sessions is built once (workbench/analysis/shifts.py, issue 55): the
CLI's `sessions compare` and the TUI's compare view lay out the same cells, and neither builds a
row of its own.

They once differed: `sessions compare` said "verdict only" where the TUI said "no" for the same
shift (a verdict that moved within the noise)."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from workbench.analysis import compare_sessions, shifts
from workbench.cli import main
from workbench.store.session import load_session

pytest.importorskip("textual")  # the TUI's face (the GPU machine has no textual)
from workbench.tui.analysis import compare_view
from workbench.tui.widgets.shift_cards import JOINT, SIDES, card_cells, cards

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
# committed pairs: one whose step/hot/confirm verdict moves within the noise ("verdict only"),
# and the TUI views' pair (tests/test_tui_views.py)
PAIRS = [
    ("20261130T143222Z_default-r3", "20261130T143332Z_default-r4"),
    ("20261202T003535Z_default-r1", "20261202T003734Z_default-r2"),
]


def cli_cells(capsys, a: str, b: str) -> dict[str, dict[str, str]]:
    """`sessions compare A B`'s table, {comparison: {key: cell}}, from its aligned text."""
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
    cells = [
        {k: r[s:e].strip() for k, s, e in zip(CLI_KEYS, starts, ends, strict=True)} for r in rows
    ]
    return {c["comparison"]: c for c in cells}


def tui_cells(a: str, b: str) -> dict[str, dict[str, str]]:
    """The TUI compare view's cards, {comparison: {key: cell}}, as the screen gets them."""
    view = compare_view(diff(a, b))
    return {c.cells["comparison"]: dict(c.cells) for c in card_cells(view.table, view.roles)}


@functools.cache
def diff(a: str, b: str):
    return compare_sessions(load_session(SESSIONS / a), load_session(SESSIONS / b))


CLI_KEYS = ("comparison", "ms_a", "ms_b", "ratio_a", "ratio_b", "verdicts", "shift", "interval",
            "changed")  # fmt: skip
CARD_KEYS = (*JOINT, *(k for _, side in SIDES for k in side))


def test_the_faces_use_the_tables_columns():
    from workbench.commands import sessions

    assert sessions.CMP_COLUMNS == CLI_KEYS
    assert set(CARD_KEYS) <= set(shifts.COLUMNS)
    # a session's columns by their own keys, the same label for A and for B
    (_, a), (_, b) = SIDES
    for ka, kb in zip(a, b, strict=True):
        assert (shifts.COLUMNS[ka].side, shifts.COLUMNS[kb].side) == ("A", "B")
        assert shifts.COLUMNS[ka].label == shifts.COLUMNS[kb].label


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0][-10:] + ".." + p[1][-10:])
@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_the_cli_and_the_tui_show_the_same_cells(capsys, pair):
    cli, tui = cli_cells(capsys, *pair), tui_cells(*pair)
    assert list(cli) == [s.id for s in diff(*pair).shifts] and len(cli) > 10
    assert sorted(tui) == sorted(cli)
    common = set(CLI_KEYS) & set(CARD_KEYS)
    assert {"comparison", "ratio_a", "ratio_b", "shift", "interval", "changed"} <= common
    for cmp_id, row in cli.items():
        card = tui[cmp_id]
        for k in common:
            assert row[k] == card[k], (cmp_id, k)
        # the CLI's one cell of both verdicts is the cards' two, A's then B's
        assert row["verdicts"] == f"{card['verdict_a']}/{card['verdict_b']}", cmp_id


def test_the_cards_hold_the_tables_cells_by_key():
    """For a committed pair, each card's cells are `shift_table`'s of that comparison, key by
    key, the main comparisons first."""
    pair = PAIRS[1]
    table = shifts.shift_table(diff(*pair), CARD_KEYS)
    view = compare_view(diff(*pair))
    laid = card_cells(view.table, view.roles)
    want = {row.cells[0]: dict(zip(table.keys, row.cells, strict=True)) for row in table.rows}
    assert {c.cells["comparison"]: dict(c.cells) for c in laid} == want
    assert [c.role for c in laid[:4]] == ["main"] * 4
    assert {c.cells["comparison"] for c in laid[:4]} == {
        "w13/hot", "w13/rotating", "w2/hot", "w2/rotating"
    }  # fmt: skip
    lines = [line.plain for line in cards(view.table, view.roles).renderables]
    for c in laid:  # and each card shows them whole: the pair's on its first line, then A's, B's
        at = next(i for i, ln in enumerate(lines) if ln.split()[0] == c.cells["comparison"])
        assert all(c.cells[k] in lines[at] for k in JOINT)
        for (name, keys), ln in zip(SIDES, lines[at + 1 : at + 3], strict=True):
            assert ln.startswith(f"{name} ") and all(c.cells[k] in ln for k in keys), ln


def test_the_cards_read_no_header(monkeypatch):
    """Headers renamed (no "A"/"B" in a session's, A's ratio labelled apart from B's, the pair's
    anew) leave every card's cells and the words of its lines as they were: the cards take
    their columns by key, never out of a header's text; only the two header lines change."""
    pair = PAIRS[1]

    def laid() -> tuple[list, list[str]]:
        view = compare_view(diff(*pair))
        lines = [line.plain for line in cards(view.table, view.roles).renderables]
        return card_cells(view.table, view.roles), lines

    before, before_lines = laid()
    for n, key in enumerate(shifts.COLUMNS):
        monkeypatch.setitem(
            shifts.COLUMNS, key, dataclasses.replace(shifts.COLUMNS[key], label=f"h{n}", side="")
        )
    after, after_lines = laid()
    assert after == before
    # the same words on every card's line (a column is as wide as its header: the padding moves)
    assert [ln.split() for ln in after_lines[2:]] == [ln.split() for ln in before_lines[2:]]
    named = {k: f"h{n}" for n, k in enumerate(shifts.COLUMNS)}  # the header lines: the new names
    assert after_lines[0].split() == [named[k] for k in JOINT]
    assert after_lines[1].split() == [named[k] for k in SIDES[0][1]]


def test_a_verdict_that_moved_within_the_noise_reads_verdict_only_in_both(capsys):
    pair = PAIRS[0]
    cli, tui = cli_cells(capsys, *pair), tui_cells(*pair)
    for cells in (cli, tui):
        assert cells["step/hot/confirm"]["changed"] == "verdict only"  # SLOWER in A, SLOWER~m in B
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
        return dataclasses.replace(t, rows=rows)

    monkeypatch.setattr(shifts, "shift_table", planted)
    a, b = PAIRS[0]
    cli, tui = cli_cells(capsys, a, b), tui_cells(a, b)
    row, card = cli["Pcomparison:w13/hot"], tui["Pcomparison:w13/hot"]
    assert row["changed"] == "Pchanged:w13/hot" == card["changed"]
    assert row["shift"] == "Pshift:w13/hot" == card["shift"]
    assert card["verdict_b"] == "Pverdict_b:w13/hot"
    assert all(c.startswith("P") for rows in (cli, tui) for r in rows.values() for c in r.values())


def test_the_table_refuses_an_unknown_column():
    with pytest.raises(KeyError):
        shifts.shift_table(diff(*PAIRS[0]), ("comparison", "bogus"))
