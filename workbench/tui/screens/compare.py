"""Two sessions side by side: the comparison the backend writes, as Markdown.

Its prose is shown as Markdown; each of its tables as a table of the app's own (`Table`): Markdown's
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


def _plain(cell: str) -> str:
    # a table cell is shown as text: no code or bold marks
    return cell.strip().replace("`", "").replace("**", "")


def split_tables(markdown: str) -> list[str | list[list[str]]]:
    """``markdown`` as its parts in order: Markdown text (a str) and pipe tables (their rows,
    the header first, the ``|---|`` line dropped)."""
    parts: list[str | list[list[str]]] = []
    text: list[str] = []
    rows: list[list[str]] = []
    for line in [*markdown.split("\n"), ""]:
        if line.startswith("|"):
            if text:
                parts.append("\n".join(text))
                text = []
            if not set(line) <= set("|-: "):
                rows.append([_plain(cell) for cell in line.strip().strip("|").split("|")])
            continue
        if rows:
            parts.append(rows)
            rows = []
        text.append(line)
    if "\n".join(text).strip():
        parts.append("\n".join(text))
    return parts


class CompareScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close")]

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown
        self.tables: list[list[list[str]]] = []  # the rows of each table, in order

    def compose(self) -> ComposeResult:
        body = VerticalScroll(id="compare-body", classes="modal-body")
        body.border_title = self.title_text
        body.border_subtitle = HINT
        with body:
            for part in split_tables(self.markdown):
                if isinstance(part, str):
                    if part.strip():
                        yield Markdown(part, classes="compare-notes")
                    continue
                self.tables.append(part)
                yield Table(classes="compare-table", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        widgets = self.query(".compare-table").results(Table)
        for table, (header, *rows) in zip(widgets, self.tables, strict=True):
            table.fixed_columns = 1  # the comparison's name stays when ←→ scroll the columns
            table.add_columns(*header)
            for row in rows:
                table.add_row(*row[: len(header)], *[""] * (len(header) - len(row)))
