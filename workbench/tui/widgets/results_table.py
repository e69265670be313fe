"""Results per comparison (kernel, set): median times, µs per call, ratio, CI, p, k/n, verdict."""

from __future__ import annotations

import math

from rich.text import Text
from textual.binding import Binding

from workbench.tui.backend import ResultRow
from workbench.tui.widgets.table import Table

VERDICT_STYLE = {
    "FASTER": "bold green",
    "SLOWER": "bold red",
    "SAME": "bold cyan",
    "AMBIGUOUS": "bold yellow",
}


def verdict_style(words: str) -> str:
    """The style of a verdict's words: a small resolved effect (FASTER<m, SLOWER<m) as SAME,
    a resolved direction of unresolved size (FASTER~m, SLOWER~m) as AMBIGUOUS."""
    head = words.split(" ", 1)[0]
    key = "SAME" if head.endswith("<m") else "AMBIGUOUS" if head.endswith("~m") else head
    return VERDICT_STYLE.get(key, "")


def _p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def _f(x: float, digits: int = 4) -> str:
    # infinite CI bounds mean "too few pairs for an interval": say so with a dash, not "inf"
    return f"{x:.{digits}f}" if math.isfinite(x) else "–"


def _arm(arm: str) -> str:
    # A step arm names both kernels' readers ("w13=b3-coop,w2=b3-scalar"); the order is
    # always W13 then W2, so the kernel prefixes only cost width.
    return ",".join(part.split("=", 1)[-1] for part in arm.split(","))


# the role after a comparison's id, unless the id says it already ("step/hot/confirm")
# (a reference's id ends in its arm, "w13/hot/tinygemm": no tag, dim)
ROLE_TAG = {"confirm": "confirm"}
ROLE_STYLE = {"main": "bold", "reference": "dim"}


def _name(r: ResultRow) -> Text:
    tag = ROLE_TAG.get(r.role, "")
    name = r.cmp_id if not tag or r.cmp_id.endswith(tag) else f"{r.cmp_id} ({tag})"
    return Text(name, style=ROLE_STYLE.get(r.role, ""))


def split_verdict(words: str) -> tuple[str, str]:
    """``"AMBIGUOUS (rests on block 0)"`` as ``("AMBIGUOUS", "block 0")``: the verdict keeps its
    own narrow column, the blocks it rests on get one of their own (docs/DESIGN.md §7)."""
    head, _, rest = words.partition(" (")
    return head, rest.removesuffix(")").removeprefix("rests on ")


class ResultsTable(Table):
    """One row per comparison of the open session, in the order the results view gives.

    The table sits in the results view's scrolling column, above the chart and the evidence:
    the paging keys scroll that column (the table shows every row, it needs no paging of its
    own), so that PageDown and End reach the evidence while the table keeps the focus."""

    BINDINGS = [
        Binding("pagedown", "view('page_down')", "Page down", show=False),
        Binding("pageup", "view('page_up')", "Page up", show=False),
        Binding("end", "view('end')", "Evidence"),
        Binding("e", "app.export", "Export"),  # the app's key, shown in the footer
        Binding("home", "view('home')", "Home", show=False),
    ]

    def action_view(self, where: str) -> None:
        view = self.parent
        if view is None:
            return
        {"page_down": view.scroll_page_down, "page_up": view.scroll_page_up,
         "end": view.scroll_end, "home": view.scroll_home}[where]()  # fmt: skip

    # The decision first (verdict, ratio, CI), the evidence after, the arms last: on a narrow
    # terminal the table scrolls sideways and what matters most stays in view; at 140 columns
    # everything up to B ms is.
    COLUMNS = (
        "comparison",
        "verdict",
        "ratio B/A",
        "95% CI",
        "p",
        "k/n",
        "A ms",
        "B ms",
        "rests on",
        "µs/call A→B",
        "flagged",
        "A",
        "B",
    )

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        self.add_columns(*self.COLUMNS)

    def show(self, rows: tuple[ResultRow, ...] | list[ResultRow]) -> None:
        self.clear()
        for r in rows:
            verdict, rests_on = split_verdict(r.verdict)
            self.add_row(
                _name(r),
                Text(verdict, style=verdict_style(r.verdict)),
                Text(_f(r.ratio), style="bold"),
                f"[{_f(r.ci_lo)}, {_f(r.ci_hi)}]",
                _p(r.p),
                f"{r.k}/{r.n}",
                _f(r.a_ms),
                _f(r.b_ms),
                rests_on or "–",
                f"{_f(r.a_us_per_call, 2)}→{_f(r.b_us_per_call, 2)}",
                str(r.flagged),
                _arm(r.a),
                _arm(r.b),
            )
