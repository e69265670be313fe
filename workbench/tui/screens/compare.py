"""Two sessions side by side: the comparison the backend writes, as Markdown.

Its prose is shown as Markdown; its table as a table of the app's own (`Table`): Markdown's
tables squeeze every column to the screen's width, and at 80 columns each cell read `0.9…`;
a `Table` keeps every cell whole and scrolls sideways."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from workbench.tui.widgets.table import Table

HINT = "escape closes · tab: the table, ←→ its columns"


def split_table(markdown: str) -> tuple[str, list[list[str]], str]:
    """(the Markdown before the first pipe table, its rows (the header first, the ``|---|``
    line dropped), the Markdown after it). No table: (markdown, [], "")."""
    lines = markdown.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith("|")), None)
    if start is None:
        return markdown, [], ""
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    rows = [
        [cell.strip() for cell in ln.strip().strip("|").split("|")]
        for ln in lines[start:end]
        if not set(ln) <= set("|-: ")
    ]
    return "\n".join(lines[:start]), rows, "\n".join(lines[end:])


class CompareScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close")]

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        before, rows, after = split_table(self.markdown)
        body = VerticalScroll(id="compare-body", classes="modal-body")
        body.border_title = self.title_text
        body.border_subtitle = HINT
        with body:
            yield Markdown(before, id="compare-notes")
            if rows:
                yield Table(id="compare-table", zebra_stripes=True, cursor_type="row")
            if after.strip():
                yield Markdown(after, id="compare-method")

    def on_mount(self) -> None:
        _, rows, _ = split_table(self.markdown)
        if rows:
            table = self.query_one("#compare-table", Table)
            table.add_columns(*rows[0])
            for row in rows[1:]:
                table.add_row(*(cell.replace("`", "") for cell in row))
