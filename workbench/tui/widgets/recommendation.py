"""The recommendation panel: the reader chosen per kernel, the rule, and the evidence behind it."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from workbench.tui.backend import Recommendation


def _choice_style(choice: str) -> str:
    if "inconclusive" in choice:
        return "bold yellow"
    return "bold green" if "coop" in choice else "bold cyan"


class RecommendationPanel(Static):
    """Renders the session's recommendations; empty until a session is open."""

    def show(self, recommendations: tuple[Recommendation, ...], rule: str) -> None:
        if not recommendations:
            self.update(Text("No recommendation: this session has no reader comparison.", "dim"))
            return
        parts: list[Text] = []
        for rec in recommendations:
            head = Text.assemble(
                (f"{rec.kernel.upper():<5}", "bold"), " → ", (rec.choice, _choice_style(rec.choice))
            )
            parts.append(head)
            parts.append(Text(f"  {rec.reason}"))
            for line in rec.evidence:
                parts.append(Text(f"    • {line}", style="default"))
        parts.append(Text(""))
        parts.append(Text("Rule: " + rule, style="italic dim"))
        self.update(Group(*parts))

    def clear_view(
        self, message: str = "Open a session or finish a run to see a recommendation."
    ) -> None:
        self.update(Text(message, style="dim"))
