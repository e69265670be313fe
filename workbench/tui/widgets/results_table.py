"""Results per comparison (kernel, set): median times, µs per call, ratio, CI, p, k/n, verdict:
the cells of the one comparison table (workbench.analysis.table), laid into a DataTable."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding

from workbench.tui.widgets.table import Table, paging_keys

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


# a comparison's name by its role: the main ones bold, the references dim (the cell's text,
# with its "(confirm)" tag, is the table's)
ROLE_STYLE = {"main": "bold", "reference": "dim"}
# the comparisons that decide the recommendation, then the one that confirms it, then the rest
ROLE_ORDER = {"main": 0, "confirm": 1}


class ResultsTable(Table):
    """One row per comparison of the open session, in the order the results view gives.

    The table sits in the results view's scrolling column, above the chart and the evidence:
    the paging keys scroll that column (the table shows every row, it needs no paging of its
    own), so that PageDown and End reach the evidence while the table keeps the focus."""

    BINDINGS = [
        *paging_keys("Evidence"),
        Binding("e", "app.export", "Export"),  # the app's key, shown in the footer
    ]

    # The decision first (verdict, ratio, CI), the times it rests on (A ms, B ms, µs per call),
    # then the statistics, the blocks and the arms: on a narrow terminal the table scrolls
    # sideways and what matters most stays in view; at 140 columns everything up to p is.
    # Keys of workbench.analysis.table.COLUMNS.
    COLUMNS = ("name", "verdict_word", "ratio", "ci", "a_ms", "b_ms", "us", "p", "k/n",
               "rests_on", "flagged", "a", "b")  # fmt: skip

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.fixed_columns = 1  # the comparison's name stays when the table scrolls sideways

    def on_mount(self) -> None:
        from workbench.analysis.table import headers

        self.add_columns(*headers(self.COLUMNS))

    def show(self, results: tuple[Any, ...] | list[Any]) -> None:
        """One row per ``workbench.analysis.ComparisonResult``."""
        from workbench.analysis.table import comparison_table

        self.clear()
        table = comparison_table(results, self.COLUMNS)
        for row in table.rows:
            styles = {
                "name": ROLE_STYLE.get(row.result.role, ""),
                "verdict_word": verdict_style(row.result.verdict.words),
                "ratio": "bold",
            }
            self.add_row(
                *(
                    Text(x, style=styles[c.key]) if c.key in styles else x
                    for c, x in zip(table.columns, row.cells, strict=True)
                )
            )
