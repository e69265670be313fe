"""The results view: which session is open and its recommendation, always in view; below them,
scrolling, the results table, the ratio chart and the evidence with the rule.

The decision comes first: on a terminal of 80x24 the recommendation and the comparisons that
decide it are on screen without scrolling; the table lists those comparisons first (then the
step confirmations, then the references), and the chart follows the table's order."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from workbench.tui.backend import SessionView
from workbench.tui.widgets import recommendation
from workbench.tui.widgets.evidence import EvidencePanel
from workbench.tui.widgets.ratio_chart import RatioChart
from workbench.tui.widgets.recommendation import RecommendationPanel
from workbench.tui.widgets.results_table import ROLE_ORDER, ResultsTable


class ResultsView(Vertical):
    """Shows one `SessionView`; ``view`` is reactive so opening a session is one assignment."""

    view: reactive[SessionView | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        yield Static("", id="results-header")
        yield Static(recommendation.title(), id="recommendation-title", classes="-empty")
        yield RecommendationPanel(id="recommendation")
        scroll = VerticalScroll(id="results-scroll")
        # not a stop of Tab: the table in it is, so that Tab goes from the tab bar to the table
        # and back, never to a container that shows no focus
        scroll.can_focus = False
        with scroll:
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
        title = self.query_one("#recommendation-title", Static)
        title.set_class(view is None or not view.recommendations, "-empty")
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
        # one line (80 columns hold a default session's): the name, which starts with the date,
        # the status, the GPU and the shape; then each note on one line of its own, whole in
        # the evidence at the end (the rows that decide come first on a short screen)
        line = Text.assemble(
            (info.name, "bold"),
            "  ",
            (info.status, "bold green" if info.status == "complete" else "bold yellow"),
            no_wrap=True,
            overflow="ellipsis",
        )
        for value in (info.gpu, info.shape):
            if value:
                line.append(f"  {value}")
        lines = [line]
        lines += [Text(note, "yellow", no_wrap=True, overflow="ellipsis") for note in view.notes]
        header.update(Group(*lines))
        # rows and chart points are made together, one of each per comparison measured
        order = sorted(range(len(view.rows)), key=lambda i: ROLE_ORDER.get(view.rows[i].role, 2))
        table.show([view.rows[i] for i in order])
        same = len(view.chart) == len(view.rows)
        chart.show([view.chart[i] for i in order] if same else view.chart)
        panel.show(view.recommendations)
        evidence.show(view.recommendations, view.rule, view.notes)
