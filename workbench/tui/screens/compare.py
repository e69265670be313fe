"""Two sessions side by side: the comparison the backend makes (`CompareView`), its notes as
Markdown and its shift table, as data, as one card per comparison (widgets/shift_cards.py), the
main comparisons first: at 80x24 both sessions' ratio, interval and verdict of each is on screen
without scrolling sideways."""

from __future__ import annotations

from collections.abc import Iterator

from textual.widget import Widget

from workbench.tui.backend import CompareView
from workbench.tui.screens.tables import TablesScreen
from workbench.tui.widgets.shift_cards import ShiftCards, cards


class CompareScreen(TablesScreen):
    HINT = "escape closes · pgdn/end scroll"

    def __init__(self, title: str, view: CompareView) -> None:
        super().__init__(title, view.head)
        self.view = view

    def parts(self) -> Iterator[str | Widget]:
        yield from super().parts()  # the sessions, the warnings and notes
        if self.view.table is not None:
            yield ShiftCards(cards(self.view.table, self.view.roles))
        yield self.view.tail
