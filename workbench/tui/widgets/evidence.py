"""The evidence behind each recommendation and the rule that decides, at the end of the results."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from workbench.tui.backend import Recommendation
from workbench.tui.widgets.recommendation import choice_style


class EvidencePanel(Static):
    """The session's notes; per recommendation: the choice, the reason, one line of figures per
    expert set; then the rule. Empty until a session is open."""

    def show(
        self, recommendations: tuple[Recommendation, ...], rule: str, notes: tuple[str, ...] = ()
    ) -> None:
        """``notes``: the session's notes, whole here (the results' header gives each one line)."""
        parts: list[Text] = [Text(f"Note: {n}", style="yellow") for n in notes]
        if parts and recommendations:
            parts.append(Text(""))
        if not recommendations:
            self.update(Group(*parts) if parts else "")
            return
        for rec in recommendations:
            parts.append(
                Text.assemble(
                    (f"{rec.kernel.upper():<5}", "bold"),
                    " → ",
                    (rec.choice, choice_style(rec.choice)),
                )
            )
            parts.append(Text(f"  {rec.reason}"))
            for line in rec.evidence:
                parts.append(Text(f"    • {line}", style="default"))
        parts.append(Text(""))
        parts.append(Text("Rule: " + rule, style="italic dim"))
        self.update(Group(*parts))
