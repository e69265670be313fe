"""The TUI, driven end to end with App.run_test() + Pilot against a backend replaying a session:
the app shell (opening, builds, runs and the run form, help and palette, the CLI entry, Ctrl-C and
SIGINT, shutdown). The snapshots of every view are in tests/test_tui_views.py.

CPU only. The replay double (tests/tui_backend_double.py) uses the real session writer, loader
and statistics; only probing, builds, runs and NVML are replayed. The sessions' tests are in
tests/test_tui_sessions.py; browse mode and the NVML panel in tests/test_tui_browse_nvml.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from textual.events import Paste  # noqa: E402
from textual.widgets import Checkbox, Input, Static, TabbedContent  # noqa: E402
from tui_backend_double import (  # noqa: E402
    SIZE,
    SYNTHETIC_NAME,
    drive,
    make_app,
    session_dirs,
    settle,
    shown,
    status_text,
)

from workbench.core.errors import BadArgument, NoGPUError  # noqa: E402
from workbench.store.session import load_session  # noqa: E402
from workbench.tui.app import WorkbenchApp
from workbench.tui.backend import ProgressEvent  # noqa: E402
from workbench.tui.commands import WorkbenchCommands  # noqa: E402
from workbench.tui.engine import EngineBackend  # noqa: E402
from workbench.tui.messages import (  # noqa: E402
    BuildEnded,
    BuildProgressed,
    GpuProbed,
    MonitorRead,
    RunEnded,
    RunProgressed,
    SessionOpened,
    SessionsListed,
    WorkFailed,
)
from workbench.tui.screens.help import HelpScreen  # noqa: E402
from workbench.tui.screens.log import CompilerLogScreen  # noqa: E402
from workbench.tui.widgets.ratio_chart import RatioChart  # noqa: E402
from workbench.tui.widgets.results_view import ResultsView  # noqa: E402
from workbench.tui.widgets.run_progress import RunProgress  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402
from workbench.tui.widgets.variant_matrix import VariantMatrix  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

# ---------------------------------------------------------------------------------- opening


@drive
async def test_opens_with_gpu_variants_and_sessions(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "NVIDIA H200 (replay)" in shown(app.query_one("#mode-banner", Static))
        matrix = app.query_one(VariantMatrix)
        assert matrix.row_count == 6
        assert set(matrix.rows_by_name) == {
            f"{k}:{a}" for k in ("w13", "w2") for a in ("b4-scalar", "b3-scalar", "b3-coop")
        }
        browser = app.query_one(SessionBrowser)
        assert [i.name for i in browser.infos.values()] == [SYNTHETIC_NAME]
        assert app.check_action("run", ()) is True
        assert app.check_action("cancel", ()) is False  # nothing to cancel: hidden


@drive
async def test_build_fills_matrix_and_shows_compiler_log(roots):
    app, backend = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        matrix = app.query_one(VariantMatrix)
        assert len(backend.built) == 6
        assert {r.state for r in matrix.rows_by_name.values()} == {"built"}
        coop = matrix.rows_by_name["w2:b3-coop"]
        assert (coop.registers, coop.spills) == (70, 8)
        assert str(matrix.get_cell("w2:b3-coop", "regs")) == "70"
        assert "Build finished" in status_text(app)
        matrix.focus()
        await pilot.press("down", "down", "l")
        await pilot.pause()
        assert isinstance(app.screen, CompilerLogScreen)
        assert app.screen.variant == "w13:b3-coop"
        assert "Used 80 registers" in app.screen.log_text
        await pilot.press("escape")
        assert not isinstance(app.screen, CompilerLogScreen)


@drive
async def test_cancel_a_build_between_variants(roots):
    app, backend = make_app(roots, hold_at=2)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("b")
        assert await asyncio.to_thread(backend.held.wait, 10)
        await pilot.pause()
        assert app.busy == "build" and app.check_action("build", ()) is None
        await pilot.press("escape")
        await settle(pilot)
        assert app.busy == ""
        assert "Build cancelled" in status_text(app)
        states = [r.state for r in app.query_one(VariantMatrix).rows_by_name.values()]
        assert states == ["built", "built"] + ["not built"] * 4


# ------------------------------------------------------------------------------------ runs


@drive
async def test_configure_run_and_see_results_and_recommendation(roots):
    _, sessions, _ = roots
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # configure: 1 block of 8 pairs, W13 only, both sets
        await pilot.click("#blocks")
        await pilot.press("end", "backspace", "backspace", "1")
        await pilot.click("#pairs")
        await pilot.press("end", "backspace", "backspace", "8")
        await pilot.click("#kernel-w2")
        assert app.query_one("#kernel-w2", Checkbox).value is False
        await pilot.press("r")
        await settle(pilot)
        progress = app.query_one(RunProgress)
        assert progress.state == "complete"
        assert {e.cmp_id: e.pair for e in progress.latest.values()} == {
            "w13/hot": 8,
            "w13/rotating": 8,
        }
        # the session saved by the run holds what the form asked for
        (saved,) = session_dirs(sessions)
        meta = json.loads((saved / "session.json").read_text())
        assert meta["status"] == "complete"
        assert meta["config"]["pairs"] == 8 and meta["config"]["kernels"] == ["w13"]
        assert len(load_session(saved).samples) == 2 * 8 * 4
        # results view: the new session, one row per comparison, and the recommendation
        assert app.query_one(TabbedContent).active == "results", status_text(app)
        view = app.query_one(ResultsView).view
        assert view.info.path == saved
        assert [(r.id, r.verdict.n, r.verdict_words) for r in view.rows] == [
            ("w13/hot", 8, "FASTER"),
            ("w13/rotating", 8, "FASTER"),
        ]
        (rec,) = view.recommendations
        assert (rec.kernel, rec.choice) == ("w13", "b3-coop")
        assert "FASTER" in rec.reason and "SLOWER nowhere" in rec.reason
        # both charts now show the verdicts, as the table does
        for chart_id in ("#progress-chart", "#results-chart"):
            points = app.query_one(chart_id, RatioChart).points
            assert [(p.label, p.verdict) for p in points] == [
                ("w13/hot", "FASTER"),
                ("w13/rotating", "FASTER"),
            ]
            assert all(p.ci_high < 1 - p.m for p in points)
        table = app.query_one("#results-table")
        assert table.row_count == 2
        assert str(table.get_row_at(0)[1]) == "FASTER"
        # the choice above the table, its evidence and the rule at the end of the results
        assert "W13   → b3-coop" in shown(app.query_one("#recommendation", Static))
        evidence = shown(app.query_one("#evidence", Static))
        assert "b3-coop" in evidence and "Rule:" in evidence and "hot: FASTER" in evidence


@drive
async def test_cancel_mid_run_keeps_an_interrupted_session(roots):
    _, sessions, _ = roots
    app, backend = make_app(roots, hold_at=3)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        assert await asyncio.to_thread(backend.held.wait, 10)
        await pilot.pause()
        assert app.busy == "run"
        # the live chart follows the progress events: no verdict yet, the run's m as the band
        (live,) = app.query_one("#progress-chart", RatioChart).points
        assert (live.label, live.verdict, live.note, live.m) == ("w13/hot", "", "3/4 pairs", 0.01)
        assert 0.9 < live.median < 0.96
        assert app.check_action("cancel", ()) is True
        assert app.check_action("run", ()) is None  # shown, disabled while a run is going
        await pilot.press("escape")
        await settle(pilot)
        assert app.busy == ""
        assert app.query_one(RunProgress).state == "interrupted"
        (saved,) = session_dirs(sessions)
        s = load_session(saved)
        assert s.status == "interrupted"
        assert len(s.samples) == 3 * 4  # the three pairs measured before the cancel, no more
        view = app.query_one(ResultsView).view
        assert view.info.status == "interrupted"
        assert view.rows[0].verdict.n == 3 and view.rows[0].verdict_words == "AMBIGUOUS"
        assert any(n.startswith("interrupted") for n in view.notes)
        statuses = {i.name: i.status for i in app.query_one(SessionBrowser).infos.values()}
        assert statuses[saved.name] == "interrupted"


@drive
async def test_quit_during_a_run_closes_its_session_first(roots):
    _, sessions, _ = roots
    app, backend = make_app(roots, hold_at=2)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        assert await asyncio.to_thread(backend.held.wait, 10)
        await pilot.press("q")
        await settle(pilot)
        assert not app.is_running
    assert app.return_code == 0  # q is a plain quit, not an interrupt
    (saved,) = session_dirs(sessions)
    s = load_session(saved)
    assert s.meta["status"] == "interrupted" and len(s.samples) == 2 * 4


@drive
async def test_ctrl_c_during_a_run_closes_its_session_and_exits_130(roots):
    """The run takes half a second to close its session once cancelled: the app must wait for
    it (a worker reads as complete only once its thread has returned), then exit."""
    _, sessions, _ = roots
    app, backend = make_app(roots, hold_at=2, closing_s=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.query_one("#pairs", Input).focus()
        await pilot.press("ctrl+c")  # in a field, ctrl+c copies: the app goes on
        assert app.is_running and not app.interrupted
        await pilot.press("escape", "r")
        assert await asyncio.to_thread(backend.held.wait, 10)
        await pilot.press("ctrl+c")
        await settle(pilot)
        assert not app.is_running
    assert app.return_code == 130
    (saved,) = session_dirs(sessions)
    s = load_session(saved)
    assert s.meta["status"] == "interrupted" and len(s.samples) == 2 * 4


@drive
async def test_bad_form_input_names_the_field_and_starts_nothing(roots):
    _, sessions, _ = roots
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.click("#hidden")
        await pilot.press("1", "0", "0", "0")
        await pilot.click("#run-button")
        await settle(pilot)
        assert app.busy == ""
        assert "hidden=1000" in status_text(app)
        assert "hidden=1000" in shown(app.query_one("#form-error", Static))
        assert session_dirs(sessions) == []


@drive
async def test_keys_typed_into_a_numeric_field_stay_digits_and_escape_leaves_the_form(roots):
    """Issue 15: after Tab into `hidden`, the app's keys 2 3 o m x e q were typed into it
    ("23o3mx3", accepted) and Escape did not leave the field."""
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        hidden = app.query_one("#hidden", Input)
        for _ in range(20):  # Tab through the app until the field has the focus
            if app.focused is hidden:
                break
            await pilot.press("tab")
        assert app.focused is hidden
        await pilot.press("2", "3", "o", "3", "m", "x", "e", "q", "3")
        await settle(pilot)
        assert hidden.value == "2333"  # letters refused; q, x, e did not act
        assert app.is_running and app.query_one(TabbedContent).active == "run"
        # the value is checked as it is typed: 2333 is no multiple of the group size
        assert "hidden=2333" in shown(app.query_one("#form-error", Static))
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is app.query_one(VariantMatrix)
        await pilot.press("2")  # the app's keys work again and no longer reach the field
        assert app.query_one(TabbedContent).active == "results"
        await pilot.press("1")
        assert app.query_one(TabbedContent).active == "run" and hidden.value == "2333"


@drive
async def test_bad_numeric_values_show_a_validation_error_and_block_the_run(roots):
    _, sessions, _ = roots
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        hidden, pairs = app.query_one("#hidden", Input), app.query_one("#pairs", Input)
        hidden.focus()
        hidden.post_message(Paste("23o3mx3"))  # a paste that is not an integer is refused
        await pilot.pause()
        assert hidden.value == ""
        hidden.value = "23o3mx3"  # set behind the form's back: still caught, named
        await pilot.pause()
        assert not hidden.is_valid and hidden.has_class("-invalid")
        assert "hidden='23o3mx3' must be an integer" in shown(app.query_one("#form-error", Static))
        hidden.value = ""  # blank: the preset's value, valid
        pairs.value = "0"
        await pilot.pause()
        assert hidden.is_valid and not pairs.is_valid
        error = shown(app.query_one("#form-error", Static))
        assert "pairs='0' must be an integer >= 1" in error
        await pilot.press("escape", "r")
        await settle(pilot)
        assert app.busy == "" and session_dirs(sessions) == []
        assert "pairs='0'" in status_text(app)
        pairs.value = "4"
        await pilot.pause()
        assert shown(app.query_one("#form-error", Static)).strip() == ""
        await pilot.press("r")
        await settle(pilot)
        assert len(session_dirs(sessions)) == 1


@drive
async def test_checkpoint_field_gives_the_shape_and_names_what_clashes(roots, tmp_path):
    """The form's checkpoint folder (docs/DESIGN.md §3.8): its config.json gives the shape, shape
    fields beside it and bad folders are named under the form, and a run starts with it."""
    import ckpt_fixture
    from textual.widgets import Select

    from workbench.tui.widgets.run_form import RunForm

    _, sessions, _ = roots
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", group=64)
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        form, error = app.query_one(RunForm), app.query_one("#form-error", Static)
        app.query_one("#tp", Select).value = 2
        app.query_one("#checkpoint", Input).value = str(tmp_path / "absent")
        await pilot.pause()
        assert "does not exist" in shown(error)
        app.query_one("#checkpoint", Input).value = str(folder)
        app.query_one("#hidden", Input).value = "64"
        await pilot.pause()
        assert "hidden=64 cannot be combined with a checkpoint" in shown(error)
        app.query_one("#hidden", Input).value = ""
        app.query_one("#rank", Input).value = "1"
        await pilot.pause()
        assert shown(error).strip() == ""
        config = form.config()
        assert (config.checkpoint, config.rank, config.shape().name) == (
            str(folder),
            1,
            "checkpoint:c",
        )
        await pilot.press("escape", "r")
        await settle(pilot)
        (saved,) = session_dirs(sessions)
        # the run got the folder and the rank (the test double records the form's config)
        recorded = load_session(saved).config
        assert (recorded["checkpoint"], recorded["rank"]) == (str(folder), 1)


# ----------------------------------------------------------------- help, palette, command


@drive
async def test_help_screen_and_command_palette(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        provider = WorkbenchCommands(app.screen)
        hits = [h.text async for h in provider.search("export")]
        assert hits == ["Export plots and report"]
        found = [h.text async for h in provider.discover()]
        assert "Run A/B" in found and "Cancel" not in found  # nothing to cancel now
        await pilot.press("ctrl+p")
        await pilot.press(*"go to sessions")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert app.query_one(TabbedContent).active == "sessions"


def test_workbench_without_arguments_opens_the_tui(monkeypatch, tmp_path):
    from workbench import cli

    opened = []

    def fake_run(self):
        opened.append(self)

    monkeypatch.setattr(WorkbenchApp, "run", fake_run)
    assert cli.main([]) == 0
    (app,) = opened
    assert isinstance(app.backend, EngineBackend)
    assert app.backend.sessions_root == Path("sessions")
    assert cli.main(["tui", "--sessions", str(tmp_path), "--browse"]) == 0
    assert opened[1].backend.sessions_root == tmp_path and opened[1].backend.browse_only
    assert cli.main(["tui", "--nvml-interval", "0"]) == 2


def test_headless_run_saves_a_screenshot_of_the_results(roots, tmp_path):
    from workbench.tui.headless import parse_size, screenshot

    app, _ = make_app(roots)
    out = tmp_path / "shots" / "finished.svg"
    assert screenshot(app, out, run=True, size=parse_size("160x48")) == 0
    svg = out.read_text()
    assert svg.lstrip().startswith("<svg")
    # the default run's 4 pairs decide nothing: the recommendation says so, above the table
    for text in ("Results", "Recommendation", "inconclusive (b3-scalar stays)", "w2/rotating"):
        assert text in svg.replace("&#160;", " "), text
    with pytest.raises(BadArgument, match="--size '10x10'"):
        parse_size("10x10")
    browse, _ = make_app(roots, gpu=False)
    with pytest.raises(NoGPUError, match="runs are disabled: no CUDA device"):
        screenshot(browse, tmp_path / "no.svg", run=True, size=(160, 48))


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_a_headless_run_exits_130_and_keeps_the_samples(tmp_path, presses):
    """Ctrl-C in `workbench tui --screenshot --run` used to end in a traceback (NoMatches
    'NvmlPanel', WorkerCancelled): the app was torn down under its workers' messages. One
    Ctrl-C waits for the session to close and saves the screenshot; a second quits at once."""
    repo = Path(__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tests")])}
    # a cancelled run takes 1.5 s to close here, so that a second Ctrl-C comes while it does
    proc = subprocess.Popen(
        [sys.executable, str(repo / "tests" / "tui_backend_double.py"), str(tmp_path), "3", "1.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "held"  # the run waits after 3 pairs
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)  # two signals sent at once may arrive as one
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Error" not in err, err
    (saved,) = session_dirs(tmp_path / "sessions")
    s = load_session(saved)  # closed by the run itself, even when quitting at once
    assert s.meta["status"] == "interrupted" and len(s.samples) == 3 * 4
    if presses == 1:
        assert f"samples are kept in {saved}" in err
        assert "interrupted" in (tmp_path / "shot.svg").read_text()
    else:
        assert not (tmp_path / "shot.svg").exists()


def test_sigint_to_the_running_app_closes_its_session_and_exits_130(tmp_path):
    """SIGINT from outside (kill -INT; in a terminal Ctrl-C is a key) used to tear the app down
    mid-run; now it interrupts as Ctrl-C does."""
    repo = Path(__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tests")])}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(repo / "tests" / "tui_backend_double.py"),
            str(tmp_path),
            "3",
            "--app",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Error" not in err, err
    (saved,) = session_dirs(tmp_path / "sessions")
    s = load_session(saved)
    assert s.meta["status"] == "interrupted" and len(s.samples) == 3 * 4


def test_quit_while_the_sessions_still_load_exits_at_once(roots):
    """q while the listing still runs (the first listing of a large folder takes seconds):
    the app restored the terminal, then left it blank until the listing ended (issue 33)."""
    import threading

    from tui_backend_double import ReplayBackend

    release = threading.Event()

    class SlowListing(ReplayBackend):
        def sessions(self):
            release.wait(60)
            return super().sessions()

    app = WorkbenchApp(SlowListing(*roots), monitor_interval=None)

    async def quit_early(pilot) -> None:
        while app.gpu is None:  # probed; the listing is still waiting
            await pilot.pause(0.05)
        await pilot.press("q")

    start = time.monotonic()
    app.run(headless=True, auto_pilot=quit_early)
    took = time.monotonic() - start
    release.set()
    assert app.return_code == 0 and took < 30, took  # the listing alone takes 60 s


@drive
async def test_worker_messages_arriving_after_shutdown_are_dropped(roots):
    source = roots[0]
    app, backend = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.backend.open_session(source)
    # The app has shut down and its widgets are gone, as when a worker posts during shutdown:
    # every handler of a worker message must let it go instead of querying a missing widget.
    event = ProgressEvent("w13/hot", 1, 4, 2, 12, 8, 0.93, (0.92, 0.94))
    for handler, message in (
        (app.on_monitor_read, MonitorRead(backend.monitor_reading(), "")),
        (app.on_monitor_read, MonitorRead(None, "NVML unavailable: test")),
        (app.on_gpu_probed, GpuProbed(backend.gpu_status(), backend.variants())),
        (app.on_build_progressed, BuildProgressed(backend.variants()[0])),
        (app.on_build_ended, BuildEnded(cancelled=True)),
        (app.on_run_progressed, RunProgressed(event)),
        (app.on_run_ended, RunEnded(source, cancelled=True)),
        (app.on_sessions_listed, SessionsListed(backend.sessions())),
        (app.on_session_opened, SessionOpened(view)),
        (app.on_work_failed, WorkFailed("open", "gone")),
    ):
        handler(message)
    assert app.open_path is None  # nothing was applied


@drive
async def test_a_table_painted_before_it_measures_new_rows_is_redrawn_at_their_widths(roots):
    """The browse-mode snapshot at 80x24 failed in the full suite ("synthet", "comple", "NVI",
    the columns after "GPU" in view): textual measures new rows on the table's next idle, and a
    paint before that idle stayed cached at the old widths (workbench/tui/widgets/table.py).
    Here the paint is made to fall in that window, every time."""
    from dataclasses import replace

    from textual.geometry import Region

    app, _ = make_app(roots, gpu=False, nvml=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        browser = app.query_one(SessionBrowser)
        (info,) = browser.infos.values()
        longer = replace(info, name=info.name + "-and-a-longer-slug", path=info.path.with_name("x"))
        browser.show([longer, info])  # the slug column must widen: measured on the next idle
        lines = Region(0, 0, browser.size.width, 3)
        painted = [strip.text for strip in browser.render_lines(lines)]  # a paint before it
        # still at the old widths: the window (were textual to measure in add_row, this and
        # workbench/tui/widgets/table.py could go)
        assert "synthetic-h200-and" not in painted[1]
        await settle(pilot)
        shown_now = [strip.text for strip in browser.render_lines(lines)]
        assert "synthetic-h200-and-a-longer-slug  –" in shown_now[1], shown_now
        assert "synthetic-h200  " in shown_now[2] and "commit" not in shown_now[0], shown_now
