"""A variant's compiler log, read-only."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea


class CompilerLogScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,l", "dismiss", "Close")]

    def __init__(self, variant: str, log: str) -> None:
        super().__init__()
        self.variant = variant
        self.log_text = log or "(no compiler output recorded for this variant: not built yet?)"

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-body"):
            yield Static(f"[b]compiler log[/b]  {self.variant}   (escape closes)")
            yield TextArea(self.log_text, read_only=True, show_line_numbers=True, id="log-text")
