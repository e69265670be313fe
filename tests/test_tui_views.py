"""Every view of the TUI at 80x24 (the smallest terminal supported) and at 140x40: a snapshot of
each, and in the same app run direct checks of what a newcomer found cut (issue 33): the
compare table's cells, the no-GPU banner, Export in the footer, the sessions' dates, the
recommendation and the deciding rows of the verdict table, B ms.

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
from tui_backend_double import make_app, settle  # noqa: E402

from workbench.store import provenance  # noqa: E402
from workbench.tui.widgets.recommendation import RecommendationPanel, short_arms  # noqa: E402
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


def screen_lines(app) -> list[str]:
    """The screen as painted, one string per line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def footer_problems(app, size, keys) -> list[str]:
    """Each key of ``keys`` and its description whole in the footer (its last line)."""
    footer = screen_lines(app)[size[1] - 1]
    shown = {k.key: f"{k.key_display} {k.description}" for k in app.screen.query(FooterKey)}
    return [
        f"footer lacks {shown.get(key, key)!r}: {footer.strip()!r}"
        for key in keys
        if key not in shown or shown[key] not in footer
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
    # the form's preset whole (issue 46: "qwen3.8-flash-ne" at 80 columns)
    if not any("preset" in ln and "qwen3.8-flash-next " in ln for ln in screen_lines(app)):
        problems.append("the run form's preset is cut")
    return problems


async def reach_sessions(pilot, roots) -> None:
    await reach_run(pilot, roots)
    await pilot.press("3")
    await settle(pilot)


def check_sessions(app, size) -> list[str]:
    problems = footer_problems(app, size, ("o", "m", "x", "e"))
    browser = app.query_one(SessionBrowser)
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
    problems = footer_problems(app, size, ("e", "end"))
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
    if size[0] >= 140 and not any(re.search(r"\bA ms\s+B ms\b", ln) for ln in lines):
        problems.append("column B ms not on screen")
    return problems


async def reach_compare(pilot, roots) -> None:
    await reach_run(pilot, roots)
    pilot.app.compare_sessions(roots[1] / R1, roots[1] / R2)
    await settle(pilot)


def check_compare(app, size) -> list[str]:
    body = app.screen.query_one(".modal-body").region
    lines = [ln[body.x : body.right] for ln in screen_lines(app)[body.y : body.bottom]]
    problems = [f"a cell is cut: {ln.strip()!r}" for ln in lines if "…" in ln]
    markdown = app.backend.compare(app.backend.sessions_root / R1, app.backend.sessions_root / R2)
    table = [ln for ln in markdown.split("\n") if ln.startswith("| ")][1:]
    assert len(table) == 18
    for line in table[:4]:  # the first rows' id, shift and interval, whole
        cells = [c.strip() for c in line.strip("| ").split(" | ")][:3]
        if not any(all(c in ln for c in cells) for ln in lines):
            problems.append(f"row {cells} not whole on screen")
    return problems


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


def test_compare_keeps_the_comparison_names_while_it_scrolls_sideways(views):
    add_committed(views)
    app, _ = make_app(views)

    async def drive() -> list[str]:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            app.compare_sessions(views[1] / R1, views[1] / R2)
            await settle(pilot)
            await pilot.press("tab")
            for _ in range(12):  # to the last column
                await pilot.press("right")
            await pilot.pause()
            body = app.screen.query_one(".modal-body").region
            return [ln[body.x : body.right] for ln in screen_lines(app)[body.y : body.bottom]]

    lines = asyncio.run(drive())
    assert any("w13/hot " in ln for ln in lines), "\n".join(lines)
