"""Browser of saved sessions: open one (enter), mark one for comparison (m)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from workbench.tui.backend import SessionInfo
from workbench.tui.widgets.table import Table

_STATUS_STYLE = {
    "complete": "green",
    "interrupted": "yellow",
    "partial": "yellow",
    "running": "yellow",
    "failed": "red",
    "unreadable": "bold red",
}


class SessionBrowser(Table):
    """One row per session folder, newest first."""

    # the app's keys for sessions, shown in the footer while the table has the focus
    BINDINGS = [
        Binding("o", "app.open_session", "Open"),
        Binding("m", "mark", "Mark"),
        Binding("x", "app.compare", "Compare"),
        Binding("e", "app.export", "Export"),
        Binding("s", "app.rescan", "Rescan"),
    ]

    @dataclass
    class OpenRequested(Message):
        path: Path

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.fixed_columns = 3  # the mark, the date and the slug stay when it scrolls sideways
        self.infos: dict[str, SessionInfo] = {}
        self.marked: Path | None = None

    def on_mount(self) -> None:
        for key, label in (
            # what tells sessions apart, then the answer (the date, the recommendation, the
            # status, STALE sources): at 80 columns the table shows about 75 cells before it
            # scrolls sideways, and the longest slug with the longest recommendation fits (the
            # sources there are blank, not cut: → brings them in); at 140 (beside the GPU
            # panel), up to the shape
            ("mark", " "),
            ("created", "when (UTC)"),
            ("slug", "session"),
            ("recommendation", "recommendation"),
            ("status", "status"),
            ("sources", "sources"),
            ("shape", "shape"),
            ("gpu", "GPU"),
            ("commit", "commit"),
            ("kernels", "comparisons"),
            ("samples", "samples"),
        ):
            self.add_column(label, key=key)

    @staticmethod
    def _sources(info: SessionInfo) -> Text:
        """Short csrc/ digest; STALE (red) when the kernel sources changed since the run."""
        if not info.sources:
            return Text("–" if info.status == "unreadable" else "?")
        if info.stale:
            return Text.assemble(info.sources + " ", ("STALE", "bold red"))
        return Text(info.sources)

    def show(self, sessions: list[SessionInfo]) -> None:
        self.clear()
        self.infos = {}
        # Sessions of one year: the year goes in the header, "12-02 00:35" in the cells (five
        # cells of 80 for the recommendation); slugs repeat ("default"), the date tells them apart.
        years = {info.created[:4] for info in sessions if info.created}
        year = years.pop() if len(years) == 1 else None
        self.columns[ColumnKey("created")].label = Text(f"{year} (UTC)" if year else "when (UTC)")
        for column in self.columns.values():  # widths follow these rows, not earlier ones
            column.content_width = column.label.cell_len
        for info in sessions:
            key = str(info.path)
            self.infos[key] = info
            status = Text(info.status, style=_STATUS_STYLE.get(info.status, ""))
            # the folder is <when>_<slug>: show the slug, or the whole name when unreadable
            slug = info.name.partition("_")[2] if info.created else info.name
            when = info.created[5:] if year and info.created else info.created
            self.add_row(
                "*" if info.path == self.marked else " ",
                when or "–",
                slug or info.name,
                info.recommendation or "–",
                status,
                self._sources(info),
                info.shape or "–",
                info.gpu or "–",
                info.commit or "–",
                info.error or info.kernels,
                str(info.samples),
                key=key,
            )

    def highlighted(self) -> SessionInfo | None:
        if not self.infos or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return self.infos.get(key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        info = self.infos.get(event.row_key.value)
        if info is not None:
            self.post_message(self.OpenRequested(info.path))

    def action_mark(self) -> None:
        """Mark the highlighted session as the first side of a comparison (toggle)."""
        info = self.highlighted()
        if info is None:
            return
        previous = self.marked
        self.marked = None if previous == info.path else info.path
        for path in {previous, info.path} - {None}:
            key = str(path)
            if key in self.infos:
                self.update_cell(key, "mark", "*" if path == self.marked else " ")
