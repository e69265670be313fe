"""The workbench app: composes the widgets, owns the workers, turns messages into updates.

All blocking calls go to the `Backend` from thread workers (``@work(thread=True)``) that post
messages back; the event loop only ever updates widgets, so the UI never freezes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Button, Footer, Header, Static, TabbedContent, TabPane
from textual.worker import Worker, get_current_worker

from workbench.core.errors import BadArgument, WorkbenchError
from workbench.tui.backend import Backend, BuildStatus, GpuStatus, RunConfig
from workbench.tui.commands import WorkbenchCommands
from workbench.tui.detached import Abandoned, detached
from workbench.tui.headless import EXIT_INTERRUPTED
from workbench.tui.messages import (
    BuildEnded,
    BuildProgressed,
    Compared,
    Exported,
    GpuProbed,
    MonitorRead,
    RunEnded,
    RunProgressed,
    SessionOpened,
    SessionsListed,
    WorkFailed,
)
from workbench.tui.screens.compare import CompareScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.log import CompilerLogScreen
from workbench.tui.widgets.nvml_panel import NvmlPanel
from workbench.tui.widgets.results_view import ResultsView
from workbench.tui.widgets.run_form import RunForm
from workbench.tui.widgets.run_progress import RunProgress
from workbench.tui.widgets.session_browser import SessionBrowser
from workbench.tui.widgets.variant_matrix import VariantMatrix

M = TypeVar("M")


def while_running(handler: Callable[[WorkbenchApp, M], None]) -> Callable[[WorkbenchApp, M], None]:
    """For handlers of worker messages: a worker may post while the app shuts down (quit,
    Ctrl-C, the end of a headless run), when its widgets are already gone; then there is
    nothing left to show and the message is dropped."""

    @functools.wraps(handler)
    def guarded(self: WorkbenchApp, message: M) -> None:
        if self.is_running:
            handler(self, message)

    return guarded


def _cancelled(stop: threading.Event) -> Callable[[], bool]:
    """The predicate a build or run polls, from its worker's thread: the user cancelled (``stop``)
    or textual cancelled the worker (the app is closing)."""
    worker = get_current_worker()
    return lambda: stop.is_set() or worker.is_cancelled


def describe(error: BaseException) -> str:
    """One line for the user: our errors speak for themselves, others get their type."""
    if isinstance(error, WorkbenchError):
        return str(error)
    return f"{type(error).__name__}: {error}"


class WorkbenchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "workbench"
    SUB_TITLE = "AWQ int4 MoE metadata readers"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    # Every key works on every tab; the footer shows help, quit and cancel, and the keys of
    # the focused table (its BINDINGS name the same app actions): at 80 columns a footer of
    # every key lost Export (issue 33).
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("f1", "help", "Help", show=False),
        Binding("q", "quit", "Quit"),
        Binding("escape", "cancel", "Cancel"),
        Binding("b", "build", "Build", show=False),
        Binding("r", "run", "Run", show=False),
        Binding("l", "compiler_log", "Log", show=False),
        Binding("o", "open_session", "Open", show=False),
        Binding("x", "compare", "Compare", show=False),
        Binding("e", "export", "Export", show=False),
        Binding("h", "counters", "Counters", show=False),
        Binding("s", "rescan", "Rescan", show=False),
        Binding("t", "tune", "Tune", show=False),
        Binding("1", "tab('run')", "Build & run", show=False),
        Binding("2", "tab('results')", "Results", show=False),
        Binding("3", "tab('sessions')", "Sessions", show=False),
        # Ctrl-C stops, as in any terminal program (a focused field keeps it for copying)
        Binding("ctrl+c", "interrupt", "Interrupt", show=False),
    ]

    # Screen classes the stylesheet lays out by: narrow terminals fold the GPU panel into one
    # line, short ones drop the header.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    busy: reactive[str] = reactive("")  # "" | "build" | "run"
    gpu: reactive[GpuStatus | None] = reactive(None)

    def __init__(
        self,
        backend: Backend,
        monitor_interval: float | None = 1.0,
        config: RunConfig | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.monitor_interval = monitor_interval
        self.initial_config = config
        self.open_path: Path | None = None
        self.build_tools: BuildStatus | None = None  # known once the probe is back
        self.run_path: Path | None = None  # the session of the last run
        self.quit_when_idle = False
        self.interrupted = False  # Ctrl-C or SIGINT: the exit code will say so
        self.stop_work = threading.Event()  # set to cancel the build or run in flight

    # ---- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Checking for a GPU…", id="mode-banner")
        with Horizontal(id="body"):
            with TabbedContent(initial="run", id="tabs"):
                with TabPane("Build & run", id="run"), Vertical(id="run-pane"):
                    # the matrix spans the pane: its eight columns need ~70 cells
                    yield VariantMatrix(id="variants")
                    with Horizontal(id="run-lower"):
                        yield RunProgress(id="progress")
                        with VerticalScroll(id="form-scroll"):
                            yield RunForm(self.initial_config, id="form")
                with TabPane("Results", id="results"):
                    yield ResultsView(id="results-view")
                with TabPane("Sessions", id="sessions"):
                    yield SessionBrowser(id="browser")
            yield NvmlPanel(id="nvml")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#variants").focus()  # the footer shows its keys: b, r, l
        self.probe_gpu()
        self.list_sessions()
        self.refresh_monitor()
        if self.monitor_interval:
            self.set_interval(self.monitor_interval, self.refresh_monitor)
        # SIGINT from outside (in the terminal's raw mode Ctrl-C is a key, not a signal) must
        # not tear the app down mid-run: it interrupts like Ctrl-C. Not where signals cannot
        # be caught (a thread other than the main one, Windows).
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGINT, lambda: self.call_later(self.action_interrupt)
            )

    # ---- state --------------------------------------------------------------------------

    def set_status(self, message: str, error: bool = False) -> None:
        style = "bold red" if error else ""
        self.query_one("#status", Static).update(Text(message, style=style))

    def watch_busy(self, _busy: str) -> None:
        self.refresh_bindings()

    def watch_gpu(self, gpu: GpuStatus | None) -> None:
        self.refresh_bindings()
        banner = self.query_one("#mode-banner", Static)
        if gpu is None:
            return
        if gpu.available:
            banner.update(
                Text.assemble(("GPU ", "bold"), gpu.name or "available", "  ", gpu.reason)
            )
            banner.set_class(False, "browse")
        else:
            tools = self.build_tools
            can_build = tools is not None and tools.available
            # what works first, then why runs do not: the banner wraps rather than cut it
            banner.update(
                Text.assemble(
                    ("Browse mode", "bold"),
                    ": saved sessions and builds (b). No runs: "
                    if can_build
                    else ": saved sessions only. No runs: ",
                    gpu.reason,
                    "" if can_build else f"; no builds: {tools.reason if tools else 'unknown'}",
                )
            )
            banner.set_class(True, "browse")
            self.query_one("#form", RunForm).query_one("#run-button", Button).disabled = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("build", "run"):
            # None: shown in the footer but disabled while busy or still probing. Without a GPU
            # or a compiler the keys stay live: pressed, they say why they cannot act.
            return None if self.busy or self.gpu is None else True
        if action == "cancel":
            return bool(self.busy)
        return True

    # ---- actions ------------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        # Focus moves with the tab: a focused widget left in a hidden pane would pull its pane
        # back into view (TabbedContent follows focus), and keys should act on what is shown.
        target = {"run": "#variants", "results": "#results-table", "sessions": "#browser"}[tab]
        self.query_one(target).focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_build(self) -> None:
        if self.check_action("build", ()) is not True:
            return
        tools = self.build_tools
        if tools is None or not tools.available:
            why = tools.reason if tools else "the build tooling could not be probed"
            self.set_status(f"Cannot build: {why}", error=True)
            self.notify(why, title="Cannot build", severity="warning")
            return
        self.busy = "build"
        self.set_status("Building variants…")
        self.stop_work = threading.Event()
        self.build_variants([], self.stop_work)

    def action_run(self) -> None:
        if self.check_action("run", ()) is not True:
            return
        if self.gpu is not None and not self.gpu.available:
            self.set_status(f"Cannot run in browse mode: {self.gpu.reason}", error=True)
            self.notify(
                f"Timing needs a GPU: {self.gpu.reason}. Builds (b) and saved sessions work.",
                title="Cannot run",
                severity="warning",
            )
            return
        try:
            config = self.query_one(RunForm).config()
        except BadArgument as e:
            self.set_status(f"Run configuration: {e}", error=True)
            self.notify(str(e), title="Run configuration", severity="error")
            return
        self.busy = "run"
        self.action_tab("run")
        from workbench.core.stats import DEFAULT_M  # the runner's minimum effect (not in the form)

        steps = len(config.kernels) * len(config.sets)
        self.query_one(RunProgress).start(
            steps, None if config.adaptive else config.pairs, DEFAULT_M
        )
        self.set_status(f"Running {config.a} (A) against {config.b} (B)…")
        self.stop_work = threading.Event()
        self.run_ab(config, self.stop_work)

    @on(Button.Pressed, "#run-button")
    def _run_pressed(self) -> None:
        self.action_run()

    def action_cancel(self) -> None:
        # A flag the worker's thread polls, not Worker.cancel: that cancels the asyncio task
        # waiting on the thread, so the worker would read as finished (wait_for_complete
        # returns) while its thread is still closing the session.
        if self.busy == "run":
            self.stop_work.set()
            self.query_one(RunProgress).state = "cancelling"
            self.set_status("Cancelling the run…")
        elif self.busy == "build":
            self.stop_work.set()
            self.set_status("Cancelling the build…")

    def exporting(self) -> bool:
        return any(w.group == "export" and not w.is_finished for w in self.workers)

    async def action_quit(self) -> None:
        """Quit; during a build or run, cancel it first so that its session is closed properly
        ("interrupted", every measured sample kept); during an export, once it is written. The
        screen stays up meanwhile, saying so. A second q quits at once."""
        if (self.busy or self.exporting()) and not self.quit_when_idle:
            self.quit_when_idle = True
            if self.busy:
                self.action_cancel()
                self.set_status("Quitting once the sample in flight is saved (q again: quit now)…")
            else:
                self.set_status(
                    "Quitting once the export is written (q again: quit now, leaving it unfinished)…"
                )
            return
        self.leave()

    def leave_if_idle(self) -> None:
        """After a build, run or export ended: quit if a q is waiting for it and nothing else
        is left running."""
        if self.quit_when_idle and not self.busy and not self.exporting():
            self.leave()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "export" and event.worker.is_finished:
            self.leave_if_idle()

    async def action_interrupt(self) -> None:
        """Ctrl-C: quit as q does (a build or run is cancelled first, its session kept), with
        the exit code of an interrupted program."""
        self.interrupted = True
        await self.action_quit()

    def leave(self) -> None:
        self.exit(return_code=EXIT_INTERRUPTED if self.interrupted else 0)

    def action_tune(self) -> None:
        """Open the tune screen (docs/DESIGN.md §11); it starts the backend's tune, if any."""
        from workbench.tui.screens.tune import TuneScreen

        start = getattr(self.backend, "tune", None)
        why = "" if start is not None else "this backend cannot tune"
        if self.gpu is not None and not self.gpu.available:
            start, why = None, f"browse mode: {self.gpu.reason}"
        self.push_screen(TuneScreen(start, why))

    def action_compiler_log(self) -> None:
        row = self.query_one(VariantMatrix).selected()
        if row is None:
            self.notify("No variant highlighted.", severity="warning")
            return
        self.push_screen(CompilerLogScreen(row.name, row.log))

    def action_open_session(self) -> None:
        info = self.query_one(SessionBrowser).highlighted()
        if info is None:
            self.notify("No saved session to open.", severity="warning")
            return
        self.open_session(info.path)

    def action_rescan(self) -> None:
        self.list_sessions()

    def _session_in_view(self) -> Path | None:
        """The open session, else the highlighted one, else None."""
        if self.open_path is not None:
            return self.open_path
        info = self.query_one(SessionBrowser).highlighted()
        return info.path if info else None

    def action_export(self) -> None:
        path = self._session_in_view()
        if path is None:
            self.notify("Open or highlight a session to export.", severity="warning")
            return
        self.set_status(f"Exporting {path.name}…")
        self.export_session(path)

    def action_counters(self) -> None:
        """The open (else highlighted) session's hardware counters, A beside B (ab --counters)."""
        from workbench.analysis.counters import markdown_lines
        from workbench.store import counters

        path = self._session_in_view()
        if path is None:
            self.notify("Open or highlight a session first.", title="Counters", severity="warning")
            return
        try:
            doc = counters.load(path)
        except WorkbenchError as e:
            self.notify(str(e), title="Counters", severity="error")
            return
        if doc is None:
            self.notify(
                f"{path.name} has no counters: `workbench ab --counters` records them.",
                title="Counters",
                severity="warning",
            )
            return
        self.push_screen(
            CompareScreen(f"Hardware counters: {path.name}", "\n".join(markdown_lines(doc)))
        )

    def action_compare(self) -> None:
        browser = self.query_one(SessionBrowser)
        info = browser.highlighted()
        if browser.marked is None or info is None or info.path == browser.marked:
            self.notify(
                "Mark one session with m, then highlight another and press x.",
                title="Compare",
                severity="warning",
            )
            return
        self.compare_sessions(browser.marked, info.path)

    def on_run_form_left(self, _message: RunForm.Left) -> None:
        # Escape in the form: back to the matrix, where b, r, l and the tab keys act again.
        self.query_one(VariantMatrix).focus()

    def on_session_browser_open_requested(self, message: SessionBrowser.OpenRequested) -> None:
        self.open_session(message.path)

    # ---- workers (threads: they call the backend and only post messages) ---------------

    def _fail(self, what: str, error: BaseException) -> None:
        self.post_message(WorkFailed(what, describe(error)))

    @work(thread=True, group="probe", exit_on_error=False)
    def probe_gpu(self) -> None:
        with contextlib.suppress(Abandoned):
            self.post_message(detached(self._probe))

    def _probe(self) -> GpuProbed:
        try:
            status = self.backend.gpu_status()
        except Exception as e:  # a probe must never take the app down
            status = GpuStatus(False, describe(e))
        try:
            build = self.backend.build_status()
        except Exception as e:
            build = BuildStatus(False, describe(e))
        try:
            variants = self.backend.variants()
        except Exception as e:
            variants = []
            self._fail("variants", e)
        return GpuProbed(status, variants, build)

    @work(thread=True, group="sessions", exclusive=True, exit_on_error=False)
    def list_sessions(self) -> None:
        try:
            self.post_message(SessionsListed(detached(self.backend.sessions)))
        except Abandoned:
            pass
        except Exception as e:
            self._fail("list sessions", e)

    @work(thread=True, group="monitor", exclusive=True, exit_on_error=False)
    def refresh_monitor(self) -> None:
        try:
            reading = self.backend.monitor_reading()
            note = "" if reading is not None else self.backend.monitor_note()
        except Exception as e:
            reading, note = None, describe(e)
        self.post_message(MonitorRead(reading, note))

    @work(thread=True, group="build", exit_on_error=False)
    def build_variants(self, names: list[str], stop: threading.Event) -> None:
        cancelled = _cancelled(stop)
        try:
            self.backend.build(
                names, lambda row: self.post_message(BuildProgressed(row)), cancelled
            )
        except Exception as e:
            self.post_message(BuildEnded(cancelled(), describe(e)))
            return
        self.post_message(BuildEnded(cancelled()))

    @work(thread=True, group="run", exit_on_error=False)
    def run_ab(self, config: RunConfig, stop: threading.Event) -> None:
        cancelled = _cancelled(stop)
        try:
            path = self.backend.run(
                config, lambda event: self.post_message(RunProgressed(event)), cancelled
            )
        except Exception as e:
            self.post_message(RunEnded(None, cancelled(), describe(e)))
            return
        self.post_message(RunEnded(path, cancelled()))

    @work(thread=True, group="open", exclusive=True, exit_on_error=False)
    def open_session(self, path: Path) -> None:
        try:
            self.post_message(SessionOpened(detached(lambda: self.backend.open_session(path))))
        except Abandoned:
            pass
        except Exception as e:
            self.post_message(WorkFailed(f"open {path.name}", describe(e)))

    @work(thread=True, group="export", exit_on_error=False)
    def export_session(self, path: Path) -> None:
        try:
            self.post_message(Exported(detached(lambda: self.backend.export(path))))
        except Abandoned:
            pass
        except Exception as e:
            self._fail(f"export {path.name}", e)

    @work(thread=True, group="compare", exclusive=True, exit_on_error=False)
    def compare_sessions(self, a: Path, b: Path) -> None:
        try:
            text = detached(lambda: self.backend.compare(a, b))
        except Abandoned:
            return
        except Exception as e:
            self._fail("compare", e)
            return
        self.post_message(Compared(f"{a.name} → {b.name}", text))

    # ---- messages from the workers ------------------------------------------------------

    @while_running
    def on_gpu_probed(self, message: GpuProbed) -> None:
        self.query_one(VariantMatrix).set_rows(message.variants)
        self.build_tools = message.build
        self.gpu = message.status
        if not message.status.available:
            self.action_tab("sessions")

    @while_running
    def on_build_progressed(self, message: BuildProgressed) -> None:
        self.query_one(VariantMatrix).update_variant(message.row)

    @while_running
    def on_build_ended(self, message: BuildEnded) -> None:
        self.busy = ""
        if self.quit_when_idle:
            self.leave_if_idle()
            return
        if message.error:
            self.set_status(f"Build failed: {message.error}", error=True)
            self.notify(message.error, title="Build failed", severity="error")
        elif message.cancelled:
            self.set_status("Build cancelled.")
        else:
            self.set_status("Build finished.")

    @while_running
    def on_run_progressed(self, message: RunProgressed) -> None:
        self.query_one(RunProgress).event = message.event

    @while_running
    def on_run_ended(self, message: RunEnded) -> None:
        self.busy = ""
        if self.quit_when_idle:
            self.leave_if_idle()
            return
        progress = self.query_one(RunProgress)
        if message.error:
            progress.state = "failed"
            self.set_status(f"Run failed: {message.error}", error=True)
            self.notify(message.error, title="Run failed", severity="error")
        else:
            progress.state = "interrupted" if message.cancelled else "complete"
            self.set_status(f"Session saved: {message.path}")
        self.run_path = message.path
        if message.path is not None:
            self.open_session(message.path)
        self.list_sessions()

    @while_running
    def on_sessions_listed(self, message: SessionsListed) -> None:
        self.query_one(SessionBrowser).show(message.sessions)
        if not message.sessions and not self.busy:
            root = getattr(self.backend, "sessions_root", "the sessions folder")
            self.set_status(f"No saved sessions in {root}/ yet: runs are saved there.")
        bad = [i for i in message.sessions if i.status == "unreadable"]
        if bad and not self.busy:  # each bad folder's error is in its row, the first's whole
            # in a notice (the status line holds one line: an error would be cut there)
            self.set_status(
                f"{len(bad)} unreadable session folder(s) skipped, e.g. {bad[0].name} "
                "(its error: the notice, and its row)",
                error=True,
            )
            self.notify(
                f"{bad[0].name}: {bad[0].error}",
                title=f"{len(bad)} unreadable session folder(s) skipped",
                severity="warning",
            )

    @while_running
    def on_session_opened(self, message: SessionOpened) -> None:
        view = message.view
        self.open_path = view.info.path
        self.query_one(ResultsView).view = view
        if view.info.path == self.run_path:  # the run's own verdicts replace its live figures
            self.query_one(RunProgress).finish(view.chart)
        self.action_tab("results")
        if self.busy != "run":
            self.set_status(f"Opened {view.info.name} ({view.info.status}).")

    @while_running
    def on_work_failed(self, message: WorkFailed) -> None:
        self.set_status(f"Cannot {message.what}: {message.error}", error=True)
        self.notify(message.error, title=f"Cannot {message.what}", severity="error")

    @while_running
    def on_exported(self, message: Exported) -> None:
        result = message.result
        self.set_status(f"Exported {len(result.plots)} plots and the report {result.report}")
        self.notify(f"{len(result.plots)} plots, report {result.report}", title="Exported")

    @while_running
    def on_compared(self, message: Compared) -> None:
        self.push_screen(CompareScreen(message.title, message.markdown))

    @while_running
    def on_monitor_read(self, message: MonitorRead) -> None:
        panel = self.query_one(NvmlPanel)
        if message.reading is None:
            panel.unavailable(message.note)
        else:
            panel.push(message.reading)
