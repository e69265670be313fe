"""A modal screen of Markdown whose pipe tables are tables of the app's own: the hardware
counters (screens/counters.py), and the base of the compare screen (screens/compare.py).

Its prose is shown as Markdown; each of its tables as a `Table`: Markdown's tables squeeze every
column to the screen's width, and at 80 columns each cell read `0.9…`; a `Table` keeps every cell
whole and scrolls sideways. PageDown and End scroll the screen, the table focused or not."""

from __future__ import annotations

from collections.abc import Iterator

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Markdown

from workbench.tui.widgets.table import Table, paging_keys

HINT = "escape closes · pgdn/end scroll · tab: the table, ←→ its columns"

Rows = list[list[str]]  # a table's rows, the header first


def _plain(cell: str) -> str:
    # a table cell is shown as text: no code or bold marks
    return cell.strip().replace("`", "").replace("**", "")


def split_tables(markdown: str) -> list[str | Rows]:
    """``markdown`` as its parts in order: Markdown text (a str) and pipe tables (their rows,
    the header first, the ``|---|`` line dropped)."""
    parts: list[str | Rows] = []
    text: list[str] = []
    rows: Rows = []
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


class MarkdownTable(Table):
    """One pipe table of the screen, its rows whole; the comparison's name stays in view when
    ←→ scroll the columns."""

    BINDINGS = paging_keys("End")

    def __init__(self, rows: Rows) -> None:
        super().__init__(classes="markdown-table", zebra_stripes=True, cursor_type="row")
        self.rows_text = rows
        self.fixed_columns = 1

    def on_mount(self) -> None:
        header, *rows = self.rows_text
        self.add_columns(*header)
        for row in rows:
            self.add_row(*row[: len(header)], *[""] * (len(header) - len(row)))


class TablesScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close")]
    HINT = HINT

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown

    def parts(self) -> Iterator[str | Widget]:
        """What the screen shows, in order: Markdown text (a str) and widgets; here the
        Markdown's text and each of its tables as a `MarkdownTable` (a subclass may show more)."""
        for part in split_tables(self.markdown):
            yield part if isinstance(part, str) else MarkdownTable(part)

    def compose(self) -> ComposeResult:
        body = VerticalScroll(id="tables-body", classes="modal-body")
        body.border_title = self.title_text
        body.border_subtitle = self.HINT
        with body:
            for part in self.parts():
                if not isinstance(part, str):
                    yield part
                elif part.strip():
                    yield Markdown(part, classes="tables-notes")
