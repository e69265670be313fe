"""Two sessions side by side: the comparison the backend writes, as Markdown."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown


class CompareScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close")]

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-body"):
            yield Markdown(f"# {self.title_text}\n\n{self.markdown}")
