"""The shift table of two sessions laid out one comparison to a card: its name and the columns
of the pair (the shift B−A, its interval, changed) on the first line, then session A's line and
session B's, each with that session's columns (ratio [CI], verdict) of the table.

As one row of the table, a comparison took 140 cells and more (a verdict that rests on a block
names it, in both sessions): at 80 columns `ratio in A [` was all there was of session A, and B
was two screens to the right (issue 57). A card needs the width of one session's figures, and
the main comparisons come first, so that at 80x24 every figure of both sessions that decides is
on screen. The cells are the table's own (`analysis.shifts.shift_table`, handed over as data in
the backend's `CompareView`), picked by key, never recomputed and never taken apart; a line
longer than the screen wraps, never cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from workbench.tui.widgets.results_table import ROLE_ORDER, ROLE_STYLE, verdict_style

if TYPE_CHECKING:  # the table comes built; NumPy loads with the first comparison, not before
    from workbench.analysis.shifts import ShiftTable

# a card's first line: the pair's columns, by key (the comparison's name first)
JOINT = ("comparison", "shift", "interval", "changed")
# then a line per session: its columns, by key, in the same order for A and for B
SIDES = (("A", ("ratio_a", "verdict_a")), ("B", ("ratio_b", "verdict_b")))


@dataclass(frozen=True)
class Card:
    """One comparison's card: its role and its cells by key (those of `JOINT` and `SIDES`)."""

    role: str
    cells: Mapping[str, str]


def card_cells(table: ShiftTable, roles: Mapping[str, str]) -> list[Card]:
    """The cards of ``table``'s rows, the main comparisons first, then the confirmations, then
    the rest; within a role, the table's order."""
    keys = (*JOINT, *(k for _, side in SIDES for k in side))
    laid = [{k: table.cell(row, k) for k in keys} for row in table.rows]
    made = [Card(roles.get(cells["comparison"], ""), cells) for cells in laid]
    return sorted(made, key=lambda c: (ROLE_ORDER.get(c.role, 2), c.role))


def _padded(cells: list[str], widths: list[int], styles: list[str], lead: str = "") -> Text:
    """One line: ``lead``, then the cells, each but the last padded to its column's width."""
    line = Text(lead, "dim")
    for k, (cell, width, style) in enumerate(zip(cells, widths, styles, strict=True)):
        if k:
            line.append("  ")
        line.append(cell, style)
        if k < len(cells) - 1:
            line.append(" " * (width - cell_len(cell)))
    return line


def cards(table: ShiftTable, roles: Mapping[str, str]) -> Group:
    """The cards of ``table`` (`card_cells`) under one line of the pair's headers and one of a
    session's labels, grouped by role."""
    laid = card_cells(table, roles)
    heads = [table.header(k) for k in JOINT]
    # a session's columns are labelled once, by A's labels (B's columns hold the same figures)
    labels = [table.label(k) for k in SIDES[0][1]]
    # each column as wide as its widest cell, its header or label included
    jw = [
        max(cell_len(h), *(cell_len(c.cells[k]) for c in laid))
        for h, k in zip(heads, JOINT, strict=True)
    ]
    sw = [
        max(cell_len(label), *(cell_len(c.cells[side[n]]) for c in laid for _, side in SIDES))
        for n, label in enumerate(labels)
    ]
    lines = [
        _padded(heads, jw, ["dim"] * len(heads)),
        _padded(labels, sw, ["dim"] * len(labels), lead="  "),
    ]
    group = None
    for card in laid:
        if card.role != group:
            lines.append(Text(card.role or "other", "bold dim underline"))
            group = card.role
        first = [ROLE_STYLE.get(card.role) or "bold"] + [""] * (len(JOINT) - 1)
        lines.append(_padded([card.cells[k] for k in JOINT], jw, first))
        for name, side in SIDES:
            cells = [card.cells[k] for k in side]
            lines.append(_padded(cells, sw, [verdict_style(c) for c in cells], lead=f"{name} "))
    return Group(*lines)


class ShiftCards(Static):
    """The cards of one shift table (`cards`)."""

    def __init__(self, content: Group) -> None:
        super().__init__(content, classes="shift-cards")
