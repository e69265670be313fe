"""Every view of the TUI at 80x24 (the smallest terminal supported) and at 140x40: a snapshot of
each, and in the same app run direct checks of what a newcomer found cut (issues 33, 46, 57):
the no-GPU banner, Export and the tab keys in the footer, the sessions' dates, the
recommendation and the deciding rows of the verdict table, B ms and µs/call, no table cell cut
at the edge, and both sessions' ratio, interval and verdict of every main comparison of a
compare.

The results and the compare are of committed H200 sessions (18 comparisons: the main ones,
three references each, two step confirmations). Staleness against the working tree is switched
off ("cannot tell"), so that the screens do not change when csrc/ does.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("textual")

from textual.widgets._footer import FooterKey  # noqa: E402
from tui_backend_double import make_app, screen_lines, settle  # noqa: E402

from workbench.store import provenance  # noqa: E402
from workbench.tui.widgets.recommendation import RecommendationPanel, short_arms  # noqa: E402
from workbench.tui.widgets.results_table import ResultsTable  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

REPO = Path(__file__).resolve().parent.parent
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((140, 40), id="140x40")]
R1 = "20261202T003535Z_default-r1"  # 18 comparisons
R2 = "20261202T003734Z_default-r2"  # the same protocol: the compare's other side
R2_LATER = "20261203T102235Z_default-r2"  # the same slug a day later
LONG_SLUG = "20261203T095251Z_default-plots-board2"  # the longest slug with a recommendation


@pytest.fixture
def views(roots, monkeypatch):
    """``roots``, staleness switched off."""
    monkeypatch.setattr(provenance, "current_sources", lambda: {})
    return roots


def add_committed(roots) -> None:
    """Three committed sessions beside the synthetic one (only where a view shows them: each
    is read in full at the first listing)."""
    for name in (R1, R2, R2_LATER, LONG_SLUG):
        shutil.copytree(REPO / "sessions" / name, roots[1] / name)


def footer_problems(app, size, keys) -> list[str]:
    """Each key of ``keys`` and its description whole in the footer (its last line)."""
    footer = screen_lines(app)[size[1] - 1]
    shown = {k.key: f"{k.key_display} {k.description}" for k in app.screen.query(FooterKey)}
    return [
        f"footer lacks {shown.get(key, key)!r}: {footer.strip()!r}"
        for key in keys
        if key not in shown or shown[key] not in footer
    ]


def tab_keys_problems(app, size) -> list[str]:
    """The footer lists the tab keys (help names them: 1 2 3), on every tab."""
    footer = screen_lines(app)[size[1] - 1]
    return [] if "1 2 3 Tabs" in footer else [f"footer lacks the tab keys: {footer.strip()!r}"]


def painted(app, widget) -> list[str]:
    """The lines of ``widget`` as painted, the part of it in view only."""
    geometry = app.screen.find_widget(widget)
    r = geometry.region.intersection(geometry.clip)
    return [ln[r.x : r.right] for ln in screen_lines(app)[r.y : r.bottom]]


def cut_cells(app, table) -> list[str]:
    """Each piece of text ``table`` shows (its cells stand two spaces or more apart) is a whole
    cell or column label of it: "sou", "805", "3.91→3.9" are cut."""
    whole = {c.label.plain for c in table.ordered_columns}
    for i in range(table.row_count):
        whole |= {str(getattr(c, "plain", c)) for c in table.get_row_at(i)}
    shown = [t for ln in painted(app, table) for t in re.split(r"\s{2,}", ln.strip()) if t]
    bars = {chr(c) for c in range(0x2580, 0x25A0)}  # a scrollbar's blocks
    return [
        f"{type(table).__name__}: cut cell {t!r}"
        for t in shown
        if t not in whole and not set(t) <= bars
    ]


# ---- how each view is reached, and what must be whole in it --------------------------------


async def _nvml(pilot) -> None:
    for _ in range(5):  # a fixed number of NVML readings for the sparklines
        pilot.app.refresh_monitor()
        await settle(pilot, 2)


async def reach_run(pilot, roots) -> None:
    await settle(pilot)
    await _nvml(pilot)


def check_run(app, size) -> list[str]:
    problems = footer_problems(app, size, ("b", "r", "l", "question_mark", "q"))
    problems += tab_keys_problems(app, size)
    # the form's preset whole (issue 46: "qwen3.8-flash-ne" at 80 columns)
    if not any("preset" in ln and "qwen3.8-flash-next " in ln for ln in screen_lines(app)):
        problems.append("the run form's preset is cut")
    return problems


async def reach_sessions(pilot, roots) -> None:
    await reach_run(pilot, roots)
    await pilot.press("3")
    await settle(pilot)


def check_sessions(app, size) -> list[str]:
    problems = footer_problems(app, size, ("o", "m", "x", "e")) + tab_keys_problems(app, size)
    browser = app.query_one(SessionBrowser)
    problems += cut_cells(app, browser)  # issue 57: "sources" cut to "s" at 80 columns
    lines = screen_lines(app)
    same_slug = [i for i in browser.infos.values() if i.name.endswith("_default-r2")]
    assert len(same_slug) == 2
    for info in same_slug:  # the date, as the table shows it, tells the two apart
        day, time = info.created[5:10], info.created[11:16]
        if not any("default-r2" in ln and day in ln and time in ln for ln in lines):
            problems.append(f"{info.name}: its date {day} {time} is not on screen")
    # issue 46: the recommendation whole beside the longest slug ("w13 cooperati" was cut)
    for info in browser.infos.values():
        slug = info.name.partition("_")[2]
        if info.recommendation and not any(
            slug in ln and info.recommendation in ln for ln in lines
        ):
            problems.append(f"{info.name}: recommendation {info.recommendation!r} not whole")
    return problems


async def reach_results(pilot, roots) -> None:
    await reach_run(pilot, roots)
    pilot.app.open_session(roots[1] / R1)
    await settle(pilot)


def check_results(app, size) -> list[str]:
    problems = footer_problems(app, size, ("e", "end")) + tab_keys_problems(app, size)
    problems += cut_cells(app, app.query_one(ResultsTable))
    view = app.query_one("#results-view").view
    footer_top = size[1] - 3  # the GPU line, the status line and the footer below
    panel = app.query_one(RecommendationPanel)
    if not (panel.region.height >= len(view.recommendations)):
        problems.append(f"the recommendation is cut: {panel.region}")
    if panel.region.bottom > footer_top:
        problems.append(f"the recommendation is off screen: {panel.region}")
    lines = screen_lines(app)[:footer_top]
    for rec in view.recommendations:  # the answer: each kernel and the reader chosen, whole
        choice = re.compile(rf"{rec.kernel.upper()}\s+→ {re.escape(short_arms(rec.choice))}")
        if not any(choice.search(ln) for ln in lines):
            problems.append(f"recommendation {rec.kernel} → {rec.choice} not whole on screen")
    # at 80x24 the comparisons that decide and those that confirm (issue 46); at 140x40 every
    # one of the 18
    rows = [r for r in view.rows if r.role in ("main", "confirm") or size[1] >= 40]
    for r in rows:
        head = re.escape(r.verdict.words)
        row = re.compile(rf"^\s*{re.escape(r.id)}\s+{head}\s+{r.verdict.median:.4f}\b")
        if not any(row.match(ln) for ln in lines):
            problems.append(f"table row {r.id} not on screen")
    if size[0] >= 140 and not any(re.search(r"\bA ms\s+B ms\s+µs/call A→B\b", ln) for ln in lines):
        problems.append("columns B ms and µs/call not on screen")
    if any("…" in ln for ln in lines):  # the recommendation's reasons whole or left out
        problems.append("a line is cut: " + next(ln for ln in lines if "…" in ln).strip())
    return problems


async def reach_compare(pilot, roots) -> None:
    await reach_run(pilot, roots)
    pilot.app.compare_sessions(roots[1] / R1, roots[1] / R2)
    await settle(pilot)


def compare_expected(sessions: Path) -> dict[str, list[list[str]]]:
    """Per main comparison of R1 → R2 (in the folder ``sessions``): what must be whole on one
    line for session A, then for B: its ratio, its interval and its verdict (the analysis
    model's)."""
    from workbench.analysis import compare_sessions
    from workbench.core.fmt import interval, num
    from workbench.store.session import load_session

    diff = compare_sessions(load_session(sessions / R1), load_session(sessions / R2))
    return {
        s.id: [
            [num(r.verdict.median), interval(r.verdict.ci_low, r.verdict.ci_high), r.verdict_words]
            for r in (s.a, s.b)
        ]
        for s in diff.shifts
        if s.a.role == "main"
    }


def compare_problems(app) -> list[str]:
    """Both sessions' ratio, interval and verdict of each main comparison on a line of the
    compare screen as it is shown (no scrolling either way), whole."""
    body = app.screen.query_one(".modal-body")
    lines = painted(app, body)
    problems = [f"a cell is cut: {ln.strip()!r}" for ln in lines if "…" in ln]
    expected = compare_expected(app.backend.sessions_root)
    assert len(expected) == 4  # w13 and w2, hot and rotating
    for cmp_id, sides in expected.items():
        if not any(re.search(rf"\b{re.escape(cmp_id)}\s", ln) for ln in lines):
            problems.append(f"{cmp_id} not on screen")
        for side, cells in zip("AB", sides, strict=True):
            if not any(all(c in ln for c in cells) for ln in lines):
                problems.append(
                    f"{cmp_id}: session {side}'s {' '.join(cells)!r} not whole on screen"
                )
    return problems


def check_compare(app, size) -> list[str]:
    return compare_problems(app)


async def reach_live(pilot, roots) -> None:
    """Mid-run: w13/hot done (12 pairs), w13/rotating at 6 pairs, charted as they stand."""
    await reach_run(pilot, roots)
    await pilot.press("r")
    assert await asyncio.to_thread(pilot.app.backend.held.wait, 10)
    await pilot.pause()


def check_live(app, size) -> list[str]:
    return footer_problems(app, size, ("escape", "question_mark", "q"))


async def reach_browse(pilot, roots) -> None:
    await settle(pilot)


def check_browse(app, size) -> list[str]:
    from tui_backend_double import shown

    banner = app.query_one("#mode-banner")
    words = shown(banner).split()
    painted = " ".join(screen_lines(app)[banner.region.y : banner.region.bottom]).split()
    problems = [] if painted == words else [f"banner cut: {' '.join(painted)!r}"]
    return problems + footer_problems(app, size, ("o", "e"))


async def reach_help(pilot, roots) -> None:
    await settle(pilot)
    await pilot.press("f1")
    await settle(pilot)


def check_help(app, size) -> list[str]:
    return []  # the snapshot


SHOWS_COMMITTED = {"sessions", "results", "compare", "browse"}
VIEWS = {
    "run": (reach_run, check_run, {}),
    "sessions": (reach_sessions, check_sessions, {}),
    "results": (reach_results, check_results, {}),
    "compare": (reach_compare, check_compare, {}),
    "live run": (reach_live, check_live, {"hold_at": 18}),
    "browse": (reach_browse, check_browse, {"gpu": False, "nvml": False}),
    "help": (reach_help, check_help, {}),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view", list(VIEWS))
def test_view(views, snap_compare, view, size):
    reach, check, kwargs = VIEWS[view]
    if view in SHOWS_COMMITTED:
        add_committed(views)
    app, _ = make_app(views, **kwargs)
    problems: list[str] = []

    async def run_before(pilot) -> None:
        await reach(pilot, views)
        try:
            problems.extend(check(pilot.app, size))
        except Exception as e:  # reported below, with the others
            problems.append(f"{type(e).__name__}: {e}")

    shot = snap_compare(app, terminal_size=size, run_before=run_before)
    assert not problems, "\n".join(problems)
    assert shot


# ---- issue 46: keys at 80x24 ---------------------------------------------------------------


def test_tab_goes_between_the_tab_bar_and_the_results_table(views):
    """Opening a session focuses its table; Tab goes to the tab bar and the next Tab back to the
    table: never to the scrolling column around it, which shows no focus."""
    add_committed(views)
    app, _ = make_app(views)

    async def drive() -> list[str]:
        seen = []
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            app.open_session(views[1] / R1)
            await settle(pilot)
            seen.append(type(app.focused).__name__)
            for _ in range(2):
                await pilot.press("tab")
                seen.append(type(app.focused).__name__)
        return seen

    assert asyncio.run(drive()) == ["ResultsTable", "ContentTabs", "ResultsTable"]


# ---- issue 57: the compare at 80x24 ----------------------------------------------------------


async def _open_compare(app, views, pilot) -> None:
    await settle(pilot)
    app.compare_sessions(views[1] / R1, views[1] / R2)
    await settle(pilot)


def test_compare_at_80x24_shows_both_sessions_of_every_main_comparison_whole(views):
    """At 80x24 the compare showed "ratio in A [" and no more: B's figures took Tab and →.
    Now each main comparison's ratio, interval and verdict of A and of B are on screen whole,
    as it opens, without scrolling either way."""
    add_committed(views)
    app, _ = make_app(views)

    async def drive() -> list[str]:
        async with app.run_test(size=(80, 24)) as pilot:
            await _open_compare(app, views, pilot)
            return compare_problems(app)

    problems = asyncio.run(drive())
    assert not problems, "\n".join(problems)


def test_compare_page_down_after_tab_reaches_the_method(views):
    """Tab used to focus the compare's table, which then kept PageDown to itself (it shows all
    its rows): the method text at the end was out of reach."""
    add_committed(views)
    app, _ = make_app(views)

    async def drive() -> tuple[list[str], list[str]]:
        async with app.run_test(size=(80, 24)) as pilot:
            await _open_compare(app, views, pilot)
            body = app.screen.query_one(".modal-body")
            before = painted(app, body)
            await pilot.press("tab")
            for _ in range(6):
                await pilot.press("pagedown")
            await pilot.pause()
            return before, painted(app, body)

    before, after = asyncio.run(drive())
    assert not any("Method:" in ln for ln in before)
    assert any("Method:" in ln for ln in after), "\n".join(after)


def test_compare_cards_list_the_main_comparisons_first_then_confirm_then_references(views):
    """The cards' order is by role; within a role, the table's; every comparison is there."""
    from workbench.tui.widgets.shift_cards import cards

    add_committed(views)
    _, backend = make_app(views)
    view = backend.compare(views[1] / R1, views[1] / R2)
    text = [line.plain for line in cards(view.table, view.roles).renderables]
    named = [t.split()[0] for t in text if t.split() and t.split()[0] in view.roles]
    roles = [view.roles[n] for n in named]
    assert roles == sorted(roles, key=["main", "confirm", "reference"].index)
    table_order = [view.table.cell(row, "comparison") for row in view.table.rows]
    assert sorted(named) == sorted(table_order) and len(named) == 18
    for role in ("main", "confirm", "reference"):  # within a role, the table's order
        assert [n for n in named if view.roles[n] == role] == [
            n for n in table_order if view.roles[n] == role
        ]
    assert [t for t in text if t in ("main", "confirm", "reference")] == [
        "main",
        "confirm",
        "reference",
    ]
