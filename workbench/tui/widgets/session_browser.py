"""Browser of saved sessions: open one (enter), mark one for comparison (m)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

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

    BINDINGS = [
        Binding("m", "mark", "Mark"),
    ]

    @dataclass
    class OpenRequested(Message):
        path: Path

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.infos: dict[str, SessionInfo] = {}
        self.marked: Path | None = None

    def on_mount(self) -> None:
        for key, label in (
            # what decides first (STALE sources, the recommendation): at 80 columns the
            # table shows about 75 cells before it scrolls sideways
            ("mark", " "),
            ("slug", "session"),
            ("status", "status"),
            ("sources", "sources"),
            ("recommendation", "recommendation"),
            ("created", "when (UTC)"),
            ("gpu", "GPU"),
            ("commit", "commit"),
            ("shape", "shape"),
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
        for info in sessions:
            key = str(info.path)
            self.infos[key] = info
            status = Text(info.status, style=_STATUS_STYLE.get(info.status, ""))
            # the folder is <when>_<slug>: show the slug, or the whole name when unreadable
            slug = info.name.partition("_")[2] if info.created else info.name
            self.add_row(
                "*" if info.path == self.marked else " ",
                slug or info.name,
                status,
                self._sources(info),
                info.recommendation or "–",
                info.created or "–",
                info.gpu or "–",
                info.commit or "–",
                info.shape or "–",
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
