"""`sessions list`, `show` and `compare` fit the terminal (issue 57): at 80 and at 140 columns
no line passes the width and every main comparison's ratio, interval and verdict stays whole on
one line; the columns left out are named with --wide; piped, whole rows as before.

The width is forced with --width N, and once through a terminal of $COLUMNS columns (stdout's
isatty patched), on committed sessions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from workbench.analysis import analyse, compare_sessions
from workbench.cli import main
from workbench.commands import _fit
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parent.parent
H100 = "20261205T161120Z_default-r2"  # a worker-protocol session: rests-on, confirm, references
H200 = "20261205T163000Z_default-r2"
OLD = "20261202T003535Z_default-r1"  # one process, an older protocol
AA = "20261205T161449Z_aa-r1"
ROOT = ["--root", str(REPO / "sessions")]


@pytest.fixture(scope="module")
def _index(tmp_path_factory) -> str:
    """One listing index for the module: listing every committed session validates each once."""
    return str(tmp_path_factory.mktemp("index") / "sessions-index.json")


@pytest.fixture(autouse=True)
def _shared_index(_index, monkeypatch) -> None:
    monkeypatch.setenv("WORKBENCH_SESSION_INDEX", _index)


def _out(capsys, *argv: str) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def _whole(lines: list[str], r) -> None:
    """The comparison's ratio, interval and verdict word on one line, each whole."""
    v = r.verdict
    ratio, ci = f"{v.median:.4f}", f"[{v.ci_low:.4f}, {v.ci_high:.4f}]"
    assert any(ratio in x and ci in x for x in lines) or any(
        r.id in x and ratio in x for x in lines
    ), (r.id, ratio)
    assert any(ci in x for x in lines), (r.id, ci)
    assert any(v.words in x.split() or f"{v.words}/" in x or f"/{v.words}" in x for x in lines)


def _fits(lines: list[str], width: int) -> None:
    over = [x for x in lines if len(x) > width]
    assert not over, f"{len(over)} lines over {width}: {over[0]!r}"


@pytest.mark.parametrize("width", [80, 140])
@pytest.mark.parametrize("name", [H100, OLD, AA])
@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_show_fits_and_keeps_each_main_answer_whole(capsys, name, width):
    lines = _out(capsys, "sessions", "show", name, *ROOT, "--width", str(width))
    _fits(lines, width)
    an = analyse(load_session(REPO / "sessions" / name))
    for r in an.by_role("main", "aa"):
        row = next(x for x in lines if x.startswith(r.id + " "))  # the table's row, not a record
        v = r.verdict
        assert f"{v.median:.4f}" in row and f"[{v.ci_low:.4f}, {v.ci_high:.4f}]" in row
        assert v.words in row.split(), row
    left = next(x for x in lines if x.startswith(f"(left out to fit {width} columns: "))
    assert left.endswith("--wide shows every column)") or "--wide" in lines[lines.index(left) + 1]
    assert any(x.startswith("rerun     workbench ab") for x in lines)


@pytest.mark.parametrize("width", [80, 140])
@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_compare_fits_and_keeps_both_answers_whole(capsys, width):
    lines = _out(capsys, "sessions", "compare", H100, H200, *ROOT, "--width", str(width))
    _fits(lines, width)
    a, b = (load_session(REPO / "sessions" / n) for n in (H100, H200))
    for s in compare_sessions(a, b).shifts:
        if s.a.role == "main":
            _whole(lines, s.a)
            _whole(lines, s.b)
            assert any(f"{s.a.verdict_words}/{s.b.verdict_words}" in x for x in lines), s.id


@pytest.mark.parametrize("width", [80, 140])
@pytest.mark.slow  # 4 s of the fast lane on the 2-core machine
def test_list_fits_and_names_what_it_left_out(capsys, width):
    lines = _out(capsys, "sessions", "list", *ROOT, "--width", str(width))
    _fits(lines, width)
    names = sorted(p.name for p in (REPO / "sessions").iterdir() if (p / "session.json").is_file())
    rows = [x.split()[0] for x in lines[1:] if x[:8].isdigit()]
    assert sorted(rows) == names  # every session, its name whole (what SESSION matches)
    note = " ".join(lines)
    assert f"(left out to fit {width} columns: when (UTC)" in note and "--wide" in note
    assert "recommendation" in lines[0]


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_piped_rows_are_whole_and_wide_is_the_same(capsys):
    """Piped (capsys is no terminal), as before: every column, whatever the width; --wide
    prints the same on a terminal."""
    for argv in (["show", H100], ["compare", H100, H200], ["list"]):
        piped = _out(capsys, "sessions", *argv, *ROOT)
        assert _out(capsys, "sessions", *argv, *ROOT, "--wide") == piped
        assert not any(x.startswith("(left out to fit") for x in piped)
    show = _out(capsys, "sessions", "show", H100, *ROOT)
    assert any(x.startswith("config    mode=") and len(x) > 500 for x in show)
    header = next(x for x in show if x.startswith("comparison "))
    assert "WS/L2" in header and "µs/call A→B" in header


def test_a_terminal_fits_its_own_width(capsys, monkeypatch):
    """No option: stdout a terminal of $COLUMNS columns is fitted; --wide gives every column."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert main(["sessions", "show", H100, *ROOT]) == 0
    lines = [_fit.ANSI.sub("", x) for x in capsys.readouterr().out.splitlines()]  # colours
    _fits(lines, 80)
    assert any(x.startswith("(left out to fit 80 columns") for x in lines)
    assert main(["sessions", "show", H100, *ROOT, "--wide"]) == 0
    assert max(len(x) for x in capsys.readouterr().out.splitlines()) > 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--width", "20"], "--width 20 must be at least 40 columns"),
        (["--width", "100", "--wide"], "--wide cannot be combined with --width 100"),
    ],
)
def test_bad_width_exits_2_in_one_line(capsys, argv, message):
    assert main(["sessions", "list", *ROOT, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------------- the layer itself


COLS = [_fit.Col("id", keep=True), _fit.Col("ratio", "r", keep=True), _fit.Col("note", rank=1),
        _fit.Col("more", rank=0), _fit.Col("why", fold=True)]  # fmt: skip
ROWS = [["w13/hot", "1.0039", "a note", "x" * 10, "rests on any of blocks 0, 3, 5"],
        ["w2/rotating", "0.9379", "another", "y" * 10, "–"]]  # fmt: skip


def test_fit_table_leaves_out_by_rank_then_folds_then_records():
    whole = _fit.fit_table(COLS, ROWS, None)
    assert whole.left_out == [] and len(whole.plain()) == 3
    assert all(len(x) <= 60 for x in _fit.fit_table(COLS, ROWS, 60).plain())
    # the folding column folds where that costs a line, before a ranked column goes
    folded = _fit.fit_table(COLS, ROWS, 45)
    assert folded.left_out == ["more"] and not folded.records
    assert folded.plain()[1] == "w13/hot      1.0039  a note   rests on any of"
    assert folded.plain()[2].endswith("blocks 0, 3, 5") and folded.line_rows[:3] == [None, 0, 0]
    narrow = _fit.fit_table(COLS, ROWS, 40)
    assert narrow.left_out == ["more", "note"] and all(len(x) <= 40 for x in narrow.plain())
    tiny = _fit.fit_table(COLS, ROWS, 16)  # not even the kept columns side by side
    assert tiny.records and tiny.left_out == []
    assert tiny.plain()[0] == "w13/hot" and "  ratio: 1.0039" in tiny.plain()
    assert all(len(x) <= 16 for x in tiny.plain())


def test_folded_stdout_folds_lines_and_keeps_short_ones(capsys):
    with _fit.folded_stdout(40):
        print("short")
        print("  " + "word " * 20)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "short" and all(len(x) <= 40 for x in lines)
    assert lines[1].startswith("  word") and lines[2].startswith("    word")
