"""The results view: which session is open, its ratio chart, results table and recommendation.

One scrolling column, the at-a-glance chart first: on a small terminal the rest scrolls."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from workbench.tui.backend import SessionView
from workbench.tui.widgets.ratio_chart import RatioChart
from workbench.tui.widgets.recommendation import RecommendationPanel
from workbench.tui.widgets.results_table import ResultsTable


class ResultsView(VerticalScroll):
    """Shows one `SessionView`; ``view`` is reactive so opening a session is one assignment."""

    view: reactive[SessionView | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        yield Static("", id="results-header")
        yield RatioChart(id="results-chart")
        yield ResultsTable(id="results-table")
        yield RecommendationPanel(id="recommendation")

    def on_mount(self) -> None:
        self.watch_view(self.view)

    def watch_view(self, view: SessionView | None) -> None:
        header = self.query_one("#results-header", Static)
        table = self.query_one(ResultsTable)
        panel = self.query_one(RecommendationPanel)
        chart = self.query_one(RatioChart)
        if view is None:
            chart.show([])
            header.update(
                Text("No session open: run one, or open one from the Sessions tab.", "dim")
            )
            table.show([])
            panel.clear_view()
            return
        info = view.info
        text = Text.assemble(
            ("session ", "dim"),
            (info.name, "bold"),
            "  ",
            (info.status, "bold green" if info.status == "complete" else "bold yellow"),
        )
        for label, value in (("GPU", info.gpu), ("shape", info.shape), ("created", info.created)):
            if value:
                text.append(f"   {label} ", "dim")
                text.append(value)
        for note in view.notes:
            text.append("\n" + note, "yellow")
        header.update(text)
        chart.show(view.chart)
        table.show(view.rows)
        panel.show(view.recommendations, view.rule)
