"""Tables and lines that fit the terminal (`sessions list`, `show`, `compare`, `ab`'s table).

On a terminal (or with ``--width N``) no line passes the width: a table leaves out the columns a
reader can do without, in the order its ``Col``s rank them, lets its one folding column wrap
inside itself, and, where even the columns it must keep do not fit side by side, prints one record
per row instead ("header: value" items, every one whole). The columns left out are named, with
the option that shows them all. Every other line is folded at word boundaries. Piped, or with
``--wide``, rows and lines are printed whole, as before.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

GAP = "  "  # between columns
RECORD_GAP = "   "  # between a record's items
FOLD_MIN = 12  # narrowest a folding column gets before the table turns into records
WIDE_HINT = "--wide shows every column"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--wide`` and ``--width N``, for the commands whose tables fit the terminal."""
    p.add_argument(
        "--wide",
        action="store_true",
        help="print whole rows and lines, every column, whatever the terminal's width (as piped)",
    )
    p.add_argument(
        "--width",
        type=int,
        default=None,
        metavar="N",
        help="fit the tables and lines to N columns (default: the terminal's on a terminal; "
        "piped: whole rows)",
    )


MIN_WIDTH = 40  # narrower than this, no table of ours can keep its answer whole


def width_of(args: argparse.Namespace, stream: TextIO | None = None) -> int | None:
    """The width to fit to, or None for whole rows: ``--wide`` none, ``--width N`` N, else the
    terminal's (shutil: $COLUMNS, then the terminal) where ``stream`` (stdout) is one.
    BadArgument (exit 2) for a width below MIN_WIDTH or both options at once."""
    from workbench.core.errors import BadArgument

    wide, width = getattr(args, "wide", False), getattr(args, "width", None)
    if wide and width is not None:
        raise BadArgument(f"--wide cannot be combined with --width {width}: give one")
    if width is not None and width < MIN_WIDTH:
        raise BadArgument(f"--width {width} must be at least {MIN_WIDTH} columns")
    if wide or getattr(args, "json", False):
        return None
    if width is not None:
        return width
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return None
    return max(MIN_WIDTH, shutil.get_terminal_size().columns)


# ------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Col:
    """A column: its ``header``; ``align`` "l" or "r"; ``keep``: never left out (what the
    table answers); ``rank``: the order in which it is left out (lowest first; None: after the
    ranked ones, the rightmost first); ``fold``: its cells may wrap inside the column."""

    header: str
    align: str = "l"
    keep: bool = False
    rank: int | None = None
    fold: bool = False


@dataclass
class Fitted:
    """A laid-out table: each line a list of (text, column index or None for padding), so a
    face can style a column's cells; ``left_out``: headers of the columns not shown."""

    lines: list[list[tuple[str, int | None]]] = field(default_factory=list)
    line_rows: list[int | None] = field(default_factory=list)  # each line's row (None: header)
    left_out: list[str] = field(default_factory=list)
    records: bool = False

    def plain(self) -> list[str]:
        return ["".join(t for t, _ in line).rstrip() for line in self.lines]


def _visible(text: str) -> int:
    return len(ANSI.sub("", text))


def _natural(cols: Sequence[Col], rows: Sequence[Sequence[str]], shown: list[int]) -> list[int]:
    return [max(len(cols[i].header), *(len(r[i]) for r in rows)) for i in shown]


def _grid(cols, rows, shown: list[int], widths: list[int]) -> tuple[list, list[int | None]]:
    """The header and the rows at ``widths`` (lines, and each line's row); a folding column's
    cells wrap inside it."""
    out, which = [], []
    for n, r in enumerate([[c.header for c in cols], *rows]):
        parts = [
            textwrap.wrap(r[i], w, break_on_hyphens=False) or [""]
            if cols[i].fold and len(r[i]) > w
            else [r[i]]
            for i, w in zip(shown, widths, strict=True)
        ]
        for k in range(max(len(p) for p in parts)):
            line: list[tuple[str, int | None]] = []
            for j, (i, w) in enumerate(zip(shown, widths, strict=True)):
                cell = parts[j][k] if k < len(parts[j]) else ""
                line += [(GAP, None)] if j else []
                line.append((cell.rjust(w) if cols[i].align == "r" else cell.ljust(w), i))
            out.append(line)
            which.append(n - 1 if n else None)
    return out, which


def _records(cols, rows, width: int) -> tuple[list, list[int | None]]:
    """One record per row: its first cell, then "header: value" items packed into lines of at
    most ``width``, continuation lines indented by two (an item is split only where it alone is
    wider than a line)."""
    out, which = [], []
    for k, r in enumerate(rows):
        line: list[tuple[str, int | None]] = []
        used = 0
        items = [(r[0], 0)] + [(f"{cols[i].header}: {r[i]}", i) for i in range(1, len(cols))]
        for n, (text, i) in enumerate(items):
            indent = 2 if n else 0
            room = width - indent
            for piece in textwrap.wrap(text, room) if len(text) > room else [text]:
                if line and used + len(RECORD_GAP) + len(piece) <= width:
                    line += [(RECORD_GAP, None), (piece, i)]
                    used += len(RECORD_GAP) + len(piece)
                    continue
                if line:
                    out.append(line)
                    which.append(k)
                line, used = [("  ", None)] * bool(indent) + [(piece, i)], indent + len(piece)
        out.append(line)
        which.append(k)
    return out, which


def fit_table(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int | None) -> Fitted:
    """``rows`` (cells, one per ``cols``) laid out within ``width`` columns (None: whole)."""
    shown = list(range(len(cols)))
    if width is None:
        return Fitted(*_grid(cols, rows, shown, _natural(cols, rows, shown)))

    def need(ws: list[int]) -> int:
        return sum(ws) + len(GAP) * (len(ws) - 1)

    order = sorted((i for i, c in enumerate(cols) if not c.keep and not c.fold),
                   key=lambda i: (cols[i].rank is None, cols[i].rank or 0, -i))  # fmt: skip
    order += [i for i, c in enumerate(cols) if c.fold and not c.keep]  # a folding one last
    left: list[int] = []
    while True:
        widths = _natural(cols, rows, shown)
        over = need(widths) - width
        folds = [j for j, i in enumerate(shown) if cols[i].fold]
        if over > 0 and folds:  # let the folding column give up what it can...
            j = folds[0]
            give = min(over, widths[j] - max(FOLD_MIN, len(cols[shown[j]].header)))
            cells = [r[shown[j]] for r in rows]
            extra = sum(len(textwrap.wrap(c, widths[j] - give)) - 1 for c in cells if c)
            # ...where that costs a line here and there, not one per row (else drop a column)
            if give > 0 and (extra <= max(1, len(rows) // 10) or not order):
                widths[j] -= give
                over -= give
        if over <= 0:
            return Fitted(*_grid(cols, rows, shown, widths), [cols[i].header for i in left])
        if not order:
            break
        drop = order.pop(0)
        shown.remove(drop)
        left.append(drop)
    # the columns it must keep do not fit side by side: every column, one record per row
    return Fitted(*_records(cols, rows, width), [], records=True)


def left_out_line(fitted: Fitted, width: int, hint: str = WIDE_HINT) -> str | None:
    """ "(left out to fit 80 columns: ...; --wide shows every column)", or None."""
    if not fitted.left_out:
        return None
    return f"(left out to fit {width} columns: {', '.join(fitted.left_out)}; {hint})"


def print_rows(header: Sequence[str], rows: Sequence[Sequence[str]], policy: Sequence[Col] | None,
               width: int | None, out: TextIO | None = None) -> None:  # fmt: skip
    """A plain table (the first row its header) fitted to ``width``, and what it left out.
    ``policy``: a Col per header (None: keep every column, as piped)."""
    cols = list(policy) if policy else [Col(h) for h in header]
    fitted = fit_table(cols, rows, width)
    out = sys.stdout if out is None else out
    for line in fitted.plain():
        print(line, file=out)
    note = None if width is None else left_out_line(fitted, width)
    if note:
        print(note, file=out)


def policy(header: Sequence[str], keep: Sequence[str] = (), ranks: Sequence[str] = (),
           fold: Sequence[str] = (), right: Sequence[str] = ()) -> list[Col]:  # fmt: skip
    """Cols for ``header`` by the words of its titles: a title containing one of ``keep`` is
    kept, one of ``ranks`` left out in that order, one of ``fold`` folds, one of ``right`` is
    right-aligned (matching words, not whole titles, lets a table gain or rename a column
    without losing its layout)."""

    def first(title: str, words: Sequence[str]) -> int | None:
        return next((k for k, w in enumerate(words) if w in title), None)

    return [
        Col(h, "r" if first(h, right) is not None else "l", first(h, keep) is not None,
            first(h, ranks), first(h, fold) is not None)
        for h in header
    ]  # fmt: skip


# ------------------------------------------------------------------------------- lines


def fold_line(line: str, width: int) -> list[str]:
    """``line`` folded at word boundaries into lines of at most ``width``, continuation lines
    indented two more than the line itself (a word wider than a line is split)."""
    line = line.rstrip()
    if _visible(line) <= width or ANSI.search(line):
        return [line]  # a styled line: laid out at the console's width already
    lead = line[: len(line) - len(line.lstrip())]
    more = lead + "  " if len(lead) + 2 < width // 2 else lead
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=more,
                         break_on_hyphens=False, drop_whitespace=True) or [""]  # fmt: skip


class _Folding:
    """A text stream that folds each line written to it at ``width`` (sys.stdout's stand-in
    while a fitting command runs)."""

    def __init__(self, stream: TextIO, width: int) -> None:
        self.stream, self.width, self.pending = stream, width, ""

    def write(self, s: str) -> int:
        self.pending += s
        *done, self.pending = self.pending.split("\n")
        for line in done:
            self.stream.write("\n".join(fold_line(line, self.width)) + "\n")
        return len(s)

    def flush(self) -> None:
        if self.pending:
            self.stream.write("\n".join(fold_line(self.pending, self.width)))
            self.pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno: the stream's
        return getattr(self.stream, name)


@contextlib.contextmanager
def folded_stdout(width: int | None) -> Iterator[None]:
    """While it lasts, every line printed to stdout is folded at ``width`` (None: untouched)."""
    if width is None:
        yield
        return
    real, sys.stdout = sys.stdout, _Folding(sys.stdout, width)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = real
