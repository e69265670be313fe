"""Live progress of a run: pair k of n, the current ratio and its CI, per comparison."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from workbench.tui.backend import ProgressEvent


def ratio_text(ratio: float | None, ci: tuple[float, float] | None) -> str:
    """``0.9312 [0.9210, 0.9405]``, or a dash while fewer than two pairs exist."""
    if ratio is None:
        return "–"
    if ci is None:
        return f"{ratio:.4f}"
    return f"{ratio:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"


class RunProgress(Vertical):
    """Shows the state of the current run; fed one `ProgressEvent` at a time."""

    state: reactive[str] = reactive("idle")
    event: reactive[ProgressEvent | None] = reactive(None)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.latest: dict[str, ProgressEvent] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-title")
        yield ProgressBar(total=None, show_eta=False, id="progress-bar")
        yield Static("", id="progress-line")
        yield Static("", id="progress-table")

    def on_mount(self) -> None:
        self.watch_state(self.state)

    def start(self, steps: int, pairs: int | None) -> None:
        """A new run of ``steps`` comparisons of ``pairs`` pairs each (None: adaptive)."""
        self.latest = {}
        bar = self.query_one(ProgressBar)
        bar.update(total=None if pairs is None else steps * pairs, progress=0)
        self.event = None
        self.state = "running"
        self.query_one("#progress-table", Static).update("")

    def watch_state(self, state: str) -> None:
        text = {
            "idle": Text("No run in progress. Configure one and press r.", style="dim"),
            "running": Text("Running…", style="bold yellow"),
            "cancelling": Text("Cancelling: finishing the sample in flight…", style="bold red"),
            "complete": Text("Run complete: results are in the Results tab.", style="bold green"),
            "interrupted": Text(
                "Run cancelled: the measured samples were kept as an interrupted session.",
                style="bold red",
            ),
            "failed": Text("Run failed.", style="bold red"),
        }.get(state, Text(state))
        self.query_one("#progress-title", Static).update(text)
        # An idle bar would be an empty (or animated, indeterminate) line: show it only for runs.
        self.query_one(ProgressBar).display = state != "idle"

    def watch_event(self, event: ProgressEvent | None) -> None:
        line = self.query_one("#progress-line", Static)
        if event is None:
            line.update("")
            return
        self.latest[event.cmp_id] = event
        of = "?" if event.pairs is None else str(event.pairs)
        line.update(
            f"comparison {event.step} of {event.steps}: [b]{event.cmp_id}[/b]   "
            f"pair {event.pair} of {of}   ratio B/A {ratio_text(event.ratio, event.ci)}   "
            f"{event.samples} samples" + (f"\n[yellow]{event.message}[/]" if event.message else "")
        )
        if event.pairs is not None:
            # The engine knows the full plan (reference arms, confirmation), the form does not:
            # the total follows the events.
            self.query_one(ProgressBar).update(
                total=event.steps * event.pairs,
                progress=(event.step - 1) * event.pairs + event.pair,
            )
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("comparison", "pairs", "ratio B/A [95% CI]"):
            table.add_column(col)
        for e in self.latest.values():
            table.add_row(
                e.cmp_id,
                f"{e.pair}/{'?' if e.pairs is None else e.pairs}",
                ratio_text(e.ratio, e.ci),
            )
        self.query_one("#progress-table", Static).update(table)
