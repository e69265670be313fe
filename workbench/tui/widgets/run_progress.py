"""Live progress of a run: pair k of n, and per comparison the current ratio, its CI and the
±m band on the ratio chart."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from workbench.tui.backend import ProgressEvent, RatioPoint
from workbench.tui.widgets.ratio_chart import RatioChart


class RunProgress(Vertical):
    """Shows the state of the current run; fed one `ProgressEvent` at a time."""

    state: reactive[str] = reactive("idle")
    event: reactive[ProgressEvent | None] = reactive(None)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.latest: dict[str, ProgressEvent] = {}
        self.m = 0.01  # the run's minimum effect, set by start()

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-title")
        yield ProgressBar(total=None, show_eta=False, id="progress-bar")
        yield Static("", id="progress-line")
        yield RatioChart(
            "Each comparison's ratio B/A appears here as its pairs complete.", id="progress-chart"
        )

    def on_mount(self) -> None:
        self.watch_state(self.state)

    def start(self, steps: int, pairs: int | None, m: float) -> None:
        """A new run of ``steps`` comparisons of ``pairs`` pairs each (None: adaptive), whose
        verdicts will use the minimum effect ``m``."""
        self.latest = {}
        self.m = m
        bar = self.query_one(ProgressBar)
        bar.update(total=None if pairs is None else steps * pairs, progress=0)
        self.event = None
        self.state = "running"
        self.query_one(RatioChart).show([])

    def finish(self, points: Sequence[RatioPoint]) -> None:
        """The run's session is analysed: chart its verdicts in place of the live figures."""
        self.query_one(RatioChart).show(points)

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
            f"[b]{event.cmp_id}[/b]: pair {event.pair} of {of}, {event.samples} samples "
            f"(comparison {event.step} of {event.steps})"
            + (f"\n[yellow]{event.message}[/]" if event.message else "")
        )
        if event.pairs is not None:
            # The engine knows the full plan (reference arms, confirmation), the form does not:
            # the total follows the events.
            self.query_one(ProgressBar).update(
                total=event.steps * event.pairs,
                progress=(event.step - 1) * event.pairs + event.pair,
            )
        self.query_one(RatioChart).show(
            [
                RatioPoint(
                    e.cmp_id,
                    e.ratio,
                    *(e.ci or (None, None)),
                    self.m,
                    note=f"{e.pair}/{'?' if e.pairs is None else e.pairs} pairs",
                )
                for e in self.latest.values()
            ]
        )
