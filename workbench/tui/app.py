"""The workbench app: its keys, its layout, and the wiring of workers' messages to widgets.

All blocking calls go to the `Backend` from thread workers (`workbench.tui.workers`) that post
messages back; the event loop only ever updates widgets, so the UI never freezes. Each tab,
screen and widget lives in a file of its own (docs/ARCHITECTURE.md, "TUI").
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Button, Footer, Header, Static, TabbedContent, TabPane

from workbench.core.errors import BadArgument, WorkbenchError
from workbench.tui.backend import Backend, BuildStatus, GpuStatus, RunConfig
from workbench.tui.commands import WorkbenchCommands
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
from workbench.tui.screens.counters import CountersScreen, NoCounters
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.log import CompilerLogScreen
from workbench.tui.stopping import Stopping
from workbench.tui.widgets.mode_banner import ModeBanner
from workbench.tui.widgets.nvml_panel import NvmlPanel
from workbench.tui.widgets.results_view import ResultsView
from workbench.tui.widgets.run_form import RunForm
from workbench.tui.widgets.run_pane import RunPane
from workbench.tui.widgets.run_progress import RunProgress
from workbench.tui.widgets.session_browser import SessionBrowser
from workbench.tui.widgets.variant_matrix import VariantMatrix
from workbench.tui.workers import AppWorkers, while_running

TABS = Binding.Group("Tabs")


class WorkbenchApp(AppWorkers, Stopping, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "workbench"
    SUB_TITLE = "AWQ int4 MoE metadata readers"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    # Every key works on every tab; the footer (compact) shows help, quit, cancel and the tab
    # keys, and the keys of the focused table (its BINDINGS name the same app actions): at 80
    # columns a footer of every key lost Export (issue 33).
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
        # the tab keys, one footer entry ("1 2 3 Tabs") on every tab
        *(
            Binding(key, f"tab('{tab}')", name, group=TABS)
            for key, tab, name in (
                ("1", "run", "Build & run"),
                ("2", "results", "Results"),
                ("3", "sessions", "Sessions"),
            )
        ),
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
        yield ModeBanner(id="mode-banner")
        with Horizontal(id="body"):
            with TabbedContent(initial="run", id="tabs"):
                with TabPane("Build & run", id="run"):
                    yield RunPane(self.initial_config, id="run-pane")
                with TabPane("Results", id="results"):
                    yield ResultsView(id="results-view")
                with TabPane("Sessions", id="sessions"):
                    yield SessionBrowser(id="browser")
            yield NvmlPanel(id="nvml")
        yield Static("", id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#variants").focus()  # the footer shows its keys: b, r, l
        self.probe_gpu()
        self.list_sessions()
        self.refresh_monitor()
        if self.monitor_interval:
            self.set_interval(self.monitor_interval, self.refresh_monitor)
        self.catch_sigint()

    # ---- state --------------------------------------------------------------------------

    def set_status(self, message: str, error: bool = False) -> None:
        style = "bold red" if error else ""
        self.query_one("#status", Static).update(Text(message, style=style))

    def watch_busy(self, _busy: str) -> None:
        self.refresh_bindings()

    def watch_gpu(self, gpu: GpuStatus | None) -> None:
        self.refresh_bindings()
        if gpu is None:
            return
        self.query_one(ModeBanner).show(gpu, self.build_tools)
        if not gpu.available:
            self.query_one("#run-button", Button).disabled = True

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
        path = self._session_in_view()
        if path is None:
            self.notify("Open or highlight a session first.", title="Counters", severity="warning")
            return
        try:
            screen = CountersScreen.of(path)
        except WorkbenchError as e:
            severity = "warning" if isinstance(e, NoCounters) else "error"
            self.notify(str(e), title="Counters", severity=severity)
            return
        self.push_screen(screen)

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
        self.push_screen(CompareScreen(message.title, message.view))

    @while_running
    def on_monitor_read(self, message: MonitorRead) -> None:
        panel = self.query_one(NvmlPanel)
        if message.reading is None:
            panel.unavailable(message.note)
        else:
            panel.push(message.reading)
