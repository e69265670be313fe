"""The variant matrix: kernel × layout × reader, build state, build time and ptxas report."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from workbench.tui.backend import VariantRow
from workbench.tui.widgets.table import Table

_STATE_STYLE = {
    "built": "green",
    "cached": "green",
    "building": "yellow",
    "failed": "bold red",
    "not built": "dim",
}


def _num(value: int | float | None, fmt: str = "{}") -> str:
    return "–" if value is None else fmt.format(value)


class VariantMatrix(Table):
    """One row per variant, keyed by the variant name; rows update in place as builds finish."""

    # the app's keys for builds and runs, shown in the footer while the matrix has the focus
    BINDINGS = [
        Binding("b", "app.build", "Build"),
        Binding("r", "app.run", "Run"),
        Binding("l", "app.compiler_log", "Log"),
    ]

    DEFAULT_CSS = """
    VariantMatrix { height: auto; max-height: 14; }
    """

    # the name first: a user's spec or a +calib build has the kernel, layout and reader of a
    # built-in, and only its name tells them apart; it starts with the kernel ("w13:..."), so
    # no kernel column (80 columns then hold every column of "w13:b3-scalar+calib")
    COLUMNS = (
        ("name", "variant"),
        ("layout", "layout"),
        ("reader", "reader"),
        ("state", "state"),
        ("time", "secs"),  # of the build; a short label leaves 80 columns room for the name
        ("regs", "regs"),
        ("spills", "spills"),
        ("smem", "smem B"),
    )

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.rows_by_name: dict[str, VariantRow] = {}

    def on_mount(self) -> None:
        for key, label in self.COLUMNS:
            self.add_column(label, key=key)

    def _cells(self, row: VariantRow) -> list:
        spills = _num(row.spills)
        spill_cell = Text(spills, style="bold red" if row.spills else "")
        return [
            row.name,
            row.layout,
            row.reader,
            Text(row.state, style=_STATE_STYLE.get(row.state, "")),
            _num(row.seconds, "{:.1f}"),
            _num(row.registers),
            spill_cell,
            _num(row.smem),
        ]

    def set_rows(self, rows: list[VariantRow]) -> None:
        self.clear()
        self.rows_by_name = {}
        for row in rows:
            self.rows_by_name[row.name] = row
            self.add_row(*self._cells(row), key=row.name)

    def update_variant(self, row: VariantRow) -> None:
        """Replace one row's cells (or append it if the matrix did not know the variant)."""
        if row.name not in self.rows_by_name:
            self.rows_by_name[row.name] = row
            self.add_row(*self._cells(row), key=row.name)
            return
        self.rows_by_name[row.name] = row
        for (key, _), cell in zip(self.COLUMNS, self._cells(row), strict=True):
            self.update_cell(row.name, key, cell)

    def selected(self) -> VariantRow | None:
        """The variant under the cursor, if any."""
        if not self.rows_by_name or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return self.rows_by_name.get(key)
