"""The shift table of two sessions (docs/DESIGN.md §7.6): its columns and the text of every cell,
computed here once from ``compare.SessionDiff``, as ``analysis/table.py`` does for the table of
one session's comparisons.

The front ends only lay the cells out: `workbench sessions compare` as aligned text
(workbench/commands/sessions.py), the TUI's compare view as one card per comparison
(workbench/tui/widgets/shift_cards.py, the table handed over as data by workbench/tui/analysis.py).
Each picks its columns by key, a session's by its own key (never out of a header's text or a
joint cell's halves); none formats a cell of its own (`tests/test_shifts.py` fails on a
second builder of shift rows, or on a front end that does not take its rows from here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.analysis.compare import SessionDiff, Shift
from workbench.analysis.model import ComparisonResult
from workbench.core.fmt import DASH, interval, num

# What the "changed" column's words mean, for the faces that print a key under the table.
CHANGED_LEGEND = (
    "changed: yes when the shift's interval excludes 0; 'verdict only' when the verdicts differ "
    "but the shift is within the noise"
)


def changed(s: Shift) -> str:
    """What moved from A to B: "yes" (the ratio: the interval excludes 0), "verdict only" (the
    verdicts differ but the shift is within the noise), else "no". Never "no" beside two
    different verdicts."""
    if s.changed:
        return "yes"
    return "verdict only" if s.verdict_changed else "no"


def _ms(r: ComparisonResult) -> str:
    return f"{num(r.a_ms, none=DASH)}/{num(r.b_ms, none=DASH)}"


def _ratio(r: ComparisonResult) -> str:
    v = r.verdict
    return f"{num(v.median, none=DASH)} {interval(v.ci_low, v.ci_high)}"


def _verdict(r: ComparisonResult) -> str:
    return r.verdict_words


@dataclass(frozen=True)
class ShiftColumn:
    """One column: ``key`` names it for the faces; ``side`` is the session whose figures it
    holds ("A" or "B"; "" for a column of the pair) and ``label`` its header without the
    session, in which "{conf}" becomes the shift's confidence ("95%") and "{ratio_conf}" the
    sessions' verdicts' ("95%")."""

    key: str
    label: str
    cell: Callable[[Shift], str]
    side: str = ""

    def header(self, label: str) -> str:
        """The column's header of its ``label`` as formatted: "A: ratio [95% CI]"."""
        return f"{self.side}: {label}" if self.side else label


COLUMNS: dict[str, ShiftColumn] = {
    c.key: c
    for c in (
        ShiftColumn("comparison", "comparison", lambda s: s.id),
        ShiftColumn("ms_a", "ms A/B", lambda s: _ms(s.a), "A"),
        ShiftColumn("ms_b", "ms A/B", lambda s: _ms(s.b), "B"),
        ShiftColumn("ratio_a", "ratio [{ratio_conf} CI]", lambda s: _ratio(s.a), "A"),
        ShiftColumn("ratio_b", "ratio [{ratio_conf} CI]", lambda s: _ratio(s.b), "B"),
        ShiftColumn("verdict_a", "verdict", lambda s: _verdict(s.a), "A"),
        ShiftColumn("verdict_b", "verdict", lambda s: _verdict(s.b), "B"),
        # both sessions' verdicts in one cell, for `sessions compare`'s narrow table
        ShiftColumn("verdicts", "verdicts A/B", lambda s: f"{_verdict(s.a)}/{_verdict(s.b)}"),
        ShiftColumn("shift", "shift B-A", lambda s: num(s.shift, "+.4f", none=DASH)),
        ShiftColumn("interval", "{conf} interval", lambda s: interval(s.low, s.high)),
        ShiftColumn("changed", "changed", changed),
    )
}


@dataclass(frozen=True)
class ShiftRow:
    """One comparison id's cells, in the table's column order."""

    shift: Shift
    cells: tuple[str, ...]


@dataclass(frozen=True)
class ShiftTable:
    """The rows with the columns ``keys``: ``headers`` as printed ("A: ratio [95% CI]"),
    ``labels`` without the session ("ratio [95% CI]"), for a face that puts a session's cells on
    a line of its own."""

    keys: tuple[str, ...]
    headers: tuple[str, ...]
    labels: tuple[str, ...]
    rows: tuple[ShiftRow, ...]

    def index(self, key: str) -> int:
        return self.keys.index(key)

    def header(self, key: str) -> str:
        return self.headers[self.index(key)]

    def label(self, key: str) -> str:
        return self.labels[self.index(key)]

    def cell(self, row: ShiftRow, key: str) -> str:
        """``row``'s cell of the column ``key`` (ValueError where the table has no such column)."""
        return row.cells[self.index(key)]


def shift_table(diff: SessionDiff, keys: Sequence[str]) -> ShiftTable:
    """The rows of ``diff``'s shifts with the columns ``keys`` (KeyError on an unknown key): the
    one builder of shift rows."""
    cols = [COLUMNS[k] for k in keys]
    first = diff.shifts[0] if diff.shifts else None
    conf = f"{first.conf * 100:g}%" if first else ""
    ratio_conf = f"{first.a.verdict.conf * 100:g}%" if first else ""
    labels = tuple(c.label.format(conf=conf, ratio_conf=ratio_conf) for c in cols)
    heads = tuple(c.header(label) for c, label in zip(cols, labels, strict=True))
    rows = tuple(ShiftRow(s, tuple(c.cell(s) for c in cols)) for s in diff.shifts)
    return ShiftTable(tuple(keys), heads, labels, rows)
