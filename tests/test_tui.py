"""The TUI, driven end to end with App.run_test() + Pilot against a backend replaying a session.

CPU only. The replay double (tests/tui_backend_double.py) uses the real session writer, loader
and statistics; only probing, builds, runs and NVML are replayed.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

pytest.importorskip("textual")

from textual.events import Paste  # noqa: E402
from textual.widgets import Checkbox, Input, Sparkline, Static, TabbedContent  # noqa: E402
from tui_backend_double import (  # noqa: E402
    SYNTHETIC_NAME,
    ReplayBackend,
    write_synthetic_session,
)

from workbench.errors import BadArgument, NoGPUError, SessionError  # noqa: E402
from workbench.session import load_session  # noqa: E402
from workbench.tui.analysis import view_from_session  # noqa: E402
from workbench.tui.app import WorkbenchApp
from workbench.tui.backend import ProgressEvent, RunConfig  # noqa: E402
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
from workbench.tui.screens.compare import CompareScreen  # noqa: E402
from workbench.tui.screens.help import HelpScreen  # noqa: E402
from workbench.tui.screens.log import CompilerLogScreen  # noqa: E402
from workbench.tui.widgets.nvml_panel import NvmlPanel, short_reason  # noqa: E402
from workbench.tui.widgets.ratio_chart import RatioChart  # noqa: E402
from workbench.tui.widgets.results_view import ResultsView  # noqa: E402
from workbench.tui.widgets.run_progress import RunProgress  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402
from workbench.tui.widgets.variant_matrix import VariantMatrix  # noqa: E402

SIZE = (160, 48)


def drive(test):
    """Run an async test body in a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(source session, sessions root, plots root); the source lives in the sessions root."""
    sessions = tmp_path / "sessions"
    source = write_synthetic_session(sessions)
    return source, sessions, tmp_path / "plots"


def make_app(roots, **kwargs) -> tuple[WorkbenchApp, ReplayBackend]:
    source, sessions, plots = roots
    backend = ReplayBackend(source, sessions, plots, **kwargs)
    return WorkbenchApp(backend, monitor_interval=None), backend


async def settle(pilot, rounds: int = 4) -> None:
    """Let workers finish and their messages (which may start more workers) be handled."""
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def shown(widget: Static) -> str:
    """The plain text a Static shows (strings, rich Text and rich renderables alike)."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


def status_text(app: WorkbenchApp) -> str:
    return shown(app.query_one("#status", Static))


def session_dirs(sessions: Path) -> list[Path]:
    return sorted(p for p in sessions.iterdir() if p.name != SYNTHETIC_NAME)


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
        assert [(r.cmp_id, r.n, r.verdict) for r in view.rows] == [
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
        panel_text = shown(app.query_one("#recommendation", Static))
        assert "b3-coop" in panel_text and "Rule:" in panel_text


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
        assert (live.label, live.verdict, live.note, live.m) == ("w13/hot", "", "3/12 pairs", 0.01)
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
        assert view.rows[0].n == 3 and view.rows[0].verdict == "AMBIGUOUS"
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
    _, sessions, _ = roots
    app, backend = make_app(roots, hold_at=2)
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


# -------------------------------------------------------------------------------- sessions


@drive
async def test_open_export_and_compare_sessions(roots):
    source, sessions, plots = roots
    app, backend = make_app(roots)
    # The export waits for this gate, so "still running while the UI answers" does not depend on
    # how fast matplotlib is on the machine (a fast one finished before the check).
    gate = threading.Event()
    real_export = backend.export

    def gated_export(path):
        gate.wait(timeout=60)
        return real_export(path)

    backend.export = gated_export
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # a second session to compare with
        await settle(pilot)
        await pilot.press("3")
        browser = app.query_one(SessionBrowser)
        browser.focus()
        await pilot.pause()
        names = [i.name for i in browser.infos.values()]
        assert names[-1] == SYNTHETIC_NAME and len(names) == 2
        await pilot.press("down", "enter")  # open the synthetic one
        await settle(pilot)
        view = app.query_one(ResultsView).view
        assert view.info.path == source
        assert {r.kernel: r.choice for r in view.recommendations if r.kernel != "step"} == {
            "w13": "b3-coop",
            "w2": "b3-scalar",
        }
        await pilot.press("e")
        # the export (matplotlib, seconds) runs in a worker: the UI keeps answering meanwhile
        await pilot.press("1")
        assert app.query_one(TabbedContent).active == "run"
        assert any(w.group == "export" and not w.is_finished for w in app.workers)
        gate.set()
        await settle(pilot)
        report = plots / f"{SYNTHETIC_NAME}_report.md"
        text = report.read_text()
        assert "w2/rotating" in text and "**SLOWER**" in text
        pngs = sorted(plots.glob(f"{SYNTHETIC_NAME}_*.png"))
        assert len(pngs) >= 4 and all(p.stat().st_size > 10_000 for p in pngs)
        assert f"Exported {2 * len(pngs)} plots" in status_text(app)
        await pilot.press("3")
        browser.focus()
        await pilot.press("m", "up", "x")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert "w13/hot" in app.screen.markdown and "shift" in app.screen.markdown
        await pilot.press("escape")


@drive
async def test_corrupt_session_shows_an_error_not_a_crash(roots):
    source, sessions, _ = roots
    bad = sessions / "20261129T130000Z_truncated"
    bad.mkdir()
    (bad / "session.json").write_text('{"schema": "workbench.session/1", "status": "comp')
    (bad / "journal.jsonl").write_text("")
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.query_one(SessionBrowser)
        infos = {i.name: i for i in browser.infos.values()}
        assert infos[bad.name].status == "unreadable"
        assert "truncated or not JSON" in infos[bad.name].error
        await pilot.press("3")
        browser.focus()
        row = list(browser.infos).index(str(bad))
        browser.move_cursor(row=row)
        await pilot.press("enter")
        await settle(pilot)
        assert app.is_running
        assert "Cannot open" in status_text(app) and "truncated" in status_text(app)
        assert app.query_one(ResultsView).view is None
        # the app still works: the good session opens
        browser.move_cursor(row=list(browser.infos).index(str(source)))
        await pilot.press("enter")
        await settle(pilot)
        assert app.query_one(ResultsView).view.info.path == source


# ------------------------------------------------------------------- browse mode and NVML


@drive
async def test_without_gpu_opens_in_browse_mode(roots):
    _, sessions, _ = roots
    app, backend = make_app(roots, gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        banner = shown(app.query_one("#mode-banner", Static))
        assert "Browse mode" in banner and "no CUDA device" in banner and "builds (b)" in banner
        assert app.query_one(TabbedContent).active == "sessions"
        assert app.query_one("#run-button").disabled
        # r says why it cannot run instead of doing nothing
        await pilot.press("r")
        await settle(pilot)
        assert app.busy == "" and session_dirs(sessions) == []
        assert "Cannot run in browse mode: no CUDA device" in status_text(app)
        # b builds: compiling and the ptxas report need no GPU
        await pilot.press("b")
        await settle(pilot)
        assert len(backend.built) == 6 and "Build finished" in status_text(app)
        rows = app.query_one(VariantMatrix).rows_by_name.values()
        assert {r.state for r in rows} == {"built"}
        await pilot.press("o")  # browsing still works
        await settle(pilot)
        assert app.query_one(ResultsView).view.info.name == SYNTHETIC_NAME


@drive
async def test_without_a_compiler_b_says_why_it_cannot_build(roots):
    app, backend = make_app(roots, gpu=False, compiler=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "builds: no CUDA toolkit found" in shown(app.query_one("#mode-banner", Static))
        await pilot.press("b")
        await settle(pilot)
        assert app.busy == "" and backend.built == []
        assert "Cannot build: no CUDA toolkit found" in status_text(app)


@drive
async def test_nvml_unavailable_is_one_short_line(roots):
    app, _ = make_app(roots, nvml=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.query_one(NvmlPanel)
        assert panel.available is False
        line = panel.query_one("#nvml-line", Static)
        assert shown(line).strip() == "NVML unavailable: library not found"
        assert "NVMLError_LibraryNotFound" in str(line.tooltip)  # the full reason, on hover
        assert not panel.query_one("#nvml-live").display
        # one line across the bottom of the body, not a fifth of the width
        assert (panel.region.width, panel.region.height) == (SIZE[0], 1)
        assert app.query_one(TabbedContent).region.width == SIZE[0]


@pytest.mark.parametrize(
    "reason, short",
    [
        (
            "NVML unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found",
            "library not found",
        ),
        ("NVML unavailable: NVMLError_DriverNotLoaded: Driver Not Loaded", "driver not loaded"),
        ("NVML unavailable: NVMLError_NoPermission", "no permission"),
        (
            "NVML unavailable: pynvml (nvidia-ml-py) is not importable (No module named 'pynvml')",
            "pynvml (nvidia-ml-py) is not importable",
        ),
        ("workbench.monitor unavailable: ImportError: boom", "workbench.monitor unavailable"),
        ("NVML unavailable: monitor stopped", "monitor stopped"),
    ],
)
def test_nvml_reasons_are_shortened_for_one_line(reason, short):
    assert short_reason(reason) == short


@drive
async def test_narrow_terminal_folds_the_gpu_panel_and_keeps_the_matrix_whole(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.refresh_monitor()
        await settle(pilot)
        panel = app.query_one(NvmlPanel)
        assert (panel.region.width, panel.region.height) == (80, 1)
        line = shown(panel.query_one("#nvml-line", Static))
        assert "NVIDIA H200 (replay)" in line and "GiB" in line and "MHz" in line
        matrix = app.query_one(VariantMatrix)
        # every column of the matrix is in view: nothing cut ("ke/w1" in issue 15)
        assert matrix.virtual_size.width <= matrix.region.width
        assert matrix.region.height == 7  # header and six variants


@drive
async def test_nvml_panel_follows_readings(roots):
    source = roots[0]
    readings = load_session(source).nvml
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for _ in range(4):
            app.refresh_monitor()
            await settle(pilot, 2)
        panel = app.query_one(NvmlPanel)
        assert list(panel.query_one("#spark-sm-mhz", Sparkline).data) == [
            float(r["sm_mhz"]) for r in readings[:5]
        ]
        last = readings[4]
        clocks = shown(panel.query_one("#nvml-clocks", Static))
        assert f"SM {last['sm_mhz']} MHz" in clocks and f"{last['temp_c']} °C" in clocks


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
    for text in ("Results", "FASTER", "SLOWER", "b3-coop", "Rule:"):
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


# ------------------------------------------------------------------ engine adapter on CPU


def test_engine_backend_on_a_cpu_machine(roots):
    source, sessions, plots = roots
    bad = sessions / "20261129T130000Z_foreign"
    bad.mkdir()
    (bad / "session.json").write_text('{"not": "a session"}')
    backend = EngineBackend(sessions, plots)
    status = backend.gpu_status()
    assert status.available is False and status.reason
    assert EngineBackend(sessions, plots, browse_only=True).gpu_status().reason == (
        "started with --browse"
    )
    if backend.monitor_reading() is None:  # no NVML on CI machines: said, not raised
        assert backend.monitor_note().startswith("NVML unavailable")
    listed = {i.name: i for i in backend.sessions()}
    assert listed[SYNTHETIC_NAME].status == "complete"
    assert listed[SYNTHETIC_NAME].gpu == "NVIDIA H200 (synthetic)"
    assert listed[bad.name].status == "unreadable" and "foreign" in listed[bad.name].error
    with pytest.raises(SessionError, match="foreign"):
        backend.open_session(bad)
    # the form's configuration is accepted by the runner, which then says there is no GPU
    with pytest.raises(NoGPUError, match="no usable GPU"):
        backend.run(RunConfig(pairs=6), lambda e: None, lambda: False)


def test_engine_backend_build_status_needs_nvcc_and_cuda_torch_not_a_gpu(roots, monkeypatch):
    torch = pytest.importorskip("torch")
    from workbench import build

    _, sessions, plots = roots
    backend = EngineBackend(sessions, plots, browse_only=True)  # browsing still builds
    monkeypatch.setattr(build, "cuda_home", lambda: "/opt/cuda-test")
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    status = backend.build_status()
    assert status.available and "nvcc in /opt/cuda-test" in status.reason
    monkeypatch.setattr(build, "cuda_home", lambda: None)
    status = backend.build_status()
    assert not status.available and "no CUDA toolkit found" in status.reason
    monkeypatch.setattr(torch.version, "cuda", None)
    status = backend.build_status()
    assert not status.available and "is not a CUDA build" in status.reason


def test_analysis_recomputes_verdicts_from_the_journal(roots):
    source = roots[0]
    view = view_from_session(load_session(source))
    rows = {r.cmp_id: r for r in view.rows}
    assert {k: r.verdict for k, r in rows.items()} == {
        "w13/hot": "FASTER",
        "w13/rotating": "FASTER",
        "w2/hot": "SLOWER",
        "w2/rotating": "SLOWER",
        "step/rotating": "FASTER",
    }
    # true effects written into the synthetic journal: 0.93, 0.92, 1.11, 1.12, 0.96
    for cmp_id, ratio in (("w13/hot", 0.93), ("w2/rotating", 1.12), ("step/rotating", 0.96)):
        assert rows[cmp_id].ci_lo < ratio * 1.01 and rows[cmp_id].ci_hi > ratio * 0.99
        assert abs(rows[cmp_id].b_ms / rows[cmp_id].a_ms - ratio) < 0.01
    assert abs(rows["w13/hot"].a_ms - 0.0912 * 1.002) < 0.001
    assert rows["w13/hot"].a_us_per_call == pytest.approx(rows["w13/hot"].a_ms * 1000 / 48)
    assert rows["w13/hot"].k == 12 and rows["w2/hot"].k == 0
    recs = {r.kernel: r for r in view.recommendations}
    assert recs["w13"].choice == "b3-coop" and recs["w2"].choice == "b3-scalar"
    assert len(recs["w13"].evidence) == 2 and recs["w13"].evidence[0].startswith("hot: FASTER")
    assert "SLOWER in none" in view.rule


COMMITTED = [
    pytest.param(p, id=p.parent.name)
    for p in sorted((Path(__file__).parent.parent / "sessions").glob("*/session.json"))
] or [pytest.param(None, marks=pytest.mark.skip(reason="no session committed under sessions/"))]


@pytest.mark.parametrize("meta", COMMITTED)
def test_replaying_a_committed_session_reproduces_its_results(meta, tmp_path):
    """Real sessions under sessions/ replayed through the app's run path give their own verdicts."""
    source = meta.parent
    original = view_from_session(load_session(source))
    pairs = max((s["pair"] for s in load_session(source).samples), default=0) + 1
    backend = ReplayBackend(source, tmp_path / "sessions", tmp_path / "plots")
    config = RunConfig(kernels=("w13", "w2", "step"), pairs=max(pairs, 2), blocks=1)
    events = []
    path = backend.run(config, events.append, lambda: False)
    replayed = backend.open_session(path)
    key = [(r.cmp_id, r.n, r.verdict, r.ratio, r.ci_lo, r.ci_hi) for r in original.rows]
    assert [(r.cmp_id, r.n, r.verdict, r.ratio, r.ci_lo, r.ci_hi) for r in replayed.rows] == key
    assert [r.choice for r in replayed.recommendations] == [
        r.choice for r in original.recommendations
    ]
    assert events and events[-1].step == events[-1].steps


# ------------------------------------------------------------------------------ snapshots


async def _ready(pilot) -> None:
    await settle(pilot)
    for _ in range(5):  # a fixed number of NVML readings for the sparklines
        pilot.app.refresh_monitor()
        await settle(pilot, 2)


# Every screen at the smallest supported size and at a roomy one (issue 15: at 80x24 the
# variant matrix was cut to "ke/w1").
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_main_screen(roots, snap_compare, size):
    app, _ = make_app(roots)
    assert snap_compare(app, terminal_size=size, run_before=_ready)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_live_run_chart(roots, snap_compare, size):
    """Mid-run: w13/hot done (12 pairs), w13/rotating at 6 pairs, charted as they stand."""
    app, backend = make_app(roots, hold_at=18)

    async def mid_run(pilot):
        await _ready(pilot)
        await pilot.press("r")
        assert await asyncio.to_thread(backend.held.wait, 10)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=mid_run)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_results_screen(roots, snap_compare, size):
    """The opened session: its ratio chart (verdict colours, ±1 % band), table, recommendation."""
    source = roots[0]
    app, _ = make_app(roots)

    async def open_it(pilot):
        await _ready(pilot)
        app.open_session(source)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=open_it)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_browse_mode_without_nvml(roots, snap_compare, size):
    app, _ = make_app(roots, gpu=False, nvml=False)
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_snapshot_help_screen(roots, snap_compare):
    app, _ = make_app(roots)
    assert snap_compare(app, terminal_size=SIZE, press=["f1"], run_before=settle)
