"""The recommendation, where it is seen first: one line per kernel, above the results table.

Its evidence and the rule take many lines; they are the `EvidencePanel` at the end of the
results, which the first line of this panel says how to reach."""

from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text
from textual.widgets import Static

from workbench.tui.backend import Recommendation

HINT = "end: evidence and rule"


def choice_style(choice: str) -> str:
    if "inconclusive" in choice:
        return "bold yellow"
    return "bold green" if "coop" in choice else "bold cyan"


def short_arms(text: str) -> str:
    """``w13=b3-coop,w2=b3-scalar`` as ``b3-coop,b3-scalar``: a step arm always names W13's
    reader then W2's (as the results table shows it), and the prefixes cost a third of a line."""
    return re.sub(r"\b(w13|w2)=", "", text)


def title() -> Text:
    """The panel's title line, a widget of its own (``#recommendation-title``): a short screen
    (under 36 lines) drops it, so that the rows that decide stay in view."""
    return Text.assemble(("Recommendation", "bold"), (f"   {HINT}", "dim"))


class _Line:
    """A recommendation's line: the reader chosen, then why where the line has room for it whole
    (the evidence holds it at the end); never cut, never wrapped."""

    def __init__(self, head: Text, reason: Text) -> None:
        self.head, self.reason = head, reason

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        whole = self.head.cell_len + self.reason.cell_len <= options.max_width
        yield self.head + self.reason if whole else self.head


class RecommendationPanel(Static):
    """One line per recommendation: the reader chosen, then why where it fits whole. Empty
    until a session is open."""

    def show(self, recommendations: tuple[Recommendation, ...]) -> None:
        if not recommendations:
            self.update(Text("No recommendation: this session has no reader comparison.", "dim"))
            return
        lines = []
        for rec in recommendations:
            head = Text.assemble(
                (f"{rec.kernel.upper():<5}", "bold"),
                " → ",
                (short_arms(rec.choice), choice_style(rec.choice)),
                no_wrap=True,
                overflow="ellipsis",
            )
            lines.append(_Line(head, Text(f"   {rec.reason}", "dim")))
        self.update(Group(*lines))

    def clear_view(
        self, message: str = "Open a session or finish a run to see a recommendation."
    ) -> None:
        self.update(Text(message, style="dim"))
