"""The TUI's `h` key: the highlighted session's hardware counters (`ab --counters`), A beside B,
in a modal; a session without them says how to record them. CPU only, replay backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("textual")

from tui_backend_double import SIZE, drive, make_app, settle  # noqa: E402

from workbench.store import counters  # noqa: E402
from workbench.tui.screens.counters import CountersScreen  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

RECORDED = (
    Path(__file__).resolve().parent.parent
    / "benchmarks/results/h200_counters/counters_default_f46892d.json"
)


@drive
async def test_h_shows_the_counters_of_the_highlighted_session(roots):
    source, _, _ = roots
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        app.query_one(SessionBrowser).focus()
        await pilot.pause()
        await pilot.press("h")  # no counters yet: a notice, no screen
        await pilot.pause()
        assert not isinstance(app.screen, CountersScreen)
        assert any("ab --counters" in n.message for n in app._notifications)
        shutil.copy(RECORDED, source / counters.FILE)
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, CountersScreen)
        md = app.screen.markdown
        assert "**w13/rotating: A b3-scalar, B b3-coop" in md
        assert "| duration (us) | 6.24 | 5.98 | 0.959 |" in md
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CountersScreen)
