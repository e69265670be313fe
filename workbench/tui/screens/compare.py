"""Two sessions side by side: the comparison the backend writes (`CompareView`), its notes as
Markdown and its shift table as one card per comparison (widgets/shift_cards.py), the main
comparisons first: at 80x24 both sessions' ratio, interval and verdict of each is on screen
without scrolling sideways."""

from __future__ import annotations

from textual.widget import Widget

from workbench.tui.backend import CompareView
from workbench.tui.screens.tables import Rows, TablesScreen
from workbench.tui.widgets.shift_cards import ShiftCards, cards


class CompareScreen(TablesScreen):
    HINT = "escape closes · pgdn/end scroll"

    def __init__(self, title: str, view: CompareView) -> None:
        super().__init__(title, view.markdown)
        self.roles = view.roles

    def table(self, rows: Rows) -> Widget:
        laid = cards(rows, self.roles)
        return super().table(rows) if laid is None else ShiftCards(laid)
