"""Start a `workbench tune` and follow it (docs/DESIGN.md §11): the kernel, arm, parameter
values and how many to confirm; then one line per screened candidate, the confirmations, the
best configuration and the reader verdict there, as the run reports them.

The screen never imports the engine: the app hands it ``start(config, events, cancelled)``
(the backend's ``tune``), which it calls from a thread worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, RichLog, Select, Static

Start = Callable[[dict[str, Any], Callable[[str, Any], None], Callable[[], bool]], Any]


def parse_params(text: str) -> dict[str, list[int]]:
    """'unroll=4,5,6; max_warps=16' -> {'unroll': [4, 5, 6], 'max_warps': [16]} (values are
    checked by the run itself, which names a bad one)."""
    out: dict[str, list[int]] = {}
    for part in text.replace("\n", ";").split(";"):
        name, sep, vals = part.strip().partition("=")
        if not part.strip():
            continue
        if not sep or not name.strip():
            raise ValueError(f"parameters {part.strip()!r}: write NAME=V1,V2; NAME=V1")
        try:
            out[name.strip()] = [int(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"parameters {part.strip()!r}: values must be integers") from None
    return out


def event_line(kind: str, data: Any) -> str | None:
    if kind == "candidate":
        where = "cache" if data.get("source") == "cache" else f"GPU {data.get('gpu')}"
        if data["status"] != "screened":
            return f"{data['candidate']}: {data['status']} ({where}) {data.get('reason') or ''}"
        return f"{data['candidate']}: screened, score {data.get('score') or 0:.4f} ({where})"
    if kind == "phase":
        return f"— {data} —"
    if kind == "confirmed":
        return f"{data['candidate']}: confirmed {data['verdict']} (estimate {data['estimate']:.4f})"
    if kind == "best":
        return f"best: {data['candidate']} ({data['why']})"
    if kind == "recommendation":
        return f"reader at the best parameters: {data.decision} ({data.arm})"
    if kind == "note":
        return f"note: {data}"
    return None


class TuneScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Cancel / close")]
    DEFAULT_CSS = """
    TuneScreen #tune-body { width: 95%; height: 90%; }
    TuneScreen #tune-form { height: auto; }
    TuneScreen #tune-form Select { width: 14; }
    TuneScreen #tune-form Input { width: 1fr; }
    TuneScreen #tune-form #tune-top { width: 8; }
    TuneScreen #tune-status { height: auto; }
    TuneScreen #tune-log { height: 1fr; border: round $primary; }
    """

    def __init__(self, start: Start | None, why_not: str = "") -> None:
        super().__init__()
        self.start, self.why_not = start, why_not
        self.running = False
        self.cancel_requested = False
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-body", id="tune-body"):
            yield Static("[b]tune[/b]  sweep a kernel's parameters (escape cancels, then closes)")
            with Horizontal(id="tune-form"):
                yield Select([("w13", "w13"), ("w2", "w2")], value="w13", allow_blank=False,
                             id="tune-kernel")  # fmt: skip
                yield Input("b3-scalar", placeholder="arm", id="tune-arm")
                yield Input("", placeholder="unroll=4,5,6; max_warps=16 (empty: all)",
                            id="tune-params")  # fmt: skip
                yield Input("3", placeholder="top", id="tune-top")
                yield Button("Start", id="tune-start", variant="primary")
            yield Static(self.why_not or "ready", id="tune-status")
            yield RichLog(id="tune-log", wrap=True)

    def config(self) -> dict[str, Any]:
        top = self.query_one("#tune-top", Input).value.strip()
        if not top.isdigit() or int(top) < 1:
            raise ValueError(f"top {top!r} must be an integer >= 1")
        return {
            "kernel": self.query_one("#tune-kernel", Select).value,
            "arm": self.query_one("#tune-arm", Input).value.strip(),
            "params": parse_params(self.query_one("#tune-params", Input).value),
            "top": int(top),
        }

    def status(self, text: str) -> None:
        self.query_one("#tune-status", Static).update(text)

    def log_line(self, text: str) -> None:
        self.lines.append(text)
        self.query_one("#tune-log", RichLog).write(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id != "tune-start" or self.running:
            return
        if self.start is None:
            self.status(f"cannot tune here: {self.why_not}")
            return
        try:
            config = self.config()
        except ValueError as e:
            self.status(str(e))
            return
        self.running = True
        self.status(f"tuning {config['kernel']} {config['arm']}…")
        self.tune(config)

    @work(thread=True, group="tune", exit_on_error=False)
    def tune(self, config: dict[str, Any]) -> None:
        def events(kind: str, data: Any) -> None:
            line = event_line(kind, data)
            if line:
                self.app.call_from_thread(self.log_line, line)

        try:
            path = self.start(config, events, lambda: self.cancel_requested)
            done = f"session {path}" + (" (interrupted)" if self.cancel_requested else "")
        except Exception as e:  # shown, never a crash of the app (a bad value, a build error)
            done = f"tune failed: {e}"
        self.app.call_from_thread(self._finished, done)

    def _finished(self, text: str) -> None:
        self.running = False
        self.status(text)
        self.log_line(text)

    def action_close(self) -> None:
        if self.running:
            self.cancel_requested = True
            self.status("cancelling after the samples in flight…")
            return
        self.dismiss(None)
