"""The results view: which session is open and its recommendation, always in view; below them,
scrolling, the results table, the ratio chart and the evidence with the rule.

The decision comes first: on a terminal of 80x24 the recommendation and the comparisons that
decide it are on screen without scrolling; the table lists those comparisons first (then the
step confirmations, then the references), and the chart follows the table's order."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from workbench.tui.backend import SessionView
from workbench.tui.widgets.evidence import EvidencePanel
from workbench.tui.widgets.ratio_chart import RatioChart
from workbench.tui.widgets.recommendation import RecommendationPanel
from workbench.tui.widgets.results_table import ResultsTable

# the comparisons that decide the recommendation, then the one that confirms it, then the rest
ROLE_ORDER = {"main": 0, "confirm": 1}


class ResultsView(Vertical):
    """Shows one `SessionView`; ``view`` is reactive so opening a session is one assignment."""

    view: reactive[SessionView | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        yield Static("", id="results-header")
        yield RecommendationPanel(id="recommendation")
        with VerticalScroll(id="results-scroll"):
            yield ResultsTable(id="results-table")
            yield RatioChart(id="results-chart")
            yield EvidencePanel(id="evidence")

    def on_mount(self) -> None:
        self.watch_view(self.view)

    def watch_view(self, view: SessionView | None) -> None:
        header = self.query_one("#results-header", Static)
        table = self.query_one(ResultsTable)
        panel = self.query_one(RecommendationPanel)
        evidence = self.query_one(EvidencePanel)
        chart = self.query_one(RatioChart)
        if view is None:
            chart.show([])
            header.update(
                Text("No session open: run one, or open one from the Sessions tab.", "dim")
            )
            table.show([])
            panel.clear_view()
            evidence.show((), "")
            return
        info = view.info
        text = Text.assemble(
            ("session ", "dim"),
            (info.name, "bold"),
            "  ",
            (info.status, "bold green" if info.status == "complete" else "bold yellow"),
        )
        # no "created": the session's name starts with it
        for label, value in (("GPU", info.gpu), ("shape", info.shape)):
            if value:
                text.append(f"   {label} ", "dim")
                text.append(value)
        for note in view.notes:
            text.append("\n" + note, "yellow")
        header.update(text)
        # rows and chart points are made together, one of each per comparison measured
        order = sorted(range(len(view.rows)), key=lambda i: ROLE_ORDER.get(view.rows[i].role, 2))
        table.show([view.rows[i] for i in order])
        same = len(view.chart) == len(view.rows)
        chart.show([view.chart[i] for i in order] if same else view.chart)
        panel.show(view.recommendations)
        evidence.show(view.recommendations, view.rule)
