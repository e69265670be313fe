"""The shift table of two sessions (docs/DESIGN.md §7.6): its columns and the text of every cell,
computed here once from ``compare.SessionDiff``, as ``analysis/table.py`` does for the table of
one session's comparisons.

The front ends only lay the cells out: `workbench sessions compare` as aligned text
(workbench/commands/sessions.py), the TUI's compare view as Markdown (workbench/tui/analysis.py).
Each picks its columns by key; none formats a cell of its own (`tests/test_shifts.py` fails on a
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


@dataclass(frozen=True)
class ShiftColumn:
    """One column: ``key`` names it for the faces; in ``header``, "{conf}" becomes the shift's
    confidence ("95%") and "{ratio_conf}" the sessions' verdicts' ("95%")."""

    key: str
    header: str
    cell: Callable[[Shift], str]


COLUMNS: dict[str, ShiftColumn] = {
    c.key: c
    for c in (
        ShiftColumn("comparison", "comparison", lambda s: s.id),
        ShiftColumn("ms_a", "A: ms A/B", lambda s: _ms(s.a)),
        ShiftColumn("ms_b", "B: ms A/B", lambda s: _ms(s.b)),
        ShiftColumn("ratio_a", "A: ratio [{ratio_conf} CI]", lambda s: _ratio(s.a)),
        ShiftColumn("ratio_b", "B: ratio [{ratio_conf} CI]", lambda s: _ratio(s.b)),
        ShiftColumn(
            "verdicts", "verdicts A/B", lambda s: f"{s.a.verdict_words}/{s.b.verdict_words}"
        ),
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
    keys: tuple[str, ...]
    headers: tuple[str, ...]
    rows: tuple[ShiftRow, ...]

    def index(self, key: str) -> int:
        return self.keys.index(key)


def shift_table(diff: SessionDiff, keys: Sequence[str]) -> ShiftTable:
    """The rows of ``diff``'s shifts with the columns ``keys`` (KeyError on an unknown key): the
    one builder of shift rows."""
    cols = [COLUMNS[k] for k in keys]
    first = diff.shifts[0] if diff.shifts else None
    conf = f"{first.conf * 100:g}%" if first else ""
    ratio_conf = f"{first.a.verdict.conf * 100:g}%" if first else ""
    heads = tuple(c.header.format(conf=conf, ratio_conf=ratio_conf) for c in cols)
    rows = tuple(ShiftRow(s, tuple(c.cell(s) for c in cols)) for s in diff.shifts)
    return ShiftTable(tuple(keys), heads, rows)
