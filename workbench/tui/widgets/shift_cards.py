"""The shift table of two sessions laid out one comparison to a card: its name and the columns
of the pair (the shift B−A, its interval, changed) on the first line, then session A's line and
session B's, each with that session's columns (ratio [CI], verdict) of the table.

As one row of the table, a comparison took 140 cells and more (a verdict that rests on a block
names it, in both sessions): at 80 columns `ratio in A [` was all there was of session A, and B
was two screens to the right (issue 57). A card needs the width of one session's figures, and
the main comparisons come first, so that at 80x24 every figure of both sessions that decides is
on screen. The cells are the table's own (`tui.analysis.compare_markdown` makes them), laid out,
never recomputed; a line longer than the screen wraps, never cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from workbench.tui.widgets.results_table import ROLE_ORDER, ROLE_STYLE, verdict_style

SIDES = ("A", "B")


def _twin(header: str) -> str:
    """The header of session B's column beside session A's ``header``."""
    return re.sub(r"\bA\b", "B", header)


def _label(header: str) -> str:
    """A per-session column's header without its session: "ratio in A [CI]" → "ratio [CI]",
    "verdicts A/B" → "verdicts"."""
    return re.sub(r"\s*\b(in )?(A/B|A)\b:?", "", header).strip()


def _halves(cell: str) -> list[str]:
    """A cell of a column "… A/B" as its A half and its B half: split at the one "/" outside
    parentheses (a verdict's "(rests on …)" names blocks, never a "/")."""
    depth, cut = 0, []
    for i, ch in enumerate(cell):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "/" and depth == 0:
            cut.append(i)
    return [cell[: cut[0]].strip(), cell[cut[0] + 1 :].strip()] if len(cut) == 1 else [cell]


@dataclass(frozen=True)
class Layout:
    """Which of the table's columns go on a card's first line (``joint``), which on its A and
    B lines (``sides``: per label, the column of A and that of B, or one "A/B" column twice)."""

    joint: tuple[int, ...]
    sides: tuple[tuple[str, int, int], ...]

    @classmethod
    def of(cls, header: list[str]) -> Layout | None:
        """The layout of a table whose ``header`` has columns per session ("… A …" beside the
        same with B, or "… A/B"), else None: not a shift table."""
        joint, sides, taken = [], [], set()
        for i, h in enumerate(header[1:], 1):
            if i in taken:
                continue
            twin = _twin(h)
            if twin != h and "A/B" not in h and twin in header:
                j = header.index(twin)
                sides.append((_label(h), i, j))
                taken.add(j)
            elif re.search(r"\bA/B\b", h):
                sides.append((_label(h), i, i))
            else:
                joint.append(i)
        return cls(tuple(joint), tuple(sides)) if sides else None

    def side_cells(self, row: list[str]) -> tuple[list[str], list[str]]:
        """A's cells and B's, in the order of ``sides``."""
        a, b = [], []
        for _, i, j in self.sides:
            if i == j:
                halves = _halves(row[i])
                a.append(halves[0])
                b.append(halves[-1] if len(halves) == 2 else "")
            else:
                a.append(row[i])
                b.append(row[j])
        return a, b


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


def cards(rows: list[list[str]], roles: Mapping[str, str]) -> Group | None:
    """The cards of a shift table (``rows``: the header first), grouped by role, the main
    comparisons first; None where the table has no columns per session."""
    header, *body = rows
    body = [r + [""] * (len(header) - len(r)) for r in body]
    layout = Layout.of(header)
    if layout is None:
        return None
    joint = [0, *layout.joint]
    sided = [layout.side_cells(r) for r in body]
    labels = [label for label, _, _ in layout.sides]
    # each column as wide as its widest cell, the legend's included
    jw = [max(cell_len(r[i]) for r in [header, *body]) for i in joint]
    sw = [
        max([cell_len(labels[k])] + [cell_len(c[s][k]) for c in sided for s in (0, 1)])
        for k in range(len(labels))
    ]
    lines = [
        _padded([header[i] for i in joint], jw, ["dim"] * len(joint)),
        _padded(labels, sw, ["dim"] * len(labels), lead="  "),
    ]

    def rank(n: int) -> tuple[int, str]:  # by role, the table's order within one
        role = roles.get(body[n][0], "")
        return ROLE_ORDER.get(role, 2), role

    order = sorted(range(len(body)), key=rank)
    group = None
    for n in order:
        row, sides = body[n], sided[n]
        role = roles.get(row[0], "")
        if role != group:
            lines.append(Text(role or "other", "bold dim underline"))
            group = role
        first = [ROLE_STYLE.get(role) or "bold"] + [""] * len(layout.joint)
        lines.append(_padded([row[i] for i in joint], jw, first))
        for side, cells in zip(SIDES, sides, strict=True):
            lines.append(_padded(cells, sw, [verdict_style(c) for c in cells], lead=f"{side} "))
    return Group(*lines)


class ShiftCards(Static):
    """The cards of one shift table (`cards`)."""

    def __init__(self, content: Group) -> None:
        super().__init__(content, classes="shift-cards")
