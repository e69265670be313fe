"""The DataTable the TUI's tables share: its lines are redrawn when its column widths change."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable


class Table(DataTable):
    """A DataTable that redraws its lines once the cells of new rows have been measured.

    Textual's DataTable (8.2.8, and its main branch of 2026-06-30) measures the cells of new
    rows on its next idle (`_update_dimensions`), after `add_row` has returned, but keys its
    line, row and cell caches on `_update_count`, which that step leaves as it was. A paint
    that falls between `add_row` and the table's idle (the screen repaints on a timer of its
    own) caches the lines at the old widths, for a table just filled its header labels' widths,
    and they stay until the cursor, the hover or the size changes (textual issues 4470, 3533):
    at 80x24 the sessions table showed "synthet", "comple", "NVI" and the columns after "GPU",
    and the browse-mode snapshot failed whenever the suite's timing let that paint in. When the
    widths change, the cached lines go too.
    """

    def _widths(self) -> list[int]:
        return [column.get_render_width(self) for column in self.ordered_columns]

    def _update_dimensions(self, new_rows: Iterable) -> None:
        before = self._widths()
        super()._update_dimensions(new_rows)
        if self._widths() != before:
            self._redraw()

    def _update_column_widths(self, updated_cells: set) -> None:
        before = self._widths()
        super()._update_column_widths(updated_cells)
        if self._widths() != before:
            self._redraw()

    def _redraw(self) -> None:
        self._update_count += 1  # a new key for every cached line, row and cell
        self._clear_caches()
        self.refresh()
