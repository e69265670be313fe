"""The DataTable the TUI's tables share: its lines are redrawn when its column widths change,
it never shows a column cut at its right edge, and its paging keys can scroll the column it
sits in."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.strip import Strip
from textual.widgets import DataTable


def paging_keys(end: str) -> list[Binding]:
    """The bindings of a table that shows all its rows inside a scrolling column (the results,
    a compare's tables): PageDown, PageUp, Home and End scroll that column, so that they reach
    what follows the table while it keeps the focus. ``end``: the footer's word for End."""
    return [
        Binding("pagedown", "scroll_column('page_down')", "Page down", show=False),
        Binding("pageup", "scroll_column('page_up')", "Page up", show=False),
        Binding("end", "scroll_column('end')", end),
        Binding("home", "scroll_column('home')", "Home", show=False),
    ]


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

    def action_scroll_column(self, where: str) -> None:
        """The keys of `paging_keys`: scroll the nearest scrolling container around the table."""
        column = next((n for n in self.ancestors if isinstance(n, ScrollableContainer)), None)
        if column is None:
            return
        {"page_down": column.scroll_page_down, "page_up": column.scroll_page_up,
         "end": column.scroll_end, "home": column.scroll_home}[where]()  # fmt: skip

    def render_line(self, y: int) -> Strip:
        # A column that does not fit whole is left blank, not cut: "sou" and "805" read as
        # data (issue 57); the horizontal scrollbar says there is more, → brings it in.
        strip = super().render_line(y)
        width = self.size.width
        edge = self._whole_edge(width)
        if edge >= width:
            return strip
        return strip.crop(0, edge).extend_cell_length(width, self.rich_style)

    def _whole_edge(self, width: int) -> int:
        """Where the last column shown whole ends, in cells from the table's left edge."""
        widths = self._widths()
        edge = right = sum(widths[: self.fixed_columns])
        right -= self.scroll_offset.x
        for w in widths[self.fixed_columns :]:
            right += w
            if right > width:
                break
            edge = max(edge, right)
        return edge

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
