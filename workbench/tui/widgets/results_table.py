"""Results per comparison (kernel, set): median times, µs per call, ratio, CI, p, k/n, verdict:
the cells of the one comparison table (workbench.analysis.table), laid into a DataTable."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding

from workbench.tui.widgets.table import Table

VERDICT_STYLE = {
    "FASTER": "bold green",
    "SLOWER": "bold red",
    "SAME": "bold cyan",
    "AMBIGUOUS": "bold yellow",
}


def verdict_style(words: str) -> str:
    """The style of a verdict's words: a small resolved effect (FASTER<m, SLOWER<m) as SAME,
    a resolved direction of unresolved size (FASTER~m, SLOWER~m) as AMBIGUOUS."""
    head = words.split(" ", 1)[0]
    key = "SAME" if head.endswith("<m") else "AMBIGUOUS" if head.endswith("~m") else head
    return VERDICT_STYLE.get(key, "")


class ResultsTable(Table):
    """One row per comparison of the open session, in journal order.

    The table sits in the results view's scrolling column, above the recommendation: the
    paging keys scroll that column (a table of a dozen rows needs no paging of its own), so
    that PageDown and End reach the recommendation while the table keeps the focus."""

    BINDINGS = [
        Binding("pagedown", "view('page_down')", "Page down", show=False),
        Binding("pageup", "view('page_up')", "Page up", show=False),
        Binding("end", "view('end')", "End", show=False),
        Binding("home", "view('home')", "Home", show=False),
    ]

    def action_view(self, where: str) -> None:
        view = self.parent
        if view is None:
            return
        {"page_down": view.scroll_page_down, "page_up": view.scroll_page_up,
         "end": view.scroll_end, "home": view.scroll_home}[where]()  # fmt: skip

    # The decision first (verdict, ratio, CI), the evidence after, the arms last: on a narrow
    # terminal the table scrolls sideways and what matters most stays in view. Keys of
    # workbench.analysis.table.COLUMNS.
    COLUMNS = ("label", "verdict", "ratio", "ci", "p", "k/n", "a_ms", "b_ms", "us", "flagged",
               "a", "b")  # fmt: skip

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        from workbench.analysis.table import headers

        self.add_columns(*headers(self.COLUMNS))

    def show(self, results: tuple[Any, ...] | list[Any]) -> None:
        """One row per ``workbench.analysis.ComparisonResult``."""
        from workbench.analysis.table import comparison_table

        self.clear()
        table = comparison_table(results, self.COLUMNS)
        styles = {"verdict": verdict_style, "ratio": lambda _: "bold"}
        for row in table.rows:
            self.add_row(
                *(
                    Text(x, style=styles[c.key](x)) if c.key in styles else x
                    for c, x in zip(table.columns, row.cells, strict=True)
                )
            )
