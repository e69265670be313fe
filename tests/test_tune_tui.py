"""The TUI's tune screen (key t): start a tune, follow its events, cancel it; browse mode.

The backend's ``tune`` is replaced by a scripted one that sends the events a real tune sends
(``workbench.tune.tuner``) and records the config it was given; the real engine path is covered
by tests/test_tune.py on the simulated device.
"""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest

pytest.importorskip("textual")

from textual.widgets import Button, Input, RichLog  # noqa: E402
from tui_backend_double import ReplayBackend, write_synthetic_session  # noqa: E402

from workbench.tui.app import WorkbenchApp  # noqa: E402
from workbench.tui.screens.tune import TuneScreen, parse_params  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane


def drive(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))

    return run


def make_app(tmp_path, gpu=True, hold=False):
    sessions = tmp_path / "sessions"
    source = write_synthetic_session(sessions)
    backend = ReplayBackend(source, sessions, tmp_path / "plots", gpu=gpu)
    given: list = []
    released = threading.Event()

    def tune(config, events, cancelled):
        given.append(config)
        events("candidate", {"candidate": "unroll=4,max_warps=16", "status": "screened",
                             "score": 0.91, "gpu": 1, "source": "measured"})  # fmt: skip
        events("candidate", {"candidate": "unroll=6,max_warps=16", "status": "excluded",
                             "gpu": 0, "reason": "numerics: rel L2 0.2"})  # fmt: skip
        if hold:  # a long screen: wait for the cancel, as the real run polls it
            while not cancelled():
                released.wait(0.01)
            return sessions / "interrupted-tune"
        events("phase", "confirm")
        events("confirmed", {"candidate": "unroll=4,max_warps=16", "verdict": "FASTER",
                             "estimate": 0.9})  # fmt: skip
        events("best", {"candidate": "unroll=4,max_warps=16", "why": "confirmed FASTER"})
        return sessions / "tune-session"

    backend.tune = tune
    return WorkbenchApp(backend, monitor_interval=None), given


async def settle(pilot, rounds=6):
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def test_parse_params():
    assert parse_params("unroll=4,5; max_warps=16") == {"unroll": [4, 5], "max_warps": [16]}
    assert parse_params("") == {}
    with pytest.raises(ValueError, match="unroll"):
        parse_params("unroll")
    with pytest.raises(ValueError, match="integers"):
        parse_params("unroll=a")


@drive
async def test_start_a_tune_and_see_its_progress(tmp_path):
    app, given = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        screen.query_one("#tune-params", Input).value = "unroll=4,6; max_warps=16"
        app.screen.query_one("#tune-start", Button).press()
        await settle(pilot)
        assert given == [{"kernel": "w13", "arm": "b3-scalar", "top": 3,
                          "params": {"unroll": [4, 6], "max_warps": [16]}}]  # fmt: skip
        text = "\n".join(screen.lines)
        assert "unroll=4,max_warps=16: screened, score 0.9100 (GPU 1)" in text
        assert "unroll=6,max_warps=16: excluded" in text and "rel L2 0.2" in text
        assert "confirmed FASTER" in text and "best: unroll=4,max_warps=16" in text
        assert "tune-session" in text
        assert screen.query_one("#tune-log", RichLog).lines  # written on screen, not only kept
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen)


@drive
async def test_escape_cancels_a_running_tune_first(tmp_path):
    app, given = make_app(tmp_path, hold=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        screen = app.screen
        app.screen.query_one("#tune-start", Button).press()
        for _ in range(50):
            await pilot.pause(0.02)
            if len(screen.lines) >= 2:
                break
        assert screen.running
        await pilot.press("escape")  # cancels; the screen stays until the run has stopped
        await settle(pilot)
        assert isinstance(app.screen, TuneScreen) and not screen.running
        assert "interrupted" in screen.lines[-1]


@drive
async def test_bad_top_and_browse_mode_start_nothing(tmp_path):
    app, given = make_app(tmp_path, gpu=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        app.screen.query_one("#tune-start", Button).press()
        await settle(pilot)
        assert given == []
        assert "browse mode" in str(app.screen.query_one("#tune-status").render())
    app, given = make_app(tmp_path / "second")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await pilot.pause()
        app.screen.query_one("#tune-top", Input).value = "0"
        app.screen.query_one("#tune-start", Button).press()
        await settle(pilot)
        assert given == []
        assert "top '0'" in str(app.screen.query_one("#tune-status").render())
